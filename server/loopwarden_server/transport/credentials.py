"""TLS certificates and the bearer token, re-read from their files when those change.

Certificates are renewed in place (cert-manager, a Kubernetes Secret update swapping the mounted
directory) while the daemon keeps running. Both sources check their files' stat at most once a
second, on use: new TLS handshakes for the certificates, incoming RPCs for the token. A change
that cannot be read or parsed keeps the previous material in force and is logged, never a crash.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

import grpc

from ..filewatch import FileWatch

log = logging.getLogger("loopwarden.security")

CHECK_INTERVAL_SECONDS = 1.0


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


class RotatingServerCertificates:
    """grpc dynamic server credentials backed by certificate files that may be replaced."""

    def __init__(self, cert: str, key: str, client_ca: str | None, *,
                 clock: Callable[[], float] = time.monotonic, interval: float = CHECK_INTERVAL_SECONDS) -> None:
        self._cert, self._key, self._client_ca = cert, key, client_ca
        paths = tuple(p for p in (cert, key, client_ca) if p)
        self._initial = self._load()  # raises OSError/ValueError: the daemon must not start without them
        self._watch = FileWatch(paths, clock=clock, interval=interval)

    def _load(self) -> grpc.ServerCertificateConfiguration:
        client_ca = _read(self._client_ca) if self._client_ca else None
        return grpc.ssl_server_certificate_configuration([(_read(self._key), _read(self._cert))], client_ca)

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """Called by gRPC before each new handshake: a new configuration, or None for no change."""
        if not self._watch.changed():
            return None
        try:
            configuration = self._load()
        except OSError as exc:
            # Mid-rotation or unreadable: tried again at the next check.
            log.error("TLS files changed but cannot be read; the previous certificates stay in force",
                      extra={"error": str(exc)})
            return None
        except ValueError as exc:
            self._watch.loaded()  # refused for its content: wait for the next change
            log.error("TLS files changed but cannot be loaded; the previous certificates stay in force",
                      extra={"error": str(exc)})
            return None
        self._watch.loaded()
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
        self._watch = FileWatch((path,), clock=clock, interval=interval)

    def _load(self) -> bytes:
        return _read(self._path).decode("utf-8", "replace").strip().encode()

    def current(self) -> bytes:
        if self._watch.changed():
            try:
                token = self._load()
            except OSError as exc:
                log.error("token file changed but cannot be read", extra={"error": str(exc)})
                return self._token  # tried again at the next check
            self._watch.loaded()
            if token:
                self._token = token
                log.info("bearer token reloaded", extra={"token_file": self._path})
            else:
                log.error("token file changed to an empty token; the previous token stays in force",
                          extra={"token_file": self._path})
        return self._token
