"""Who may use the proxy's HTTP listener (--listen): the daemon's own token file and TLS options.

`--listen-auth-token-file FILE` is the daemon's `--auth-token-file` (one token, or one `TENANT
TOKEN` per line; re-read when it changes; while it is unusable every request is refused): each
request must carry `Authorization: Bearer TOKEN` with one of its tokens, or it is answered 401
before anything else is read. `--listen-tls-cert`/`--listen-tls-key` serve https (renewed
certificates apply to new handshakes), and `--listen-tls-client-ca` requires a client
certificate it signed (mTLS), refused in the handshake. The flags are the daemon's with a
`listen-` prefix, because the unprefixed `--tls-cert`, `--tls-key` and `--token-file` are the
proxy's own credentials towards the daemon. Authentication admits or refuses: the daemon still
sees every session through the proxy's own credentials (one tenant).
"""
from __future__ import annotations

import argparse
import ssl
from dataclasses import dataclass

from ..settings import Security

FLAGS = ("listen_auth_token_file", "listen_tls_cert", "listen_tls_key", "listen_tls_client_ca")


def add_listener_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("who may use --listen (the daemon's own options, prefixed listen-)")
    group.add_argument("--listen-auth-token-file", metavar="FILE",
                       help="file of bearer tokens clients must send (one token, or `TENANT TOKEN` per line); "
                            "a missing or wrong one is answered 401")
    group.add_argument("--listen-tls-cert", metavar="FILE", help="PEM certificate chain: serve https")
    group.add_argument("--listen-tls-key", metavar="FILE", help="PEM private key for --listen-tls-cert")
    group.add_argument("--listen-tls-client-ca", metavar="FILE",
                       help="PEM CA bundle: require client certificates it signed (mTLS)")


def security_from(args: argparse.Namespace) -> Security | str:
    """The listener's security settings, or an error message naming the flag."""
    given = {name: getattr(args, name, None) for name in FLAGS}
    if any(given.values()) and not args.listen:
        flag = next(name for name, value in given.items() if value).replace("_", "-")
        return f"--{flag} needs --listen (over stdio the client is the process that started the proxy)"
    if bool(given["listen_tls_cert"]) != bool(given["listen_tls_key"]):
        return "--listen-tls-cert and --listen-tls-key go together"
    if given["listen_tls_client_ca"] and not given["listen_tls_cert"]:
        return "--listen-tls-client-ca needs --listen-tls-cert and --listen-tls-key (mTLS is TLS first)"
    return Security(tls_cert=given["listen_tls_cert"], tls_key=given["listen_tls_key"],
                    tls_client_ca=given["listen_tls_client_ca"], auth_token_file=given["listen_auth_token_file"])


@dataclass
class ListenerGate:
    """The loaded token file and TLS context (loading raises: no listener without them)."""

    security: Security

    def __post_init__(self) -> None:
        from ..hooks_http import _TlsContexts  # the hook listener's: same files, same renewal
        from ..transport.credentials import TokenFile

        self._tokens = TokenFile(self.security.auth_token_file) if self.security.auth_token_file else None
        self._tls = _TlsContexts(self.security) if self.security.tls else None

    @property
    def scheme(self) -> str:
        return "https" if self._tls is not None else "http"

    def ssl_context(self) -> ssl.SSLContext | None:
        return self._tls.listener_context() if self._tls is not None else None

    def refusal(self, headers: dict[bytes, bytes]) -> str | None:
        """Why a request with these headers is refused (401), or None when it may go on."""
        if self._tokens is None:
            return None
        table = self._tokens.current()
        if table is None:
            return "the listener's token file is unusable: every request is refused until it is fixed"
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        supplied = authorization[len("Bearer "):].strip() if authorization.startswith("Bearer ") else ""
        if not supplied:
            return "missing bearer token (Authorization: Bearer TOKEN)"
        if table.tenant_for(supplied.encode("latin-1")) is None:
            return "invalid bearer token"
        return None
