"""How a client command reaches a daemon: one set of flags (and LOOPWARDEN_* environment
variables) shared by every command that talks to one, so a secured daemon is reachable alike
from `inspect`, `replay`, `check`, `hook` and the rest."""
from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_ADDRESS = "127.0.0.1:50051"

# flag, environment variable, attribute, help
_FLAGS = (
    ("--address", "LOOPWARDEN_ADDRESS", "address", f"daemon HOST:PORT (default {DEFAULT_ADDRESS})"),
    ("--tls-ca", "LOOPWARDEN_TLS_CA", "tls_ca", "PEM CA bundle to verify the daemon's TLS certificate (turns TLS on)"),
    ("--tls-cert", "LOOPWARDEN_TLS_CERT", "tls_cert", "PEM client certificate chain, for mTLS (with --tls-key)"),
    ("--tls-key", "LOOPWARDEN_TLS_KEY", "tls_key", "PEM private key of --tls-cert"),
    ("--token-file", "LOOPWARDEN_TOKEN_FILE", "token_file", "file holding the bearer token to send"),
)


class ConnectionSettingsError(ValueError):
    """The connection flags cannot be used; the message names the flag."""


@dataclass(frozen=True, slots=True)
class Connection:
    address: str = DEFAULT_ADDRESS
    token: str | None = None
    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None

    @property
    def tls(self) -> bool:
        return self.root_certificates is not None or self.certificate_chain is not None

    def client_kwargs(self) -> dict:
        """Keyword arguments for LoopwardenClient / AsyncLoopwardenClient."""
        return {"token": self.token, "root_certificates": self.root_certificates,
                "certificate_chain": self.certificate_chain, "private_key": self.private_key}


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connection (each flag also read from its LOOPWARDEN_* variable)")
    for flag, env, dest, help_text in _FLAGS:
        group.add_argument(flag, dest=dest, default=None, metavar=flag.strip("-").split("-")[-1].upper(),
                           help=f"{help_text}; env {env}")


def _read(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ConnectionSettingsError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None


def connection_from(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> Connection:
    """Flags win over environment variables, which win over defaults."""
    values: dict[str, str] = {}
    for _flag, env, dest, _help in _FLAGS:
        value = getattr(args, dest, None)
        if value is None and environ.get(env, "").strip():
            value = environ[env].strip()
        if value is not None:
            values[dest] = value
    if ("tls_cert" in values) != ("tls_key" in values):
        raise ConnectionSettingsError("--tls-cert and --tls-key go together")
    token = None
    if "token_file" in values:
        token = _read(values["token_file"], "--token-file").decode("utf-8", "replace").strip()
        if not token:
            raise ConnectionSettingsError(f"--token-file: {values['token_file']} is empty")
    root = _read(values["tls_ca"], "--tls-ca") if "tls_ca" in values else None
    chain = _read(values["tls_cert"], "--tls-cert") if "tls_cert" in values else None
    key = _read(values["tls_key"], "--tls-key") if "tls_key" in values else None
    return Connection(values.get("address", DEFAULT_ADDRESS), token, root, chain, key)
