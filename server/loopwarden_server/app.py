"""Composition root: settings -> config -> store/service/metrics -> gRPC server, health,
reflection, metrics port, config watcher, idle-run sweeper, signals and graceful drain."""
from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import signal
import time
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc
from prometheus_client import CollectorRegistry, start_http_server

from . import logs, snapshot
from .config import Config, ConfigError, load_config_text, load_default_config
from .config.check import summary
from .metrics import Metrics
from .service import LoopwardenService
from .settings import DaemonSettings, Security
from .store import RunStore
from .transport.auth import BearerTokenInterceptor
from .transport.credentials import RotatingServerCertificates, TokenFile
from .transport.servicer import Lifecycle, LoopDetectionServicer

log = logging.getLogger("loopwarden.daemon")

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["LoopDetectionService"].full_name
SWEEP_INTERVAL_SECONDS = 1.0


class StartupError(RuntimeError):
    """The daemon cannot start; the message says why."""


def _split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _server_credentials(security: Security) -> grpc.ServerCredentials | None:
    if not security.tls:
        return None
    try:
        certificates = RotatingServerCertificates(security.tls_cert, security.tls_key, security.tls_client_ca)
    except (OSError, ValueError) as exc:
        raise StartupError(f"cannot load TLS files (--tls-cert/--tls-key/--tls-client-ca): {exc}") from None
    return certificates.credentials()


def _interceptors(security: Security) -> list[grpc.aio.ServerInterceptor]:
    if security.auth_token_file is None:
        return []
    try:
        token = TokenFile(security.auth_token_file)
    except (OSError, ValueError) as exc:
        raise StartupError(f"--auth-token-file: {exc}") from None
    return [BearerTokenInterceptor(token.current)]


@dataclass
class ConfigSource:
    """Where the config comes from, and the fingerprint of what was loaded last."""

    path: str | None
    loaded_digest: str = ""
    stat_key: tuple = field(default_factory=tuple)

    def stat(self) -> tuple:
        info = os.stat(self.path)  # follows symlinks: a ConfigMap swap changes the inode
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    def read(self) -> tuple[str, str]:
        with open(self.path, "rb") as handle:
            raw = handle.read()
        return raw.decode("utf-8-sig"), hashlib.sha256(raw).hexdigest()

    def load_initial(self) -> Config:
        if self.path is None:
            return load_default_config()
        try:
            self.stat_key = self.stat()
            text, self.loaded_digest = self.read()
            return load_config_text(text, self.path)
        except OSError as exc:
            raise StartupError(f"cannot read config {self.path}: {exc.strerror or exc}") from None
        except (ConfigError, UnicodeDecodeError) as exc:
            raise StartupError(f"invalid config {self.path}: {exc}") from None


class Daemon:
    def __init__(self, settings: DaemonSettings) -> None:
        self.settings = settings
        self.registry = CollectorRegistry()
        self.metrics = Metrics(self.registry, grpc.__version__)
        self.config_source = ConfigSource(settings.config_path)
        config = self.config_source.load_initial()
        self.store = RunStore(
            max_runs=settings.max_runs, idle_ttl_seconds=settings.run_idle_ttl_seconds,
            clock=time.monotonic, shard_count=settings.shards,
            on_evict=lambda reason, _entry: self.metrics.evictions.labels(reason).inc(),
        )
        # Decision ids are "<instance>-<counter>": unique across restarts and replicas.
        self.service = LoopwardenService(config, self.store, self.metrics, settings.limits, time.perf_counter,
                                         instance_id=os.urandom(4).hex())
        self.lifecycle = Lifecycle()
        self.health = health.aio.HealthServicer()
        self.stopping = asyncio.Event()
        self.grpc_port = 0
        self.metrics_port = 0
        self._server: grpc.aio.Server | None = None
        self._health_server: grpc.aio.Server | None = None
        self._httpd = None
        self._tasks: list[asyncio.Task] = []

    # -- start -------------------------------------------------------------------------------
    def restore_snapshot(self) -> None:
        path = self.settings.snapshot_path
        if path is None or not os.path.exists(path):
            return
        try:
            data = snapshot.read_snapshot(path)
            restored, expired = snapshot.restore_snapshot(data, self.store, time.time())
        except (OSError, snapshot.SnapshotError) as exc:
            refused = f"{path}.refused"
            os.replace(path, refused)
            log.error("snapshot refused; starting with no runs", extra={"snapshot": path, "moved_to": refused,
                                                                        "error": str(exc)})
            return
        # Consumed: a later crash must not resurrect this state on the next start.
        os.unlink(path)
        log.info("snapshot restored", extra={"snapshot": path, "runs": restored, "expired_skipped": expired})

    def write_snapshot(self) -> None:
        path = self.settings.snapshot_path
        if path is None:
            return
        try:
            runs = snapshot.write_snapshot(path, self.store, time.time())
        except OSError as exc:
            log.error("snapshot not written", extra={"snapshot": path, "error": str(exc)})
            return
        log.info("snapshot written", extra={"snapshot": path, "runs": runs})

    async def start(self) -> None:
        self.restore_snapshot()
        security = self.settings.security
        max_message = self.settings.limits.max_message_bytes
        server = grpc.aio.server(interceptors=_interceptors(security), options=[
            ("grpc.max_receive_message_length", max_message),
            ("grpc.max_send_message_length", max_message),
            ("grpc.so_reuseport", 0),
        ])
        pb_grpc.add_LoopDetectionServiceServicer_to_server(
            LoopDetectionServicer(self.service, self.metrics, self.lifecycle), server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        if self.settings.reflection:
            reflection.enable_server_reflection(
                (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME),
                server)
        credentials = _server_credentials(security)
        try:
            if credentials is None:
                self.grpc_port = server.add_insecure_port(self.settings.listen)
            else:
                self.grpc_port = server.add_secure_port(self.settings.listen, credentials)
        except RuntimeError as exc:
            raise StartupError(f"cannot listen on {self.settings.listen}: {exc}") from None
        if self.grpc_port == 0:
            raise StartupError(f"cannot listen on {self.settings.listen}")
        health_port = 0
        if self.settings.health_listen is not None:
            # Kubernetes gRPC probes speak neither TLS nor tokens: a health-only plaintext port.
            self._health_server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
            health_pb2_grpc.add_HealthServicer_to_server(self.health, self._health_server)
            try:
                health_port = self._health_server.add_insecure_port(self.settings.health_listen)
            except RuntimeError as exc:
                raise StartupError(f"cannot listen on {self.settings.health_listen}: {exc}") from None
        metrics_host, metrics_port = _split_address(self.settings.metrics_listen)
        try:
            self._httpd, _thread = start_http_server(metrics_port, metrics_host, self.registry)
        except OSError as exc:
            raise StartupError(f"cannot serve metrics on {self.settings.metrics_listen}: {exc.strerror or exc}") from None
        self.metrics_port = self._httpd.server_port
        await server.start()
        self._server = server
        if self._health_server is not None:
            await self._health_server.start()
        for name in ("", SERVICE_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        grpc_host, _ = _split_address(self.settings.listen)
        log.info("listening", extra={
            "grpc_address": f"{grpc_host}:{self.grpc_port}",
            "metrics_address": f"{metrics_host}:{self.metrics_port}",
            "config": self.config_source.path or "<embedded default>",
            "config_summary": summary(self.service.config),
            "reflection": self.settings.reflection,
            "tls": security.tls, "mtls": security.tls_client_ca is not None,
            "token_auth": security.auth_token_file is not None,
            "health_address": f"{_split_address(self.settings.health_listen)[0]}:{health_port}" if health_port else "",
            "runs_restored": len(self.store),
            "pid": os.getpid(),
        })
        self._tasks.append(asyncio.create_task(self._sweep_idle_runs()))
        if self.config_source.path is not None:
            self._tasks.append(asyncio.create_task(self._watch_config()))

    # -- config reload -----------------------------------------------------------------------
    def reload_config(self, *, force: bool = False) -> bool | None:
        """Re-read the config file. None: nothing changed; True: swapped in; False: refused."""
        source = self.config_source
        if source.path is None:
            return None
        try:
            text, digest = source.read()
            if digest == source.loaded_digest and not force:
                return None
            config = load_config_text(text, source.path)
        except (OSError, ConfigError, UnicodeDecodeError) as exc:
            self.metrics.config_reloads.labels("failure").inc()
            self.metrics.config_last_reload_ok.set(0)
            log.error("config reload refused; the previous config stays in force",
                      extra={"config": source.path, "error": str(exc)})
            return False
        source.loaded_digest = digest
        self.service.swap_config(config)
        self.metrics.config_reloads.labels("success").inc()
        self.metrics.config_last_reload_ok.set(1)
        log.info("config reloaded", extra={"config": source.path, "config_summary": summary(config)})
        return True

    async def _watch_config(self) -> None:
        source = self.config_source
        while True:
            await asyncio.sleep(self.settings.config_poll_seconds)
            try:
                key = source.stat()
            except OSError:
                key = ()
            if key != source.stat_key:
                source.stat_key = key
                self.reload_config()

    async def _sweep_idle_runs(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_SECONDS)
            self.store.expire_idle()

    # -- stop --------------------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.stopping.set)
        loop.add_signal_handler(signal.SIGINT, self.stopping.set)
        loop.add_signal_handler(signal.SIGHUP, lambda: self.reload_config(force=True))

    async def drain_and_stop(self) -> None:
        """NOT_SERVING at once; refuse new RPCs; let open streams finish within the grace."""
        grace = self.settings.drain_grace_seconds
        deadline = time.monotonic() + grace
        self.lifecycle.draining = True
        await self.health.enter_graceful_shutdown()
        log.info("draining", extra={"open_streams": self.lifecycle.active_streams, "grace_seconds": grace})
        while self.lifecycle.active_streams and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for task in self._tasks:
            task.cancel()
        if self._server is not None:
            await self._server.stop(max(0.1, deadline - time.monotonic()))
        # No RPC can touch the store any more: the snapshot is consistent.
        self.write_snapshot()
        if self._health_server is not None:
            await self._health_server.stop(0)
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        log.info("stopped", extra={"open_streams_cut": self.lifecycle.active_streams})

    async def run(self) -> None:
        await self.start()
        self.install_signal_handlers()
        await self.stopping.wait()
        await self.drain_and_stop()


def main(settings: DaemonSettings) -> int:
    logs.configure(settings.log_level)
    try:
        async def _run() -> None:
            await Daemon(settings).run()

        asyncio.run(_run())
    except StartupError as exc:
        log.error("cannot start", extra={"error": str(exc)})
        return 2
    return 0
