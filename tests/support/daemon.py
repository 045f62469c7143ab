"""Start the real daemon as a subprocess on 127.0.0.1, ports chosen by the OS (port 0)."""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

STARTUP_TIMEOUT_SECONDS = 30.0

# Set by tests/conftest.py for each test: False when the run leaves out the tests marked `daemon`
# (pytest.ini; make test-fast) and this one is not marked. None outside pytest (bench/ starts
# daemons with this module too).
starts_allowed: bool | None = None


@dataclass
class DaemonHandle:
    process: subprocess.Popen
    grpc_target: str
    metrics_url: str
    metrics_port: int
    config_path: pathlib.Path | None
    log_lines: list[dict] = field(default_factory=list)
    _lines: queue.Queue = field(default_factory=queue.Queue)

    def logs(self) -> list[dict]:
        """Every JSON log line the daemon printed so far."""
        while True:
            try:
                self.log_lines.append(self._lines.get_nowait())
            except queue.Empty:
                return self.log_lines

    def wait_for_log(self, predicate, timeout: float = 10.0) -> dict:
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            lines = self.logs()
            for line in lines[seen:]:
                if predicate(line):
                    return line
            seen = len(lines)
            time.sleep(0.02)
        raise AssertionError(f"no matching log line within {timeout}s; got {self.logs()[-5:]}")

    def write_config(self, text: str) -> None:
        """Replace the config file the way an editor or a ConfigMap update would (atomic rename)."""
        assert self.config_path is not None
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.config_path)

    def scrape(self) -> str:
        import urllib.request
        with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
            return response.read().decode()

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def memory_kib(self, field: str = "VmHWM") -> int:
        """A memory figure of the daemon process from /proc (VmHWM: peak resident set)."""
        for line in pathlib.Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise AssertionError(f"{field} not in /proc/{self.process.pid}/status")


def _pump(stream, sink: queue.Queue) -> None:
    for raw in stream:
        try:
            sink.put(json.loads(raw))
        except ValueError:
            sink.put({"msg": raw.rstrip("\n"), "unstructured": True})


@dataclass
class Started:
    """A daemon process started by `started`, once it logged `listening`."""

    process: subprocess.Popen
    listening: dict
    seen: list[dict]
    lines: queue.Queue


@contextlib.contextmanager
def started(args: Sequence[str], env: dict[str, str], cwd: str | os.PathLike[str] | None = None,
            startup_timeout: float = STARTUP_TIMEOUT_SECONDS, stop_timeout: float = 15.0,
            until: str = "listening") -> Iterator[Started]:
    """Any `loopwarden serve` command line as a process whose JSON log is pumped; yielded once it
    logged `until` (default `listening`: ready), stopped with SIGTERM (then SIGKILL) when the
    block ends."""
    if starts_allowed is False:
        raise RuntimeError("this test starts a daemon process: mark it `daemon` (pytest.ini) so that "
                           "make test runs it and make test-fast, which has no time for daemon start-ups, leaves it out")
    process = subprocess.Popen(list(args), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue = queue.Queue()
    pump = threading.Thread(target=_pump, args=(process.stderr, lines), daemon=True)
    pump.start()
    try:
        seen: list[dict] = []
        deadline = time.monotonic() + startup_timeout
        listening = None
        while listening is None:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"daemon did not start (exit {process.poll()}): {seen}")
            try:
                line = lines.get(timeout=0.1)
            except queue.Empty:
                continue
            seen.append(line)
            if line.get("msg") == until:
                listening = line
        yield Started(process, listening, seen, lines)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        pump.join(timeout=5)
        process.stderr.close()


@contextlib.contextmanager
def running_daemon(config_text: str | None = None, extra_args: Sequence[str] = (),
                   env: dict[str, str] | None = None, wrapper: Sequence[str] = ()) -> Iterator[DaemonHandle]:
    """The daemon on loopback; stopped with SIGTERM (then SIGKILL) when the block ends.

    `wrapper` is a command that execs the daemon (e.g. setpriv): the pid stays the daemon's."""
    with tempfile.TemporaryDirectory(prefix="loopwarden-test-") as tmp:
        config_path = None
        args = [*wrapper, sys.executable, "-m", "loopwarden", "serve", "--listen", "127.0.0.1:0",
                "--metrics-listen", "127.0.0.1:0", "--config-poll", "0.1", *extra_args]
        if config_text is not None:
            config_path = pathlib.Path(tmp) / "loopwarden.json5"
            config_path.write_text(config_text)
            args += ["--config", str(config_path)]
        process_env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWARDEN_")}
        process_env.update(env or {})
        with started(args, process_env) as daemon:
            metrics_port = int(daemon.listening["metrics_address"].rsplit(":", 1)[1])
            yield DaemonHandle(daemon.process, daemon.listening["grpc_address"],
                               f"http://127.0.0.1:{metrics_port}/metrics", metrics_port, config_path,
                               daemon.seen, daemon.lines)
