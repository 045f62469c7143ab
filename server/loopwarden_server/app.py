"""Composition root: settings -> config, the compiled core, metrics, servers; then run until a signal.

Wiring only. What each part does lives in its module: `lifecycle` (listeners, signals, drain),
`config.watch` (reloads), `statestore` (state across restarts and replicas), `transport` (the gRPC API).
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from importlib.metadata import version as distribution_version
from typing import cast

import grpc
from prometheus_client import CollectorRegistry

from . import logs
from .config import Config, ConfigError, load_default_config
from .config.check import summary
from .config.watch import ConfigWatcher
from .core import CoreService
from .hooks_http import CoreHookEvaluator, hooks_listener
from .lifecycle import Servers, StartupError, install_signal_handlers
from .metrics import Metrics
from .settings import DaemonSettings, Security
from .statestore import StateStoreError, open_state_store
from .statestore.keeper import StateKeeper
from .statestore.metrics import StateMetrics
from .statestore.runs import CoreRuns
from .tenancy import TenantShares
from .tracing import TracingError, tracing_from
from .transport import SERVICE_NAME, LoopDetectionServicer, register_servicer
from .transport.auth import BearerTokenInterceptor, Identity, TokenFileError
from .transport.credentials import RotatingServerCertificates, TokenFile
from .transport.integration import IntegrationInterceptor

log = logging.getLogger("loopwarden.daemon")

SWEEP_INTERVAL_SECONDS = 1.0


def _server_credentials(security: Security) -> grpc.ServerCredentials | None:
    if not security.tls:
        return None
    try:
        # security.tls: both the certificate and its key are set.
        certificates = RotatingServerCertificates(cast(str, security.tls_cert), cast(str, security.tls_key),
                                                  security.tls_client_ca)
    except (OSError, ValueError) as exc:
        raise StartupError(f"cannot load TLS files (--tls-cert/--tls-key/--tls-client-ca): {exc}") from None
    return certificates.credentials()


def _token_file(security: Security, metrics: Metrics) -> TokenFile | None:
    if security.auth_token_file is None:
        return None
    try:
        return TokenFile(security.auth_token_file, on_state=lambda ok: metrics.token_file_ok.set(1 if ok else 0))
    except OSError as exc:
        raise StartupError(
            f"--auth-token-file: cannot read {security.auth_token_file}: {exc.strerror or exc}") from None
    except TokenFileError as exc:
        raise StartupError(f"--auth-token-file {security.auth_token_file}: {exc}") from None


def _initial_config(watcher: ConfigWatcher | None) -> Config:
    if watcher is None:
        return load_default_config()
    try:
        return watcher.load_initial()
    except OSError as exc:
        raise StartupError(f"cannot read config {watcher.path}: {exc.strerror or exc}") from None
    except ConfigError as exc:
        raise StartupError(f"invalid config {watcher.path}: {exc}") from None


class Daemon:
    def __init__(self, settings: DaemonSettings) -> None:
        self.settings = settings
        self.registry = CollectorRegistry()
        security = settings.security
        self._tokens: TokenFile | None = None
        identity = Identity(self._current_tokens if security.auth_token_file is not None else None)
        self.metrics = Metrics(self.registry, grpc.__version__, tenant_label=settings.tenant_label,
                               known_tenants=identity.known_tenants)
        self._tokens = _token_file(security, self.metrics)
        self.config_watcher = (ConfigWatcher(settings.config_path, clock=time.monotonic)
                               if settings.config_path is not None else None)
        config = _initial_config(self.config_watcher)
        self.version = distribution_version("loopwarden")
        try:
            self.tracing = tracing_from(settings.otlp_endpoint, os.environ, version=self.version)
        except TracingError as exc:
            raise StartupError(str(exc)) from None
        # Decision ids are "<instance>-<counter>": unique across restarts and replicas.
        instance_id = os.urandom(4).hex()
        self.core = CoreService(config, self.metrics, settings.limits, max_runs=settings.max_runs,
                                idle_ttl_seconds=settings.run_idle_ttl_seconds, clock=time.monotonic,
                                instance_id=instance_id)
        self.metrics.set_engine("core")
        self.state = (StateKeeper(open_state_store(settings.state_store, settings.state_key_prefix),
                                  CoreRuns(self.core), StateMetrics(self.registry),
                                  flush_interval=settings.state_flush_interval_seconds,
                                  owner_id=instance_id)  # the owner its writes to a shared store are fenced by
                      if settings.state_store is not None else None)
        # A shared store: runs a request names and memory lacks are loaded first (statestore/loader.py).
        loader = self.state.loader if self.state is not None and self.state.lazy else None
        if loader is not None:
            self.core.on_held = loader.metrics.runs_loaded.labels("memory").inc
        if self.state is not None:
            try:  # before any listener binds: an unusable state path fails the start at once
                self.state.check()
            except StateStoreError as exc:
                raise StartupError(str(exc)) from None
        interceptors = [IntegrationInterceptor()] + ([] if self._tokens is None else [BearerTokenInterceptor(
            self._tokens.current, on_failure=lambda reason: self.metrics.auth_failures.labels(reason).inc())])
        if self.tracing is not None and self.tracing.available:
            interceptors.insert(0, self.tracing.server_interceptor())  # outermost: refused calls are traced too
        self.servers = Servers(
            listen=settings.listen, metrics_listen=settings.metrics_listen, health_listen=settings.health_listen,
            registry=self.registry, max_message_bytes=settings.limits.max_message_bytes,
            reflection_on=settings.reflection, interceptors=interceptors,
            credentials=_server_credentials(security),
            # What moves a busy port where the daemon was started from: `make serve` names its variables.
            port_hint=os.environ.get("LOOPWARDEN_PORT_HINT", "").strip() or None,
        )
        # Two or more tenants in the token file: each holds at most its share of runs and streams.
        self.shares = TenantShares(identity.known_tenants, lambda: self.core.config.daemon_limits,
                                   max_runs=settings.max_runs, max_streams=settings.limits.max_streams,
                                   set_run_quota=self.core.set_tenant_quota)
        self.shares.refresh()
        servicer = LoopDetectionServicer(self.core, self.metrics, self.servers.lifecycle, identity,
                                         settings.limits.stream_idle_timeout_seconds, loader=loader,
                                         current_span=self.tracing.current_span() if self.tracing is not None else None,
                                         verdict_event=self.tracing.verdict_event if self.tracing is not None else None,
                                         shares=self.shares)
        self.servers.add_service(SERVICE_NAME, lambda server: register_servicer(servicer, server))
        self.hooks = (hooks_listener(
            settings.hooks_listen, CoreHookEvaluator(self.core, loader), self.servers.lifecycle, self.metrics,
            security=security, tokens=self._current_tokens if security.auth_token_file is not None else None,
            default_agent=settings.hooks_agent, fail_closed=settings.hooks_fail_closed,
            max_body_bytes=settings.hooks_max_body_bytes, max_params_bytes=settings.limits.max_params_bytes,
            max_result_bytes=settings.limits.max_result_bytes,
            max_output_bytes=settings.limits.max_output_text_bytes,
            port_hint=os.environ.get("LOOPWARDEN_PORT_HINT", "").strip() or None)
            if settings.hooks_listen is not None else None)
        self.stopping = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._last_reload_error = ""
        self._reload_lock = asyncio.Lock()

    def _spawn(self, coroutine) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.append(task)
        def forget(done: asyncio.Task) -> None:
            if done in self._tasks:
                self._tasks.remove(done)

        task.add_done_callback(forget)

    def _current_tokens(self):
        return self._tokens.current() if self._tokens is not None else None

    async def start(self) -> None:
        listeners = self.servers.bind()
        hooks_address = self.hooks.bind() if self.hooks is not None else ""
        # Only now, with every listener bound (and certificates and tokens read), is stored state
        # taken in: a start that fails earlier has not touched it. An embedded store's restore
        # (a million runs take about a minute) runs in a thread with every port already answering:
        # health NOT_SERVING, the API and the hook endpoints "restoring", never a silent port.
        restoring = self.state is not None and not self.state.lazy
        if self.state is not None and not restoring:
            self.state.restore()  # a shared store restores nothing: its runs load on first event
        self.servers.lifecycle.restoring = restoring
        await self.servers.start(serving=not restoring)
        if self.hooks is not None:
            await self.hooks.start()
        if restoring:
            state = cast(StateKeeper, self.state)  # restoring: there is a state to restore
            log.info("restoring state; health says NOT_SERVING until it is done",
                     extra={"state_store": state.store.describe(), "grpc_address": listeners.grpc_address,
                            "health_address": listeners.health_address, "hooks_address": hooks_address})
            try:
                await asyncio.to_thread(state.restore)
            finally:
                self.servers.lifecycle.restoring = False
            await self.servers.serve()
        if self.state is not None:
            self.state.start()
        security = self.settings.security
        log.info("listening", extra={
            "grpc_address": listeners.grpc_address,
            "metrics_address": listeners.metrics_address,
            "config": self.settings.config_path or "<embedded default>",
            "config_summary": summary(self.core.config),
            "reflection": self.settings.reflection,
            "tls": security.tls, "mtls": security.tls_client_ca is not None,
            "token_auth": security.auth_token_file is not None,
            "health_address": listeners.health_address,
            "hooks_address": hooks_address,
            "runs_restored": len(self.core),
            "state_store": self.state.store.describe() if self.state is not None else "memory",
            "pid": os.getpid(),
            "version": self.version,
            "tracing": self.tracing.description if self.tracing is not None else "off",
        })
        self._tasks.append(asyncio.create_task(self._sweep_idle_runs()))
        if self.config_watcher is not None:
            self._tasks.append(asyncio.create_task(self._watch_config()))

    async def reload_config(self, *, force: bool = False) -> None:
        """Look at the config file; swap in a new valid config. Reading and parsing run in a
        thread: a large file must not stall every RPC (health included) while it is parsed."""
        if self.config_watcher is None:
            return
        async with self._reload_lock:  # the poll loop and SIGHUP never read the file at once
            reload = await asyncio.to_thread(self.config_watcher.poll, force=force)
        if reload is None:
            return
        if reload.config is None:
            if reload.error != self._last_reload_error:  # one count and log line per problem, not per poll
                self._last_reload_error = reload.error
                self.metrics.config_reloads.labels("failure").inc()
                self.metrics.config_last_reload_ok.set(0)
                log.error("config reload refused; the previous config stays in force",
                          extra={"config": self.config_watcher.path, "error": reload.error})
            return
        self._last_reload_error = ""
        self.core.swap_config(reload.config)
        self.shares.refresh()
        self.metrics.config_reloads.labels("success").inc()
        self.metrics.config_last_reload_ok.set(1)
        log.info("config reloaded", extra={"config": self.config_watcher.path,
                                           "config_summary": summary(reload.config)})

    async def _watch_config(self) -> None:
        while True:
            await asyncio.sleep(self.settings.config_poll_seconds)
            await self.reload_config()

    async def _sweep_idle_runs(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_SECONDS)
            self.core.expire_idle()
            self.shares.refresh()  # a rotated token file changes the shares even with no gRPC traffic

    async def stop(self) -> bool:
        """Drain, flush the state store; False when the final flush failed (the exit is non-zero)."""
        await self.servers.drain(self.settings.drain_grace_seconds)
        for task in self._tasks:
            task.cancel()
        # No RPC can touch the store any more: the final flush writes every run's last state.
        flushed = await self.state.stop() if self.state is not None else True
        if self.hooks is not None:
            await self.hooks.close()
        await self.servers.close()
        if self.tracing is not None:
            await asyncio.to_thread(self.tracing.shutdown)
        log.info("stopped", extra={"open_streams_cut": self.servers.lifecycle.active_streams})
        return flushed

    async def run(self) -> bool:
        await self.start()
        install_signal_handlers(stop=self.stopping.set, reload=lambda: self._spawn(self.reload_config(force=True)))
        await self.stopping.wait()
        return await self.stop()


def main(settings: DaemonSettings) -> int:
    log_format = logs.configure(settings.log_level, log_format=settings.log_format)
    try:
        async def _run() -> bool:
            return await Daemon(settings).run()

        flushed = asyncio.run(_run())
    except StartupError as exc:
        if log_format == "text":  # a person at a terminal: the reason alone, as the CLI's other errors
            print(f"error: {exc}", file=sys.stderr)
        else:
            log.error("cannot start", extra={"error": str(exc)})
        return 2
    return 0 if flushed else 1
