"""Noticing that files changed: the one watcher behind config reload, TLS rotation and the token.

A file "changed" when its stat (inode, mtime, size) differs from the last one seen. `os.stat`
follows symlinks, so a Kubernetes ConfigMap or Secret update (which swaps the `..data` link of
the mounted directory) counts. Checks are rate-limited to one stat per interval, so callers can
ask on every use (each TLS handshake, each RPC). A file that cannot be stat'ed counts as
unchanged: mid-swap or removed, the caller keeps what it has and looks again later.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

StatKey = tuple[tuple[int, int, int], ...]


def stat_key(paths: Sequence[str]) -> StatKey:
    """Raises OSError when a file cannot be stat'ed."""
    key = []
    for path in paths:
        info = os.stat(path)
        key.append((info.st_ino, info.st_mtime_ns, info.st_size))
    return tuple(key)


class FileWatch:
    """`changed()` is True once per change of any of `paths`, at most one check per `interval`.

    Thread-safe: gRPC calls the certificate fetcher from its own threads. Until the caller says
    `loaded()` after a change, every check reports a change again, so a file that could not be
    read (unreadable, half-written) is retried on every check, not only when its stat moves.
    """

    def __init__(self, paths: Sequence[str], *, clock: Callable[[], float], interval: float) -> None:
        self._paths = tuple(paths)
        self._clock = clock
        self._interval = interval
        self._lock = threading.Lock()
        self._next_check = clock() + interval
        try:
            self._key: StatKey | None = stat_key(self._paths)
        except OSError:
            self._key = None
        self._pending = False  # a change was reported and not yet loaded

    @property
    def paths(self) -> tuple[str, ...]:
        return self._paths

    def changed(self) -> bool:
        now = self._clock()
        with self._lock:
            if now < self._next_check:
                return False
            self._next_check = now + self._interval
            try:
                key = stat_key(self._paths)
            except OSError:
                return False
            if key != self._key:
                self._key = key
                self._pending = True
            return self._pending

    def loaded(self) -> None:
        """The change was taken in (or refused for its content): stop reporting it."""
        with self._lock:
            self._pending = False

    def force(self) -> None:
        """Report a change on the next check, whatever the stat says (SIGHUP)."""
        with self._lock:
            self._pending = True
            self._next_check = 0.0
