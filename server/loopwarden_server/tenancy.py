"""Per-tenant shares of the daemon's runs and Evaluate streams, so one tenant cannot evict
another's runs or take every stream.

Shares exist only when the token file names two or more tenants; a daemon with no token file, a
single token or one tenant keeps one pool, exactly as before. A tenant's share is the config's
`loopwarden.tenantMaxRuns` / `loopwarden.tenantMaxStreams` when set, else an equal split of
`--max-runs` / `--max-streams` by the number of tenants (at least 1). The run quota is enforced
by the core's run store (a run past it evicts the tenant's own least recently used run); the
stream share here, at Evaluate admission. Both follow a rotated token file or a reloaded config
on the next `refresh` (every new stream, a reload, and the daemon's one-second sweep).
"""
from __future__ import annotations

from collections.abc import Callable

from .config.tables import DaemonLimits


def equal_share(total: int, tenants: int) -> int:
    """`total` split equally by `tenants`, rounded down (so the shares never add up to more), at least 1."""
    return max(1, total // tenants)


class TenantShares:
    def __init__(self, tenants: Callable[[], frozenset[str]], limits: Callable[[], DaemonLimits], *,
                 max_runs: int, max_streams: int, set_run_quota: Callable[[int], None]) -> None:
        self._tenants = tenants
        self._limits = limits
        self._max_runs = max_runs
        self._max_streams = max_streams
        self._set_run_quota = set_run_quota
        self._seen: tuple[frozenset[str], DaemonLimits] | None = None
        self.run_quota = 0  # 0: no shares (one tenant)
        self.stream_share = 0
        self.tenant_count = 0
        self._open: dict[str, int] = {}

    def refresh(self) -> None:
        """Recompute the shares when the tenants or the config changed; the core gets the run quota."""
        tenants, limits = self._tenants(), self._limits()
        if self._seen is not None and self._seen[0] == tenants and self._seen[1] == limits:
            return
        self._seen = (tenants, limits)
        self.tenant_count = len(tenants)
        if self.tenant_count < 2:
            self.run_quota = self.stream_share = 0
        else:
            self.run_quota = limits.tenant_max_runs or equal_share(self._max_runs, self.tenant_count)
            self.stream_share = limits.tenant_max_streams or equal_share(self._max_streams, self.tenant_count)
        self._set_run_quota(self.run_quota)

    def open_streams(self, tenant: str) -> int:
        return self._open.get(tenant, 0)

    def admit_stream(self, tenant: str) -> bool:
        """Count a new stream of `tenant`; False (nothing counted) when it already holds its share."""
        self.refresh()
        if self.stream_share and self._open.get(tenant, 0) >= self.stream_share:
            return False
        self._open[tenant] = self._open.get(tenant, 0) + 1
        return True

    def release_stream(self, tenant: str) -> None:
        left = self._open.get(tenant, 0) - 1
        if left > 0:
            self._open[tenant] = left
        else:
            self._open.pop(tenant, None)
