"""`file:PATH`: the embedded state store of one replica, an append-only log of run values.

Design. PATH is one file: an 8-byte header, then frames

    u32 body length | u32 crc32(body) | body = u16 key length | key | value   (big-endian)

where an empty value deletes the key. A flush appends the frames of the runs changed since the
last one and fsyncs, so it costs what changed, not what is held, and memory while writing is one
batch of frames, never the whole state. A frame is only ever appended after every earlier one is
on disk, so a crash (kill -9, OOM, power) can tear at most the last frames: `restore` reads up to
the last frame whose length and checksum hold, truncates the torn tail, and every run flushed
before it is intact. The latest frame of a key wins.

When the log holds more than twice the bytes of its live frames it is compacted: the live frames
are copied, streamed, into PATH.compact, fsynced, and renamed over PATH (atomic; the directory is
fsynced too). Either the old or the new log is there after a crash, never neither. The key index
(key -> offset and length of its latest frame, ~100 bytes a run) is the only state kept beside.

Nothing here ever deletes PATH: a start that fails, or a file that cannot be read (it is moved
aside to PATH.refused by the caller), leaves the stored state for the next start.
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import zlib
from collections.abc import Iterator, Sequence

from .base import FlushItem, StateStore, StateStoreError

log = logging.getLogger("loopwarden.daemon")

HEADER = b"LWSTATE\x01"
_FRAME = struct.Struct(">II")
_KEY = struct.Struct(">H")
COMPACT_MIN_BYTES = 4 * 1024 * 1024
READ_CHUNK = 1024 * 1024


class NotAStateFile(StateStoreError):
    """PATH holds something else (perhaps a snapshot from before the state store)."""


def frame(key: bytes, value: bytes | None) -> bytes:
    body = _KEY.pack(len(key)) + key + (value or b"")
    return _FRAME.pack(len(body), zlib.crc32(body)) + body


class FileStateStore(StateStore):
    kind = "file"

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self._index: dict[bytes, tuple[int, int]] = {}  # key -> (offset, frame length) of its live frame
        self._size = 0  # bytes in the log, header included
        self._live_bytes = 0
        self._lock = asyncio.Lock()
        self.compactions = 0

    def describe(self) -> str:
        return f"file:{self.path}"

    def check(self) -> None:
        """PATH (or the directory it will be created in) must be writable; nothing is changed."""
        path, directory = self.path, os.path.dirname(self.path)
        try:
            if os.path.isdir(path):
                raise StateStoreError(f"state store {path} is a directory; give a file path")
            os.makedirs(directory, exist_ok=True)
            probe = f"{path}.probe-{os.getpid()}"
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, b"x")
                os.fsync(fd)
            finally:
                os.close(fd)
                os.unlink(probe)
            if os.path.exists(path):
                with open(path, "r+b"):
                    pass
        except StateStoreError:
            raise
        except OSError as exc:
            raise StateStoreError(f"state store {path} is not writable: {exc.strerror or exc}") from None

    def restore(self) -> Iterator[bytes]:
        """The live values, oldest write first. A missing or empty file starts a new log."""
        path = self.path
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            self._new_log()
            return
        with open(path, "rb") as handle:
            if handle.read(len(HEADER)) != HEADER:
                raise NotAStateFile(f"{path} is not a loopwarden state file")
        good_end = self._scan()
        actual = os.path.getsize(path)
        if good_end < actual:
            log.warning("state file had a torn tail (a crash mid-write); the runs before it are kept",
                        extra={"state_store": path, "kept_bytes": good_end, "dropped_bytes": actual - good_end})
            with open(path, "r+b") as handle:
                handle.truncate(good_end)
                os.fsync(handle.fileno())
        self._size = good_end
        with open(path, "rb") as handle:
            for offset, length in sorted(self._index.values()):
                handle.seek(offset)
                raw = handle.read(length)
                key_length = _KEY.unpack_from(raw, _FRAME.size)[0]
                yield raw[_FRAME.size + _KEY.size + key_length:]

    def _scan(self) -> int:
        """Index the log; the offset after its last intact frame."""
        index: dict[bytes, tuple[int, int]] = {}
        live = 0
        with open(self.path, "rb") as handle:
            offset = len(HEADER)
            handle.seek(offset)
            while True:
                head = handle.read(_FRAME.size)
                if len(head) < _FRAME.size:
                    break
                length, crc = _FRAME.unpack(head)
                body = handle.read(length)
                if len(body) < length or zlib.crc32(body) != crc or length < _KEY.size:
                    break
                key_length = _KEY.unpack_from(body)[0]
                if _KEY.size + key_length > length:
                    break
                key = body[_KEY.size:_KEY.size + key_length]
                old = index.pop(key, None)
                if old is not None:
                    live -= old[1]
                if length > _KEY.size + key_length:
                    index[key] = (offset, _FRAME.size + length)
                    live += _FRAME.size + length
                offset += _FRAME.size + length
        self._index, self._live_bytes = index, live
        return offset

    def _new_log(self) -> None:
        self._write_atomically(iter(()))

    def rewrite(self, items: Iterator[tuple[bytes, bytes]]) -> None:
        """Replace the whole log with these (key, value) pairs, atomically (used to convert)."""
        self._write_atomically(items)

    def _write_atomically(self, frames: Iterator[tuple[bytes, bytes]]) -> None:
        tmp = f"{self.path}.compact"
        index: dict[bytes, tuple[int, int]] = {}
        offset = len(HEADER)
        with open(tmp, "wb") as handle:
            handle.write(HEADER)
            for key, value in frames:
                data = frame(key, value)
                handle.write(data)
                index[key] = (offset, len(data))
                offset += len(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
        self._fsync_directory()
        self._index, self._size = index, offset
        self._live_bytes = offset - len(HEADER)

    def _fsync_directory(self) -> None:
        fd = os.open(os.path.dirname(self.path), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    async def flush(self, items: Sequence[FlushItem]) -> None:
        if not items:
            return
        async with self._lock:
            try:
                await asyncio.to_thread(self._append, items)
                if self._size > max(COMPACT_MIN_BYTES, 2 * self._live_bytes):
                    await asyncio.to_thread(self._compact)
            except OSError as exc:
                raise StateStoreError(f"cannot write state store {self.path}: {exc.strerror or exc}") from None

    def _append(self, items: Sequence[FlushItem]) -> None:
        frames = [(key, frame(key, value), value is not None) for key, value, _ttl in items]
        start = self._size
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            try:
                os.write(fd, b"".join(data for _key, data, _live in frames))
                os.fsync(fd)
            except OSError:
                os.ftruncate(fd, start)  # never leave half a batch for the next append to follow
                raise
        finally:
            os.close(fd)
        offset = start
        index = self._index
        for key, data, live in frames:
            old = index.pop(key, None)
            if old is not None:
                self._live_bytes -= old[1]
            if live:
                index[key] = (offset, len(data))
                self._live_bytes += len(data)
            offset += len(data)
        self._size = offset

    def _compact(self) -> None:
        before = self._size
        with open(self.path, "rb") as source:
            def live_frames() -> Iterator[tuple[bytes, bytes]]:
                for key, (offset, length) in sorted(self._index.items(), key=lambda item: item[1][0]):
                    source.seek(offset)
                    raw = source.read(length)
                    yield key, raw[_FRAME.size + _KEY.size + len(key):]
            self._write_atomically(live_frames())
        self.compactions += 1
        log.info("state file compacted", extra={"state_store": self.path, "bytes_before": before,
                                                "bytes_after": self._size, "runs": len(self._index)})
