"""Noticing that files changed: the one watcher behind config reload, TLS rotation and the token.

A file "changed" when its stat (inode, mtime, size) differs from the last one seen. `os.stat`
follows symlinks, so a Kubernetes ConfigMap or Secret update (which swaps the `..data` link of
the mounted directory) counts. Checks are rate-limited to one stat per interval, so callers can
ask on every use (each TLS handshake, each RPC). A file that disappears is a change too (its
stat becomes "missing"): the caller's read then fails, and it decides what a missing file means
(the config and certificates keep what they have; the token fails closed).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

StatKey = tuple[tuple[int, int, int], ...]


MISSING = (-1, -1, -1)


def stat_key(paths: Sequence[str]) -> StatKey:
    """(inode, mtime, size) of each file; MISSING for one that cannot be stat'ed."""
    key = []
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            key.append(MISSING)
            continue
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
        self._key = stat_key(self._paths)
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
            key = stat_key(self._paths)
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
