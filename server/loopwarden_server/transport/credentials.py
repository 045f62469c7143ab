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
from .auth import TokenFileError, TokenTable, parse_token_file

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
    """The bearer tokens, re-read when their file changes. While the file is empty, unreadable or
    deleted, `current()` is None: authentication fails closed until a valid file is back."""

    def __init__(self, path: str, *, clock: Callable[[], float] = time.monotonic,
                 interval: float = CHECK_INTERVAL_SECONDS, on_state: Callable[[bool], None] = lambda _ok: None) -> None:
        self._path = path
        self._on_state = on_state
        self._table: TokenTable | None = parse_token_file(_read(path))  # raises: no start without tokens
        self._watch = FileWatch((path,), clock=clock, interval=interval)

    def current(self) -> TokenTable | None:
        if self._watch.changed():
            self._reload()
        return self._table

    def _reload(self) -> None:
        try:
            table = parse_token_file(_read(self._path))
        except OSError as exc:
            # Unreadable or deleted: refuse, and try again at every check until it is back.
            self._fail(f"token file cannot be read ({exc.strerror or 'error'}); refusing authenticated RPCs")
            return
        except TokenFileError as exc:
            self._watch.loaded()
            self._fail(f"token file is unusable ({exc}); refusing authenticated RPCs")
            return
        self._watch.loaded()
        was_failing = self._table is None
        self._table = table
        self._on_state(True)
        log.info("bearer tokens reloaded" if not was_failing else "token file is usable again; tokens reloaded",
                 extra={"token_file": self._path, "tenants": len(table.by_digest)})

    def _fail(self, message: str) -> None:
        if self._table is not None:  # one log line per outage, not one per check
            log.error(message, extra={"token_file": self._path})
        self._table = None
        self._on_state(False)
