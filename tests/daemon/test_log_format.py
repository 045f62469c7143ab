"""The daemon's log format: JSON lines when stderr is not a terminal (files, pipes, containers:
every deployment and test), one short line for a person when it is or with `--log-format text`
(LOOPWARDEN_LOG_FORMAT), and a start that fails is then one plain line."""
from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.support.daemon import started

pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="pty"), pytest.mark.daemon]

# "12:55:25.151 INFO    listening grpc_address=127.0.0.1:39899 ..."
TEXT_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) +(\S.*)$")


def _serve(*flags: str) -> list[str]:
    return [sys.executable, "-m", "loopwarden", "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
            *flags]


def _env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("LOOPWARDEN_")}, **extra}


def _read_until(fd: int, done, timeout: float = 30.0) -> str:
    """What the daemon wrote on the pty until `done(text)` or the other end closed."""
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done(data.decode(errors="replace")):
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: every writer closed the pty
                break
            if not chunk:
                break
            data += chunk
    return data.decode(errors="replace")


def _on_a_terminal(argv: list[str], env: dict[str, str], done) -> tuple[subprocess.Popen, str]:
    """The daemon with stderr on a pseudo-terminal, as in a shell; stopped with SIGTERM."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=terminal, env=env)
    os.close(terminal)
    try:
        return process, _read_until(controller, done)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)
        os.close(controller)


def test_not_a_terminal_keeps_json_lines():
    """Stderr to a pipe, no flag: every line is a JSON object, as deployments and log pipelines read it."""
    with started(_serve(), _env()) as daemon:
        assert daemon.listening["grpc_address"].startswith("127.0.0.1:")
        assert all("unstructured" not in line for line in daemon.seen), daemon.seen


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_text_when_asked_even_on_a_pipe(how):
    flags, env = (("--log-format", "text"), _env()) if how == "flag" else ((), _env(LOOPWARDEN_LOG_FORMAT="text"))
    process = subprocess.Popen(_serve(*flags), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = process.stderr.readline()
    finally:
        process.send_signal(signal.SIGTERM)
        rest = process.communicate(timeout=15)[1]
    match = TEXT_LINE.match(line.rstrip("\n"))
    assert match, line
    assert match.group(1) == "INFO" and match.group(2).startswith("listening grpc_address=127.0.0.1:"), line
    assert "metrics_address=127.0.0.1:" in line and 'config="<embedded default>"' in line
    assert "config_summary" not in line, "nested fields stay in the JSON format"
    assert not any(text.startswith("{") for text in rest.splitlines()), rest


def test_a_terminal_gets_human_lines():
    """No flag, stderr a (pseudo-)terminal: the start-up line and the stop lines read as text."""
    process, output = _on_a_terminal(_serve(), _env(), lambda text: "listening" in text and text.endswith("\n"))
    lines = [line for line in output.replace("\r\n", "\n").splitlines() if line]
    assert lines, output
    assert all(TEXT_LINE.match(line) for line in lines), lines
    assert " listening grpc_address=127.0.0.1:" in lines[-1]


def test_json_on_a_terminal_when_asked():
    process, output = _on_a_terminal(_serve("--log-format", "json"), _env(),
                                     lambda text: '"listening"' in text and text.endswith("\n"))
    first = output.replace("\r\n", "\n").splitlines()[0]
    assert json.loads(first)["msg"] in ("listening", "restoring state; health says NOT_SERVING until it is done")


def test_a_failed_start_on_a_terminal_is_one_plain_line():
    """The port-conflict message, alone on one line, without timestamps or JSON; exit 2."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        argv = [sys.executable, "-m", "loopwarden", "serve", "--listen", f"127.0.0.1:{port}",
                "--metrics-listen", "127.0.0.1:0"]
        process, output = _on_a_terminal(argv, _env(), lambda text: False)
    assert process.returncode == 2
    assert output.replace("\r\n", "\n") == (f"error: cannot listen: address already in use: 127.0.0.1:{port} "
                                            "(--listen HOST:PORT or LOOPWARDEN_LISTEN moves it)\n")
