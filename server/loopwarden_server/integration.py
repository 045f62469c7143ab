"""Which integration an event came through: the `integration` label of the verdict counter.

The label takes one of a bounded set of values. gRPC callers name themselves with the metadata
header `x-loopwarden-integration` (read per RPC by `transport.integration`); the daemon's own
hook endpoints set theirs on the events they build. A missing header means a plain gRPC client,
and any value outside the set counts as "other", so a caller cannot create series.

NOTE: the gRPC servicer builds `EventInput`s without knowing the header; the transport's
interceptor sets `current_integration` inside the RPC's handler, and `EventInput.integration`
takes it as its default. A context variable is per task, so one RPC's value never leaks to another.
"""
from __future__ import annotations

from contextvars import ContextVar

from loopwarden.hooks import HOSTS, INTEGRATION_HEADER

GRPC = "grpc"
# Each hook host's label (claude_code, codex, gemini_cli, cursor, ...): a registered host counts
# under its own name.
HOOK_HOSTS = tuple(host.integration for host in HOSTS)
MCP_PROXY = "mcp_proxy"
# The framework adapters name themselves too (the Python client's LangChain and OpenAI Agents
# adapters, the OpenClaw plugin), so their blocks are not counted as a plain gRPC client's.
LANGCHAIN = "langchain"
OPENAI_AGENTS = "openai_agents"
OPENCLAW = "openclaw"
OTHER = "other"
INTEGRATIONS = (GRPC, *HOOK_HOSTS, MCP_PROXY, LANGCHAIN, OPENAI_AGENTS, OPENCLAW, OTHER)

current_integration: ContextVar[str] = ContextVar("loopwarden_integration", default=GRPC)


def integration_label(raw: str | None) -> str:
    """The label value for what a caller said it is: GRPC when it said nothing, OTHER when unknown."""
    if raw is None or not raw.strip():
        return GRPC
    value = raw.strip().lower()
    return value if value in INTEGRATIONS else OTHER


__all__ = ["GRPC", "HOOK_HOSTS", "INTEGRATIONS", "INTEGRATION_HEADER", "MCP_PROXY", "OTHER", "current_integration",
           "integration_label"]
