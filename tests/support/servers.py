"""Real redis-server, nginx and haproxy, started by the tests on free loopback ports.

Each is a child process of the test (never the system service), with its files in a temp dir,
stopped when the block ends. Skipped (with the install command) when the binary is missing.
"""
from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def binary(name: str) -> str:
    found = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None)
    if found is None:
        pytest.skip(f"{name} is not installed (bash scripts/install-test-tools.sh installs it)")
    return found


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} exited with {process.returncode}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def _stop(process: subprocess.Popen | None) -> None:
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@dataclass
class RedisServer:
    port: int
    directory: pathlib.Path
    password: str = ""
    process: subprocess.Popen | None = None
    #: Keep the data across stop()/start() (an append-only file in `directory`), as a real
    #: deployment's Redis does through a restart.
    durable: bool = False

    @property
    def url(self) -> str:
        auth = f"default:{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [binary("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "yes" if self.durable else "no", "--dir", str(self.directory),
                "--daemonize", "no", "--logfile", ""]
        if self.password:
            args += ["--requirepass", self.password]
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self.process)

    def stop(self) -> None:
        _stop(self.process)
        self.process = None

    def keys(self, pattern: str = "*", owner_marks: bool = False) -> list[str]:
        """The stored keys; the runs' owner marks (KEY#owner, beside each run) only when asked."""
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password or None)
        try:
            return sorted(key.decode() for key in client.keys(pattern)
                          if owner_marks or not key.endswith(b"#owner"))
        finally:
            client.close()


@contextlib.contextmanager
def redis_server(password: str = "", durable: bool = False) -> Iterator[RedisServer]:
    with tempfile.TemporaryDirectory(prefix="loopwarden-redis-") as tmp:
        server = RedisServer(free_port(), pathlib.Path(tmp), password, durable=durable)
        server.start()
        try:
            yield server
        finally:
            server.stop()


def render(template: pathlib.Path, values: dict[str, str]) -> str:
    """The deploy/ config with its @PLACEHOLDERS@ filled in."""
    text = template.read_text()
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    assert "@" not in "".join(line for line in text.splitlines() if not line.lstrip().startswith("#")), text
    return text


@contextlib.contextmanager
def nginx_router(backends: list[str]) -> Iterator[str]:
    """deploy/nginx/loopwarden.conf in front of `backends` (HOST:PORT); yields its HOST:PORT."""
    nginx = binary("nginx")
    with tempfile.TemporaryDirectory(prefix="loopwarden-nginx-") as tmp:
        port = free_port()
        upstreams = "\n".join(f"    server {backend} max_fails=1 fail_timeout=10s;" for backend in backends)
        site = render(REPO / "deploy/nginx/loopwarden.conf", {"LISTEN": f"127.0.0.1:{port}", "UPSTREAMS": upstreams})
        conf = pathlib.Path(tmp) / "nginx.conf"
        conf.write_text(
            ("user root;\n" if os.geteuid() == 0 else "") +
            f"daemon off;\nworker_processes 1;\npid {tmp}/nginx.pid;\nerror_log {tmp}/error.log warn;\n"
            "events { worker_connections 1024; }\n"
            f"http {{\n  access_log off;\n  client_body_temp_path {tmp}/body;\n  proxy_temp_path {tmp}/proxy;\n"
            f"  fastcgi_temp_path {tmp}/fastcgi;\n  uwsgi_temp_path {tmp}/uwsgi;\n  scgi_temp_path {tmp}/scgi;\n"
            f"{site}\n}}\n")
        process = subprocess.Popen([nginx, "-p", tmp, "-c", str(conf), "-e", f"{tmp}/error.log"],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_port(port, process)
            yield f"127.0.0.1:{port}"
        finally:
            _stop(process)


@contextlib.contextmanager
def haproxy_router(backends: list[str]) -> Iterator[str]:
    """deploy/haproxy/loopwarden.cfg in front of `backends`; yields its HOST:PORT."""
    haproxy = binary("haproxy")
    with tempfile.TemporaryDirectory(prefix="loopwarden-haproxy-") as tmp:
        port = free_port()
        servers = "\n".join(f"    server daemon{index} {backend} proto h2 check inter 200ms fall 1 rise 2"
                            for index, backend in enumerate(backends))
        conf = pathlib.Path(tmp) / "haproxy.cfg"
        conf.write_text(render(REPO / "deploy/haproxy/loopwarden.cfg", {"LISTEN": f"127.0.0.1:{port}", "SERVERS": servers}))
        check = subprocess.run([haproxy, "-c", "-f", str(conf)], capture_output=True, text=True)
        assert 0 == check.returncode, check.stdout + check.stderr
        process = subprocess.Popen([haproxy, "-db", "-f", str(conf)], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_port(port, process)
            yield f"127.0.0.1:{port}"
        finally:
            _stop(process)
