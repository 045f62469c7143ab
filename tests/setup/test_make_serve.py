"""`make serve`, the README's first set-up command: it prints the gRPC, metrics and agent-hook
addresses it uses before it starts, listens on them, and a port another process holds is named with
the variables that move it (GRPC_PORT, METRICS_PORT, HOOKS_PORT, and the daemon's own flag and
variable).

`make` really runs here, with VENV set to the environment running the tests and its install stamp
taken as up to date (`-o`), so nothing is installed or rebuilt but the compiled hook command
(loopwarden-hook), which `make serve` builds with cargo when its sources changed and installs in the venv."""
from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
VENV = pathlib.Path(sys.prefix)
HINT = "make serve GRPC_PORT=PORT METRICS_PORT=PORT HOOKS_PORT=PORT moves them"

pytestmark = [pytest.mark.daemon, pytest.mark.skipif(not (VENV / "bin" / "loopwarden").exists(),
                                reason="the tests do not run from a venv with the daemon installed")]


def _make_serve(*variables: str) -> list[str]:
    """`make serve` with the given variables; HOOKS_PORT a free one unless given (tests run side by side)."""
    stamp = VENV / ".installed-runtime"
    hooks = () if any(v.startswith("HOOKS_PORT=") for v in variables) else (f"HOOKS_PORT={_free_port()}",)
    return ["make", "--no-print-directory", "-o", str(stamp), "serve", f"VENV={VENV}", "SERVE_STATE=", *hooks,
            *variables]


def _env() -> dict[str, str]:
    """This environment without make's own variables or anything that would move the ports."""
    return {key: value for key, value in os.environ.items()
            if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "GRPC_PORT", "METRICS_PORT", "HOOKS_PORT")
            and not key.startswith("LOOPWARDEN_")}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def _busy_port() -> Iterator[int]:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


def _cannot_start(stderr: str) -> str:
    """The error of the daemon's `cannot start` log line (stderr also has make's own `Error 2` line)."""
    (error,) = [json.loads(line)["error"] for line in stderr.splitlines()
                if line.startswith("{") and json.loads(line).get("msg") == "cannot start"]
    return error


def test_a_busy_grpc_port_is_named_with_the_variables_that_move_it():
    """With the gRPC port held by another process, `make serve` fails, having printed the addresses
    it tried, and the daemon's last word names GRPC_PORT and METRICS_PORT besides --listen and
    LOOPWARDEN_LISTEN."""
    metrics = _free_port()
    with _busy_port() as grpc_port:
        done = subprocess.run(_make_serve(f"GRPC_PORT={grpc_port}", f"METRICS_PORT={metrics}"), cwd=REPO,
                              env=_env(), capture_output=True, text=True, timeout=90)

    assert 0 != done.returncode
    assert (f"==> loopwarden serve: gRPC on 127.0.0.1:{grpc_port}, metrics on http://127.0.0.1:{metrics}/metrics,"
            in done.stdout.splitlines())
    assert "make serve GRPC_PORT=PORT METRICS_PORT=PORT HOOKS_PORT=PORT" in done.stdout
    assert (f"cannot listen: address already in use: 127.0.0.1:{grpc_port} "
            f"(--listen HOST:PORT or LOOPWARDEN_LISTEN moves it; {HINT})") == _cannot_start(done.stderr)


def test_a_busy_metrics_port_is_named_with_the_variables_that_move_it():
    """The same for the metrics port: --metrics-listen, LOOPWARDEN_METRICS_LISTEN and the make variables."""
    grpc_port = _free_port()
    with _busy_port() as metrics:
        done = subprocess.run(_make_serve(f"GRPC_PORT={grpc_port}", f"METRICS_PORT={metrics}"), cwd=REPO,
                              env=_env(), capture_output=True, text=True, timeout=90)

    assert 0 != done.returncode
    assert (f"cannot listen: address already in use: 127.0.0.1:{metrics} "
            f"(--metrics-listen HOST:PORT or LOOPWARDEN_METRICS_LISTEN moves it; {HINT})") == _cannot_start(done.stderr)


def test_a_busy_hooks_port_is_named_with_the_variables_that_move_it():
    """The same for the agent-hook port: --hooks-listen, LOOPWARDEN_HOOKS_LISTEN and the make variables."""
    grpc_port, metrics = _free_port(), _free_port()
    with _busy_port() as hooks:
        done = subprocess.run(_make_serve(f"GRPC_PORT={grpc_port}", f"METRICS_PORT={metrics}", f"HOOKS_PORT={hooks}"),
                              cwd=REPO, env=_env(), capture_output=True, text=True, timeout=90)

    assert 0 != done.returncode
    assert (f"cannot listen: address already in use: 127.0.0.1:{hooks} "
            f"(--hooks-listen HOST:PORT or LOOPWARDEN_HOOKS_LISTEN moves it; {HINT})") == _cannot_start(done.stderr)


def test_make_serve_prints_the_openclaw_install_for_its_grpc_port():
    """`make serve` prints the OpenClaw plugin's install command with the gRPC address it uses, so a
    moved port needs no hand edit of OpenClaw's config; LOOPWARDEN_LISTEN, when set, is that address.
    A busy gRPC port makes the daemon exit at once, after make printed its lines; the hook command
    is taken as built (`-o`), so nothing is compiled into the venv."""
    script = REPO / "integrations" / "openclaw" / "scripts" / "install.sh"
    hook = str(VENV / "bin" / "loopwarden-hook")
    with _busy_port() as busy:
        moved = subprocess.run(["make", "-o", hook, *_make_serve(f"GRPC_PORT={busy}")[1:]], cwd=REPO, env=_env(),
                               capture_output=True, text=True, timeout=120)
        listen = subprocess.run(["make", "-o", hook, *_make_serve("GRPC_PORT=1")[1:]], cwd=REPO,
                                env={**_env(), "LOOPWARDEN_LISTEN": f"127.0.0.1:{busy}"},
                                capture_output=True, text=True, timeout=120)
    line = f"    OpenClaw plugin, installed and pointed at this gRPC address: bash {script} --target 127.0.0.1:{busy}"
    assert line in moved.stdout.splitlines(), moved.stdout + moved.stderr
    assert line in listen.stdout.splitlines(), listen.stdout + listen.stderr


def test_make_serve_listens_where_it_says():
    """On free ports, the daemon `make serve` starts listens on the three addresses it printed, the
    agent hooks included (they answer a hook)."""
    grpc_port, metrics, hooks = _free_port(), _free_port(), _free_port()
    process = subprocess.Popen(_make_serve(f"GRPC_PORT={grpc_port}", f"METRICS_PORT={metrics}", f"HOOKS_PORT={hooks}"),
                               cwd=REPO,
                               env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        listening = None
        while listening is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            if line.startswith("{") and json.loads(line).get("msg") == "listening":
                listening = json.loads(line)
        if listening is not None:
            hook_answer = _post_hook(f"127.0.0.1:{hooks}")
            command_answer = _run_hook_command(f"127.0.0.1:{hooks}")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        stdout, _ = process.communicate(timeout=30)

    assert listening is not None, "the daemon never logged `listening`"
    assert (f"127.0.0.1:{grpc_port}", f"127.0.0.1:{metrics}") == (listening["grpc_address"],
                                                                   listening["metrics_address"])
    assert f"==> loopwarden serve: gRPC on 127.0.0.1:{grpc_port}" in stdout
    assert f"127.0.0.1:{hooks}" == listening["hooks_address"]
    assert f"    agent hooks on http://127.0.0.1:{hooks}/v1/hooks/claude-code and /v1/hooks/codex" in stdout.splitlines()
    assert (200, {}) == hook_answer  # a first call of a session: allowed
    installed = VENV / "bin" / "loopwarden-hook"
    assert (f"    command hooks: {installed} claude-code|codex --url http://127.0.0.1:{hooks}"
            in stdout.splitlines())
    assert (0, {}) == command_answer  # the installed command, through the listener make serve started


def _run_hook_command(address: str) -> tuple[int, dict]:
    """One Claude Code PreToolUse through the loopwarden-hook `make serve` installed."""
    from tests.client.python.hooks import payloads

    done = subprocess.run([str(VENV / "bin" / "loopwarden-hook"), "claude-code", "--url", f"http://{address}"],
                          input=json.dumps(payloads.claude_pre_tool_use("make-serve-command", "toolu_1")),
                          capture_output=True, text=True, timeout=30)
    return done.returncode, json.loads(done.stdout or "null")


def _post_hook(address: str) -> tuple[int, dict]:
    """One Claude Code PreToolUse to the listener `make serve` started."""
    from tests.client.python.hooks import payloads

    request = urllib.request.Request(f"http://{address}/v1/hooks/claude-code", method="POST",
                                     data=json.dumps(payloads.claude_pre_tool_use("make-serve", "toolu_1")).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read())
