"""Who is calling: bearer tokens (one per tenant), mTLS identities, and the interceptor that
refuses unauthenticated RPCs. Health stays open for probes.

The token file holds one token (the single-token form: tenant "default") or one `TENANT TOKEN`
pair per line; blank lines and `#` comments are ignored. Each name is a tenant, and every run is
scoped to the tenant that sent it. Tokens are looked up by their sha256, so comparing a
supplied token reveals nothing through timing about any held token but its digest.

`TENANT TOKEN agent` limits a token to agent-side events: its user turns and approvals are
refused (REJECT `user_side_only`), since those speak for the person (a user turn lifts blocks, an
approval answers an ask) and the agent a loop guard restrains must not send them for itself. A
tenant may hold one token of each side: the agent's runner gets the agent-side one, the host's
hook path and the operator the other.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

import grpc

OPEN_PREFIXES = ("/grpc.health.v1.Health/",)
DEFAULT_TENANT = "default"
TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class TokenFileError(ValueError):
    """The token file holds no usable tokens; the message says why (never a token)."""


AGENT_SIDE = "agent"  # the third field of a token limited to agent-side events


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent an RPC: its tenant, and whether its token is limited to agent-side events."""

    tenant: str
    agent_only: bool = False


@dataclass(frozen=True, slots=True)
class TokenTable:
    by_digest: dict[bytes, str]  # sha256(token) -> tenant
    agent_side: frozenset[bytes] = frozenset()  # the digests of tokens limited to agent-side events

    @property
    def tenants(self) -> frozenset[str]:
        return frozenset(self.by_digest.values())

    def tenant_for(self, token: bytes) -> str | None:
        return self.by_digest.get(hashlib.sha256(token).digest())

    def caller_for(self, token: bytes) -> Caller | None:
        digest = hashlib.sha256(token).digest()
        tenant = self.by_digest.get(digest)
        return None if tenant is None else Caller(tenant, digest in self.agent_side)


def parse_token_file(data: bytes) -> TokenTable:
    text = data.decode("utf-8", "replace")
    lines = [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)]
    lines = [(number, line) for number, line in lines if line and not line.startswith("#")]
    if not lines:
        raise TokenFileError("the token file holds no token")
    if len(lines) == 1 and len(lines[0][1].split()) == 1:
        return TokenTable({hashlib.sha256(lines[0][1].encode()).digest(): DEFAULT_TENANT})
    by_digest: dict[bytes, str] = {}
    agent_side: set[bytes] = set()
    sides: set[tuple[str, bool]] = set()
    for number, line in lines:
        fields = line.split()
        if len(fields) not in (2, 3) or (len(fields) == 3 and fields[2] != AGENT_SIDE):
            raise TokenFileError(f"line {number}: expected `TENANT TOKEN` or `TENANT TOKEN {AGENT_SIDE}`")
        name, token = fields[:2]
        agent_only = len(fields) == 3
        if not TENANT_NAME.fullmatch(name):
            raise TokenFileError(f"line {number}: tenant name must be 1-64 letters, digits, '_', '.' or '-'")
        digest = hashlib.sha256(token.encode()).digest()
        if digest in by_digest:
            raise TokenFileError(f"line {number}: this token is already given to tenant {by_digest[digest]!r}")
        if (name, agent_only) in sides:
            side = "an agent-side" if agent_only else "a"
            raise TokenFileError(f"line {number}: tenant {name!r} already has {side} token (one of each side at most)")
        sides.add((name, agent_only))
        by_digest[digest] = name
        if agent_only:
            agent_side.add(digest)
    return TokenTable(by_digest, frozenset(agent_side))


def _bearer(metadata) -> bytes | None:
    for key, value in metadata or ():
        if key == "authorization":
            text = value if isinstance(value, str) else value.decode("latin-1")
            if not text.startswith("Bearer "):
                return b""
            return text.removeprefix("Bearer ").encode("utf-8", "surrogateescape")
    return None


class Identity:
    """The tenant of an RPC: its token's tenant, else its client certificate's subject CN (mTLS),
    else "" (no authentication configured)."""

    def __init__(self, tokens: Callable[[], TokenTable | None] | None) -> None:
        self._tokens = tokens

    def tenant(self, context: grpc.aio.ServicerContext) -> str:
        return self.caller(context).tenant

    def caller(self, context: grpc.aio.ServicerContext) -> Caller:
        if self._tokens is not None:
            table = self._tokens()
            supplied = _bearer(context.invocation_metadata())
            if table is not None and supplied:
                caller = table.caller_for(supplied)
                if caller is not None:
                    return caller
        common_names = (context.auth_context() or {}).get("x509_common_name")
        if common_names:
            name = common_names[0]
            return Caller(name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name))
        return Caller("")

    def known_tenants(self) -> frozenset[str]:
        table = self._tokens() if self._tokens is not None else None
        return table.tenants if table is not None else frozenset()


def _deny(message: str):
    async def deny(_request, context: grpc.aio.ServicerContext):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
    return deny


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    """Every RPC except health must carry `authorization: Bearer <token>` of a tenant in the
    token file. While the file is unusable (empty, unreadable, deleted) every such RPC is refused:
    authentication fails closed, never open. `tokens` is asked on every RPC, so a rotated file
    applies to the next call."""

    def __init__(self, tokens: Callable[[], TokenTable | None],
                 on_failure: Callable[[str], None] = lambda _r: None) -> None:
        self._tokens = tokens
        self._on_failure = on_failure

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(OPEN_PREFIXES):
            return handler
        table = self._tokens()
        supplied = _bearer(handler_call_details.invocation_metadata)
        if table is None:
            reason = "token_file_unusable"
            message = "authentication is unavailable: the daemon's token file is unusable"
        elif not supplied:
            reason, message = "missing_token", "missing bearer token"
        elif table.tenant_for(supplied) is None:
            reason, message = "invalid_token", "invalid bearer token"
        else:
            return handler
        self._on_failure(reason)
        deny = _deny(message)
        kwargs = {"request_deserializer": handler.request_deserializer,
                  "response_serializer": handler.response_serializer}
        if handler.request_streaming and handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(deny, **kwargs)
        if handler.request_streaming:
            return grpc.stream_unary_rpc_method_handler(deny, **kwargs)
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(deny, **kwargs)
        return grpc.unary_unary_rpc_method_handler(deny, **kwargs)
