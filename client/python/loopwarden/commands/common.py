"""What the client commands share: the connection flags turned into a client, and a daemon's
refusal turned into words a person can act on (a token or TLS missing, a handshake failing).

Exit status of every command: 2 for an error (bad flags, unreadable files, an unreachable or
refusing daemon); 0 and 1 are each command's own answer.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from ..connection import Connection, ConnectionSettingsError, connection_from

EXIT_ERROR = 2


def connection_or_none(args: argparse.Namespace) -> Connection | None:
    """The connection the flags and LOOPWARDEN_* variables describe; None (after saying why) when
    they cannot be used."""
    try:
        return connection_from(args)
    except ConnectionSettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def open_client(connection: Connection, **kwargs):
    from ..client import LoopwardenClient

    return LoopwardenClient(connection.address, **connection.client_kwargs(), **kwargs)


def hint(code: str, details: str, connection: Connection) -> str:
    """What to do about a failed call, from its status code name and details ("" when nothing useful)."""
    if code == "UNAUTHENTICATED":
        if connection.token is None:
            return "the daemon requires a bearer token: pass --token-file FILE (or set LOOPWARDEN_TOKEN_FILE)"
        return "the daemon did not accept the token of --token-file (LOOPWARDEN_TOKEN_FILE): is it this daemon's?"
    if code == "UNAVAILABLE":
        lowered = details.lower()
        if connection.tls and any(word in lowered for word in ("ssl", "tls", "handshake", "certificate")):
            return ("the TLS handshake failed: check --tls-ca (the CA that signed the daemon's certificate), and "
                    "--tls-cert/--tls-key when the daemon requires client certificates (mTLS)")
        if connection.tls:
            return ("is the daemon running there, serving TLS? If the handshake failed, check --tls-ca, and "
                    "--tls-cert/--tls-key when the daemon requires client certificates (mTLS)")
        return ("is the daemon running there? If it serves TLS, pass --tls-ca CA.pem (or set LOOPWARDEN_TLS_CA), "
                "plus --tls-cert/--tls-key when it requires client certificates")
    return ""


def report_failure(exc: BaseException | str, connection: Connection, *, what: str = "") -> int:
    """Print a failed call as `error: ADDRESS: CODE: details` and, when there is one, a hint line; returns 2.

    The client's errors carry the status as text (`CODE: details`), so callers never need grpc."""
    text = str(exc)
    code, _, details = text.partition(": ")
    print(f"error: {connection.address}: {what}{text}", file=sys.stderr)
    advice = hint(code, details, connection)
    if advice:
        print(f"hint: {advice}", file=sys.stderr)
    return EXIT_ERROR


def call_daemon(args: argparse.Namespace, call: Callable[[Any], Any], *,
                not_found: type[Exception] | None = None, **client_kwargs) -> tuple[Any, int | None]:
    """`call(client)` on a client the flags describe: (its result, None), or (None, the exit
    status) once what went wrong is said: 1 when it raised `not_found` (the daemon holds no such
    thing), 2 for unusable flags or a failed call."""
    from ..types import LoopwardenError

    connection = connection_or_none(args)
    if connection is None:
        return None, EXIT_ERROR
    with open_client(connection, **client_kwargs) as client:
        try:
            return call(client), None
        except LoopwardenError as exc:
            if not_found is not None and isinstance(exc, not_found):
                print(f"not found: {exc}", file=sys.stderr)
                return None, 1
            return None, report_failure(exc, connection)
