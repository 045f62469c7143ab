"""`redis://` / `rediss://`: a state store shared by replicas, written behind the hot path.

Each run is one key, PREFIX + encoding.tree_key(tenant, root, run_id) (a root run's is
encoding.run_key(tenant, run_id); a child run's carries its root's hash tag), holding encoding's
bytes, with the run's idle TTL as its expiry (PX), so Redis forgets a run when the daemon would. A flush is
one pipeline (no MULTI: keys are independent) of SET ... PX / DEL. A load is one GET.

Timeouts are short and redis-py's own retries are off: an unreachable Redis must cost an event
at most one connect timeout, and the daemon's flusher does its own backoff (persistence fails
open: the daemon keeps serving from memory). The URL may carry an ACL user and password
(redis://user:password@host:port/db); they never appear in a log line or error.
"""
from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from .base import FlushItem, StateStore, StateStoreError

CONNECT_TIMEOUT_SECONDS = 0.5
COMMAND_TIMEOUT_SECONDS = 2.0


class RedisStateStore(StateStore):
    lazy = True
    kind = "redis"

    def __init__(self, url: str, key_prefix: str) -> None:
        self.url = url
        self.prefix = key_prefix.encode()
        parts = urlsplit(url)
        self._where = f"{parts.scheme}://{parts.hostname or 'localhost'}:{parts.port or 6379}{parts.path or ''}"
        self._client = None

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
            self._client = aioredis.Redis.from_url(
                self.url, socket_connect_timeout=CONNECT_TIMEOUT_SECONDS, socket_timeout=COMMAND_TIMEOUT_SECONDS,
                retry=Retry(NoBackoff(), 0), health_check_interval=0)
        except ValueError as exc:
            raise StateStoreError(f"--state-store: not a usable Redis URL ({self._where}): {exc}") from None

    async def load(self, key: bytes) -> bytes | None:
        try:
            return await self._client.get(self.prefix + key)
        except Exception as exc:  # noqa: BLE001 - every client failure is one store error
            raise StateStoreError(f"redis GET failed at {self._where}: {type(exc).__name__}: {exc}") from None

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
