"""State stores: per-run state that outlives the process (see base for the interface)."""
from __future__ import annotations

from .base import FlushItem, StateStore, StateStoreError
from .file import FileStateStore
from .redis_store import RedisStateStore

DEFAULT_KEY_PREFIX = "loopwarden:"

__all__ = ["FlushItem", "StateStore", "StateStoreError", "FileStateStore", "RedisStateStore", "open_state_store",
           "DEFAULT_KEY_PREFIX", "parse_state_store"]


def parse_state_store(url: str) -> str:
    """The URL as given when its scheme is one we serve; ValueError otherwise (a settings check)."""
    text = url.strip()
    if text.startswith("file:"):
        if not text[len("file:"):].strip():
            raise ValueError("file: needs a path, e.g. file:/var/lib/loopwarden/runs.state")
        return text
    if text.startswith(("redis://", "rediss://")):
        return text
    if text.startswith(("redis+cluster://", "rediss+cluster://")):
        from .redis_store import cluster_seeds

        cluster_seeds(text)  # ValueError names the part that is wrong
        return text
    raise ValueError("must be file:PATH, redis://[user:password@]host:port[/db], rediss://..., or "
                     "redis+cluster://[user:password@]host:port[,host:port...] / rediss+cluster://... (Redis Cluster)")


def open_state_store(url: str, key_prefix: str = DEFAULT_KEY_PREFIX) -> StateStore:
    if url.startswith("file:"):
        path = url[len("file:"):]
        if path.startswith("//"):  # file:///abs/path
            path = path[2:]
        return FileStateStore(path)
    return RedisStateStore(url, key_prefix)
