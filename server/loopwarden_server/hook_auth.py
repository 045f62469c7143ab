"""Who sends a hook request, and how much of the endpoint each sender may hold.

`HookAuth`: the caller of a request, by its bearer token (the daemon's token file: tenant and
side, transport.auth) or, without tokens, by its mTLS name; a missing or wrong token is counted by
reason (`loopwarden_auth_failures_total`) and refused.

`TenantShares`: fairness. MAX_IN_FLIGHT requests are evaluated at once, shared equally by the
tenants that have requests open: alone, a tenant has all of them; with another tenant active, half
each. A tenant flooding the endpoint gets "busy" answers for its excess at once, while another
tenant's session is still judged (it never queues behind the flood).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .metrics import Metrics
from .transport.auth import Caller

if TYPE_CHECKING:
    from .transport.auth import TokenTable

MAX_IN_FLIGHT = 64  # requests being evaluated at once, shared by the active tenants; more get "busy"


class HookAuth:
    """The caller of a hook request: its token's tenant and side (the tenant "" without
    authentication: the mTLS CN if any), None when the token is missing or wrong."""

    def __init__(self, tokens: Callable[[], TokenTable | None] | None, metrics: Metrics | None) -> None:
        self._tokens = tokens
        self._metrics = metrics

    def caller(self, authorization: str, common_name: str) -> Caller | None:
        if self._tokens is None:
            return Caller(common_name)
        table = self._tokens()
        supplied = authorization[len("Bearer "):].strip() if authorization.startswith("Bearer ") else ""
        if table is None:
            reason = "token_file_unusable"
        elif not supplied:
            reason = "missing_token"
        else:
            caller = table.caller_for(supplied.encode("utf-8", "surrogateescape"))
            if caller is not None:
                return caller
            reason = "invalid_token"
        if self._metrics is not None:
            self._metrics.auth_failures.labels(reason).inc()
        return None


class TenantShares:
    """The requests each tenant has being evaluated, against its share of `limit`. Used from one
    loop (the hook thread's), so it needs no lock."""

    def __init__(self, limit: int = MAX_IN_FLIGHT) -> None:
        self._limit = limit
        self.in_flight: dict[str, int] = {}  # tenant -> requests being evaluated

    def share(self, tenant: str) -> int:
        """How many requests `tenant` may have evaluated at once: an equal share of the limit
        among the tenants with requests open (itself included), at least one."""
        active = len(self.in_flight) + (tenant not in self.in_flight)
        return max(1, self._limit // active)

    @contextmanager
    def hold(self, tenant: str) -> Iterator[bool]:
        """One request of `tenant` in flight for the block; yields False (and holds nothing) when
        the tenant's share is taken."""
        held = self.in_flight.get(tenant, 0)
        if held >= self.share(tenant):
            yield False
            return
        self.in_flight[tenant] = held + 1
        try:
            yield True
        finally:
            left = self.in_flight[tenant] - 1
            if left:
                self.in_flight[tenant] = left
            else:
                del self.in_flight[tenant]
