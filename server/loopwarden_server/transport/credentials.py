"""TLS certificates and the bearer token, re-read from their files when those change.

Certificates are renewed in place (cert-manager, a Kubernetes Secret update swapping the mounted
directory) while the daemon keeps running. Both sources check their files' stat at most once a
second, on use: new TLS handshakes for the certificates, incoming RPCs for the token. A change
that cannot be read or parsed keeps the previous material in force and is logged, never a crash.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

import grpc

log = logging.getLogger("loopwarden.security")

CHECK_INTERVAL_SECONDS = 1.0


def _stat_key(paths: tuple[str, ...]) -> tuple:
    key = []
    for path in paths:
        info = os.stat(path)  # follows symlinks: a Secret update swaps the target
        key.append((info.st_ino, info.st_mtime_ns, info.st_size))
    return tuple(key)


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


class _WatchedFiles:
    """Files whose content is reloaded when their stat changes, checked at most once per interval."""

    def __init__(self, paths: tuple[str, ...], clock: Callable[[], float], interval: float) -> None:
        self._paths = paths
        self._clock = clock
        self._interval = interval
        self._lock = threading.Lock()
        self._next_check = clock() + interval
        self._key = _stat_key(paths)

    def changed(self) -> bool:
        """True once per change (the caller then reloads); cheap and rate-limited otherwise."""
        now = self._clock()
        with self._lock:
            if now < self._next_check:
                return False
            self._next_check = now + self._interval
            try:
                key = _stat_key(self._paths)
            except OSError:
                return False  # mid-swap or removed: keep what we have, look again later
            if key == self._key:
                return False
            self._key = key
            return True


class RotatingServerCertificates:
    """grpc dynamic server credentials backed by certificate files that may be replaced."""

    def __init__(self, cert: str, key: str, client_ca: str | None, *,
                 clock: Callable[[], float] = time.monotonic, interval: float = CHECK_INTERVAL_SECONDS) -> None:
        self._cert, self._key, self._client_ca = cert, key, client_ca
        paths = tuple(p for p in (cert, key, client_ca) if p)
        self._initial = self._load()  # raises OSError/ValueError: the daemon must not start without them
        self._watch = _WatchedFiles(paths, clock, interval)

    def _load(self) -> grpc.ServerCertificateConfiguration:
        client_ca = _read(self._client_ca) if self._client_ca else None
        return grpc.ssl_server_certificate_configuration([(_read(self._key), _read(self._cert))], client_ca)

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """Called by gRPC before each new handshake: a new configuration, or None for no change."""
        if not self._watch.changed():
            return None
        try:
            configuration = self._load()
        except (OSError, ValueError) as exc:
            log.error("TLS files changed but cannot be loaded; the previous certificates stay in force",
                      extra={"error": str(exc)})
            return None
        log.info("TLS certificates reloaded", extra={"cert": self._cert})
        return configuration

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(self._initial, self.fetch,
                                                   require_client_authentication=self._client_ca is not None)


class TokenFile:
    """The bearer token, re-read when its file changes; an empty or unreadable new file is refused."""

    def __init__(self, path: str, *, clock: Callable[[], float] = time.monotonic,
                 interval: float = CHECK_INTERVAL_SECONDS) -> None:
        self._path = path
        self._token = self._load()
        if not self._token:
            raise ValueError(f"{path} is empty")
        self._watch = _WatchedFiles((path,), clock, interval)

    def _load(self) -> bytes:
        return _read(self._path).decode("utf-8", "replace").strip().encode()

    def current(self) -> bytes:
        if self._watch.changed():
            try:
                token = self._load()
            except OSError as exc:
                token = b""
                log.error("token file changed but cannot be read", extra={"error": str(exc)})
            if token:
                self._token = token
                log.info("bearer token reloaded", extra={"token_file": self._path})
            else:
                log.error("token file changed to an empty token; the previous token stays in force",
                          extra={"token_file": self._path})
        return self._token
