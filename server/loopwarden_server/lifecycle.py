"""The daemon's servers and their lifecycle: the gRPC port (with health and reflection), the
plaintext health-only port, the metrics port; signals; and the graceful drain.

Start order matters for state: every listener is bound before anything else happens, so a start
that fails (busy port, bad TLS file) fails before the daemon has touched its stored state.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import signal
import socket
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import CollectorRegistry, start_http_server

log = logging.getLogger("loopwarden.daemon")


# Keepalive, explicit: the server pings a connection idle for a minute and drops it when the ping
# goes unanswered for 20 s (a vanished client frees its streams); clients may ping every 10 s,
# even between calls, without being told off (GOAWAY too_many_pings).
KEEPALIVE_OPTIONS = (
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_pings_without_data", 0),
)


class StartupError(RuntimeError):
    """The daemon cannot start; the message says why."""


def address_in_use(address: str, flag: str, env: str, hint: str | None = None) -> StartupError:
    """"cannot listen: address already in use: HOST:PORT (FLAG HOST:PORT or ENV moves it[; HINT])".

    A busy port names the flag and the environment variable that move it; `hint` is what moves it
    where the daemon was started from (`make serve` passes LOOPWARDEN_PORT_HINT naming its variables)."""
    moves = f"{flag} HOST:PORT or {env} moves it" + (f"; {hint}" if hint else "")
    return StartupError(f"cannot listen: address already in use: {address} ({moves})")


class Lifecycle:
    """Shared by the servicer and the drain: whether new RPCs are still welcome, and how many
    Evaluate streams are open."""

    def __init__(self) -> None:
        self.draining = False
        # True while a start restores stored runs: the ports answer (health NOT_SERVING), the API
        # refuses with UNAVAILABLE instead of judging events against a half-restored state.
        self.restoring = False
        self.active_streams = 0


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass(frozen=True, slots=True)
class Listeners:
    """Where the daemon listens: addresses as configured, ports as bound (0 = not listening)."""

    grpc_address: str
    metrics_address: str
    health_address: str = ""


class Servers:
    """Builds, starts and stops the daemon's listeners."""

    def __init__(self, *, listen: str, metrics_listen: str, health_listen: str | None,
                 registry: CollectorRegistry, max_message_bytes: int, reflection_on: bool,
                 interceptors: Sequence[grpc.aio.ServerInterceptor],
                 credentials: grpc.ServerCredentials | None, port_hint: str | None = None) -> None:
        self._listen = listen
        self._port_hint = port_hint
        self._metrics_listen = metrics_listen
        self._health_listen = health_listen
        self._registry = registry
        self._reflection_on = reflection_on
        self.lifecycle = Lifecycle()
        self.health = health.aio.HealthServicer()
        self._credentials = credentials
        self.grpc = grpc.aio.server(interceptors=list(interceptors), options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.so_reuseport", 0),
            *KEEPALIVE_OPTIONS,
        ])
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc)
        # The health-only port is a threaded (sync) gRPC server with its own servicer: probes are
        # answered from its threads, never queued behind the event loop's work.
        self._health_server: grpc.Server | None = None
        self._probe_health = health.HealthServicer(experimental_non_blocking=True)
        self._httpd: WSGIServer | None = None
        self._service_names: list[str] = []

    def add_service(self, full_name: str, register: Callable[[grpc.aio.Server], None]) -> None:
        """Register one gRPC service (before `bind`); it is reported SERVING once started."""
        register(self.grpc)
        self._service_names.append(full_name)

    def bind(self) -> Listeners:
        """Bind every port; StartupError names the one that failed."""
        if self._reflection_on:
            reflection.enable_server_reflection(
                (*self._service_names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                 reflection.SERVICE_NAME), self.grpc)
        grpc_port = self._add_port(self.grpc, self._listen, self._credentials,
                                   ("--listen", "LOOPWARDEN_LISTEN", self._port_hint))
        health_address = ""
        if self._health_listen is not None:
            # Kubernetes gRPC probes speak neither TLS nor tokens: a health-only plaintext port.
            self._health_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="health"),
                                              options=[("grpc.so_reuseport", 0)])
            health_pb2_grpc.add_HealthServicer_to_server(self._probe_health, self._health_server)
            port = self._add_port(self._health_server, self._health_listen, None,
                                  ("--health-listen", "LOOPWARDEN_HEALTH_LISTEN", None))
            health_address = f"{split_address(self._health_listen)[0]}:{port}"
        metrics_host, metrics_port = split_address(self._metrics_listen)
        try:
            self._httpd, _thread = start_http_server(metrics_port, metrics_host, self._registry)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise address_in_use(self._metrics_listen, "--metrics-listen", "LOOPWARDEN_METRICS_LISTEN",
                                     self._port_hint) from None
            raise StartupError(f"cannot serve metrics on {self._metrics_listen}: {exc.strerror or exc}") from None
        grpc_host, _ = split_address(self._listen)
        return Listeners(f"{grpc_host}:{grpc_port}", f"{metrics_host}:{self._httpd.server_port}", health_address)

    @staticmethod
    def _add_port(server: grpc.aio.Server, address: str, credentials: grpc.ServerCredentials | None,
                  named: tuple[str, str, str | None]) -> int:
        """Bind `address`; `named` is (flag, environment variable, hint) for the busy-port message."""
        _refuse_busy_port(address, *named)
        try:
            port = (server.add_insecure_port(address) if credentials is None
                    else server.add_secure_port(address, credentials))
        except RuntimeError as exc:
            raise StartupError(f"cannot listen on {address}: {exc}") from None
        if port == 0:
            raise StartupError(f"cannot listen on {address}")
        return port

    async def start(self, *, serving: bool = True) -> None:
        """Start every port; health says SERVING, or NOT_SERVING until `serve` (a restore first)."""
        await self.grpc.start()
        if self._health_server is not None:
            self._health_server.start()
        await self._set_health(health_pb2.HealthCheckResponse.SERVING if serving
                               else health_pb2.HealthCheckResponse.NOT_SERVING)

    async def serve(self) -> None:
        """Health says SERVING (after a start with serving=False)."""
        await self._set_health(health_pb2.HealthCheckResponse.SERVING)

    async def _set_health(self, status: int) -> None:
        for name in ("", *self._service_names):
            await self.health.set(name, status)
            self._probe_health.set(name, status)

    async def drain(self, grace_seconds: float) -> None:
        """NOT_SERVING at once; refuse new RPCs; let open streams finish within the grace; stop
        the gRPC port. Health and metrics stay up until `close`."""
        deadline = time.monotonic() + grace_seconds
        self.lifecycle.draining = True
        await self.health.enter_graceful_shutdown()
        self._probe_health.enter_graceful_shutdown()
        log.info("draining", extra={"open_streams": self.lifecycle.active_streams, "grace_seconds": grace_seconds})
        while self.lifecycle.active_streams and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await self.grpc.stop(max(0.1, deadline - time.monotonic()))

    async def close(self) -> None:
        if self._health_server is not None:
            self._health_server.stop(0).wait(5)
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()


def _refuse_busy_port(address: str, flag: str, env: str, hint: str | None) -> None:
    """StartupError("cannot listen: address already in use: HOST:PORT (FLAG … or ENV moves it)") when
    something listens there already.

    gRPC reports a busy port only as "Failed to bind" (and logs its own line to stderr), so the
    port is tried first the way gRPC binds it (SO_REUSEADDR, no SO_REUSEPORT)."""
    host, port = split_address(address)
    if port == 0:
        return
    try:
        candidates = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return  # gRPC names the problem
    for family, kind, protocol, _name, sockaddr in candidates:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(sockaddr)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise address_in_use(address, flag, env, hint) from None


def install_signal_handlers(*, stop: Callable[[], None], reload: Callable[[], None]) -> None:
    """SIGTERM/SIGINT start the drain; SIGHUP reloads the config at once."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop)
    loop.add_signal_handler(signal.SIGINT, stop)
    loop.add_signal_handler(signal.SIGHUP, reload)
