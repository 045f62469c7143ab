"""`redis://` / `rediss://` (one server) and `redis+cluster://` / `rediss+cluster://` (Redis
Cluster): a state store shared by replicas, written behind the hot path.

Each run is one key, PREFIX + encoding.tree_key(tenant, root, run_id) (a root run's is
encoding.run_key(tenant, run_id); a child run's carries its root's hash tag), holding encoding's
bytes, with the run's idle TTL as its expiry (PX), so Redis forgets a run when the daemon would. A flush is
one pipeline (no MULTI: keys are independent) of SET ... PX / DEL. A load is one GET.
Runs are written fenced by owner (FENCED_WRITE, one script per run beside its owner mark, both on
the run's slot), and loaded with their owner mark (statestore/fencing.py: misroutes and fencing).

Timeouts are short and redis-py's own retries are off: an unreachable Redis must cost an event
at most one connect timeout, and the daemon's flusher does its own backoff (persistence fails
open: the daemon keeps serving from memory). The URL may carry an ACL user and password
(redis://user:password@host:port/db); they never appear in a log line or error.

Redis Cluster. The scheme says so: `redis+cluster://[user:password@]host:port[,host:port...]`
(`rediss+cluster://` for TLS), one or more seed nodes; the client (redis-py's RedisCluster)
learns the slot map from them and follows MOVED/ASK redirections. Every key already carries a
hash tag naming its tree's root, `{b64 tenant.b64 root}` (encoding.py), so a run and its whole
tree live on one slot; a flush pipeline is split by node by the client. No database number: a
cluster has only db 0. Redirections and a failover's refused connections are retried a few times
with a short backoff (the slot map is re-read between tries); past that the operation fails like
any store error and the keeper's own fail-open rules apply (a failed load is merged later).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from .base import FencedItem, FlushItem, StateStore, StateStoreError

CONNECT_TIMEOUT_SECONDS = 0.5
COMMAND_TIMEOUT_SECONDS = 2.0
# The run's owner mark: its key's hash tag, so it lives on the run's slot (one script sees both).
OWNER_SUFFIX = b"#owner"
# A fenced write (base.py: STALE 0, WAITING 1, WRITTEN 2). KEYS: the run, its owner mark. ARGV:
# value ("" deletes), ttl ms, this replica, the generation its copy came from (-1: a delete), lease
# ms. The mark is "<instance> <generation> <lease end, ms>" on Redis's own clock, kept as long as
# the run. A copy older than the stored generation is STALE (another replica wrote since); a live
# lease of another replica is WAITING; else the write goes and this replica owns the run.
FENCED_WRITE = """
local mark = redis.call('GET', KEYS[2])
local gen = 0
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if mark then
  local owner, g, lease_end = string.match(mark, '^(%S+) (%d+) (%d+)$')
  if owner then
    gen = tonumber(g)
    if tonumber(ARGV[4]) >= 0 and gen ~= tonumber(ARGV[4]) then return {0, mark} end
    if owner ~= ARGV[3] and now < tonumber(lease_end) then return {1, mark} end
  end
end
if ARGV[1] == '' then
  redis.call('DEL', KEYS[1], KEYS[2])
  return {2, 0}
end
gen = gen + 1
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SET', KEYS[2], ARGV[3] .. ' ' .. gen .. ' ' .. (now + tonumber(ARGV[5])), 'PX', ARGV[2])
return {2, gen}
"""
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
# Tries after a redirection or a refused node while a cluster fails over (the map is re-read).
CLUSTER_RETRIES = 3


def cluster_seeds(url: str) -> list[tuple[str, int]]:
    """The seed nodes of a redis+cluster:// URL (host:port, comma separated); ValueError naming
    the part that is wrong."""
    netloc = urlsplit(url).netloc.rpartition("@")[2]
    seeds = []
    for part in filter(None, (p.strip() for p in netloc.split(","))):
        host, colon, port = part.rpartition(":")
        if not colon or "]" in port:  # no port given (an IPv6 literal's colons are in brackets)
            host, port = part, "6379"
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"not a host:port seed node: {part!r}")
        seeds.append((host.strip("[]"), int(port)))
    if not seeds:
        raise ValueError("names no seed node (redis+cluster://host:port[,host:port...])")
    path = urlsplit(url).path.strip("/")
    if path not in ("", "0"):
        raise ValueError(f"a cluster has only database 0, not {path!r}")
    return seeds


class RedisStateStore(StateStore):
    lazy = True
    fenced = True
    kind = "redis"

    def __init__(self, url: str, key_prefix: str) -> None:
        self.url = url
        self.prefix = key_prefix.encode()
        parts = urlsplit(url)
        self.cluster = parts.scheme in CLUSTER_SCHEMES
        if self.cluster:
            try:
                seeds = ",".join(f"{host}:{port}" for host, port in cluster_seeds(url))
            except ValueError:
                seeds = "?"
            self._where = f"{parts.scheme}://{seeds}"
        else:
            self._where = f"{parts.scheme}://{parts.hostname or 'localhost'}:{parts.port or 6379}{parts.path or ''}"
        self._client: Any = None  # redis.asyncio's Redis or RedisCluster, made on first use

    def describe(self) -> str:
        return self._where

    def check(self) -> None:
        try:
            import redis.asyncio as aioredis
            from redis.backoff import NoBackoff
            from redis.asyncio.retry import Retry
        except ImportError:
            raise StateStoreError("--state-store redis:// needs the redis client: "
                                  "pip install 'loopwarden[redis]'") from None
        try:
            if self.cluster:
                self._client = self._cluster_client()
            else:
                self._client = aioredis.Redis.from_url(
                    self.url, socket_connect_timeout=CONNECT_TIMEOUT_SECONDS, socket_timeout=COMMAND_TIMEOUT_SECONDS,
                    retry=Retry(NoBackoff(), 0), health_check_interval=0)
        except ValueError as exc:
            raise StateStoreError(f"--state-store: not a usable Redis URL ({self._where}): {exc}") from None

    def _cluster_client(self):
        """redis-py's cluster client on the URL's seed nodes (ValueError: a malformed URL)."""
        from redis.asyncio.cluster import ClusterNode, RedisCluster
        from redis.asyncio.retry import Retry
        from redis.backoff import ExponentialBackoff

        parts = urlsplit(self.url)
        credentials = parts.netloc.rpartition("@")[0]
        username, _, password = credentials.partition(":")
        return RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in cluster_seeds(self.url)],
            username=unquote(username) or None, password=unquote(password) or None,
            ssl=CLUSTER_SCHEMES[parts.scheme] == "rediss",
            socket_connect_timeout=CONNECT_TIMEOUT_SECONDS, socket_timeout=COMMAND_TIMEOUT_SECONDS,
            # Slots a failing-over master held are served again as soon as its replica takes over.
            require_full_coverage=False,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), CLUSTER_RETRIES), health_check_interval=0)

    def shard(self, key: bytes) -> str:
        """A cluster's master serving the key's slot, by the client's slot map ("" before the
        client has one, or for a single Redis)."""
        if not self.cluster or self._client is None:
            return ""
        try:
            node = self._client.get_node_from_key(self.prefix + key)
        except Exception:  # noqa: BLE001 - no slot map yet, a slot no node serves: one shard of its own
            return ""
        return node.name if node is not None else ""

    def shards(self) -> list[str]:
        if not self.cluster or self._client is None:
            return [""]
        try:
            masters = [node.name for node in self._client.get_primaries()]
        except Exception:  # noqa: BLE001 - no slot map yet
            return [""]
        return masters or [""]

    async def load(self, key: bytes) -> bytes | None:
        try:
            return await self._client.get(self.prefix + key)
        except Exception as exc:  # noqa: BLE001 - every client failure is one store error
            raise StateStoreError(f"redis GET failed at {self._where}: {type(exc).__name__}: {exc}") from None

    async def load_owned(self, key: bytes) -> tuple[bytes | None, bytes | None]:
        pipe = self._client.pipeline(transaction=False)
        pipe.get(self.prefix + key)
        pipe.get(self.prefix + key + OWNER_SUFFIX)
        try:
            value, mark = await pipe.execute()
        except Exception as exc:  # noqa: BLE001 - every client failure is one store error
            raise StateStoreError(f"redis GET failed at {self._where}: {type(exc).__name__}: {exc}") from None
        return value, mark

    async def flush_fenced(self, items: Sequence[FencedItem], owner: str,
                           lease_seconds: float) -> list[tuple[int, int | bytes]]:
        if not items:
            return []
        pipe = self._client.pipeline(transaction=False)
        lease = str(max(1, int(lease_seconds * 1000)))
        for key, value, ttl, gen in items:
            # EVAL, not EVALSHA: Redis caches the script either way, and EVALSHA saved only ~10%
            # here while needing NOSCRIPT handling on every node a cluster fails over to.
            pipe.eval(FENCED_WRITE, 2, self.prefix + key, self.prefix + key + OWNER_SUFFIX,
                      value or b"", str(max(1, int(ttl * 1000))), owner, str(gen), lease)
        try:
            answers = await pipe.execute()
        except Exception as exc:  # noqa: BLE001
            raise StateStoreError(f"redis pipeline failed at {self._where}: {type(exc).__name__}: {exc}") from None
        return [(int(code), detail) for code, detail in answers]

    async def flush(self, items: Sequence[FlushItem]) -> None:
        if not items:
            return
        pipe = self._client.pipeline(transaction=False)
        for key, value, ttl in items:
            if value is None:
                pipe.delete(self.prefix + key)
            else:
                pipe.set(self.prefix + key, value, px=max(1, int(ttl * 1000)))
        try:
            await pipe.execute()
        except Exception as exc:  # noqa: BLE001
            raise StateStoreError(f"redis pipeline failed at {self._where}: {type(exc).__name__}: {exc}") from None

    async def close(self) -> None:
        if self._client is not None:
            try:
                await self._client.aclose()
            except Exception:  # noqa: BLE001 - closing a dead connection is not news
                pass
