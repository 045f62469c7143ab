"""`file:PATH`: the embedded state store of one replica, an append-only log of run values.

Design. PATH is one file: an 8-byte header, then frames

    u32 body length | u32 crc32(body) | body = u16 key length | key | value   (big-endian)

where an empty value deletes the key. A flush appends the frames of the runs changed since the
last one and fsyncs, so it costs what changed, not what is held, and memory while writing is one
batch of frames, never the whole state.

A run's value is a full record or a *delta* (encoding.py: DELTA_MAGIC): what changed since the
run's latest full record, its *base*, which the delta names by id. So each key has a base and
at most one live delta, the latest frame of either kind after that base; a new base makes the
key's earlier delta dead. `restore` yields each base with its delta (or None), and the core
applies the delta only when it names that base (core/src/service/persist.rs). A delta with no
base before it in the log is dead too. A frame is only ever appended after every earlier one is
on disk, so a crash (kill -9, OOM, power) can tear at most the last frames: `restore` reads up to
the last frame whose length and checksum hold, truncates the torn tail, and every run flushed
before it is intact. The latest intact frame of a key wins.

An append is whole or not at all. It is written at the log's known end, to its last byte (a
short write, from a filling disk or a file size limit, is carried on until done or an error),
and an error takes the file back to that end before anything else is written: never a half
frame for the next append to follow, never a truncate past the end (which would leave a hole).
The flush fails, the store is degraded until a write succeeds, and the keeper keeps the batch's
runs dirty and writes them again. The restore reads the log (pread, through a window) and never
maps it: a file larger than the blocks backing it (a hole on a full tmpfs) faults with SIGBUS
when a mapped page of it is touched, while read it is zeros, which the checksums refuse.

Corruption costs only the frames it touches. A frame that fails its checksum in the middle of the
log (a flipped byte on disk) does not end the scan: `restore` looks for the next offset where an
intact frame starts, copies the bad bytes between them aside to PATH.corrupt-<unix time> (never
deleted), counts them (`corrupt_bytes`, `corrupt_ranges`), logs each range, and rewrites the log
without them. A run whose latest frame was hit comes back from its previous intact frame, if the
log still holds one (the state of an earlier flush), else not at all. A bad frame with no intact
frame after it is a torn tail, as above.

Only a regular file is a state file: a device (`file:/dev/full`), a FIFO or a socket is refused,
so that the atomic rename of a compaction can never replace one. A disk too full for the start's
write probe does not stop the daemon: the store starts *degraded* (`degraded` says why; the
keeper reports the store down), serves from memory, restores what the file holds, and its first
flush that gets the space back creates or appends to the log as usual.

When the log holds more than twice the bytes of its live frames it is compacted, beside the
flushes: the live frames are copied as they are (raw bytes, checksums and all) into PATH.compact
while flushes keep appending; the frames appended meanwhile are copied after them in rounds,
until less than CATCH_UP_BYTES is left; then, holding off flushes only for that last step, the
rest is copied, fsynced, and the copy renamed over PATH (atomic; the directory is fsynced too).
Either the old or the new log is there after a crash, never neither. The key index (key ->
offset and length of its base and of its delta, ~150 bytes a run) is the only state kept beside.

Nothing here ever deletes PATH: a start that fails, or a file that cannot be read (it is moved
aside to PATH.refused by the caller), leaves the stored state for the next start.
"""
from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import stat
import struct
import time
import zlib
from collections.abc import Iterator, Sequence

from .base import FlushItem, StateStore, StateStoreError, StoredRun
from .encoding import is_delta

log = logging.getLogger("loopwarden.daemon")

# The state files this process holds locked: lock path -> [descriptor, stores using it]. The lock
# keeps other processes out; stores of one process (a restore after a restart, in tests) share it.
_LOCKS: dict[str, list[int]] = {}

HEADER = b"LWSTATE\x01"
_FRAME = struct.Struct(">II")
_KEY = struct.Struct(">H")
COMPACT_MIN_BYTES = 4 * 1024 * 1024
READ_CHUNK = 1024 * 1024
# A restore reads the log through a window this large (frames longer than it are read apart).
WINDOW = 4 * READ_CHUNK
# A compaction copies the frames appended meanwhile without the lock until less than this is left.
CATCH_UP_BYTES = 4 * READ_CHUNK
# A full disk (or quota) at start degrades the store instead of failing the start.
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


class NotAStateFile(StateStoreError):
    """PATH holds something else (perhaps a snapshot from before the state store)."""


class _Reader:
    """The log, read by pread through a window of WINDOW bytes. Not mapped: a page of a file
    that its file system cannot back (a hole on a full tmpfs, left by an older version's failed
    append) faults with SIGBUS when touched through a mapping, killing the daemon at start;
    read, it is zeros, which the checksums refuse like any other damage."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self.start, self.data = 0, b""  # the window: the file's bytes from `start` on

    def view(self, offset: int, length: int) -> memoryview | None:
        """The bytes [offset, offset + length), or None where the file ends before."""
        end = offset + length
        if end > self.size:
            return None
        if offset < self.start or end > self.start + len(self.data):
            self.data = _pread_full(self.fd, min(max(WINDOW, length), self.size - offset), offset)
            self.start = offset
            if len(self.data) < length:  # the file shrank under the scan
                return None
        return memoryview(self.data)[offset - self.start:end - self.start]

    def crc32(self, offset: int, length: int) -> int | None:
        """The checksum of [offset, offset + length); a range longer than the window is read
        piecewise (a damaged length can claim most of the file), leaving the window as it is."""
        if length <= WINDOW:
            data = self.view(offset, length)
            return None if data is None else zlib.crc32(data)
        crc, end = 0, offset + length
        while offset < end:
            chunk = os.pread(self.fd, min(READ_CHUNK, end - offset), offset)
            if not chunk:
                return None
            crc, offset = zlib.crc32(chunk, crc), offset + len(chunk)
        return crc


def _pread_full(fd: int, length: int, offset: int) -> bytes:
    """`length` bytes at `offset`, fewer only where the file ends (pread may return short)."""
    parts, got = [], 0
    while got < length:
        chunk = os.pread(fd, length - got, offset + got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _frame_at(data: _Reader, offset: int) -> int | None:
    """The body length of the intact frame at offset, or None (short, bad length or checksum).
    A frame no longer than the window is left in it (the scan reads its key from there)."""
    buf, at = data.data, offset - data.start
    if at < 0 or at + _FRAME.size + _KEY.size > len(buf):
        if data.view(offset, _FRAME.size + _KEY.size) is None:
            return None
        buf, at = data.data, offset - data.start
    length, crc = _FRAME.unpack_from(buf, at)
    body = offset + _FRAME.size
    if length < _KEY.size or body + length > data.size:
        return None
    if _KEY.size + _KEY.unpack_from(buf, at + _FRAME.size)[0] > length:
        return None
    if length > WINDOW:
        return length if data.crc32(body, length) == crc else None
    if at + _FRAME.size + length > len(buf):
        if data.view(offset, _FRAME.size + length) is None:  # the window moves to the frame
            return None
        buf, at = data.data, 0
    if zlib.crc32(memoryview(buf)[at + _FRAME.size:at + _FRAME.size + length]) != crc:
        return None
    return length


def _next_frame(data: _Reader, start: int) -> int | None:
    """The first offset at or after start where an intact frame begins (a 32-bit checksum over a
    plausible length: a false match is about one in four billion per offset tried)."""
    for offset in range(start, data.size - _FRAME.size - _KEY.size + 1):
        if _frame_at(data, offset) is not None:
            return offset
    return None


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


Span = tuple[int, int]  # (offset, frame length) of a frame in the log


class _Index:
    """Each key's live frames: its base (a full value) and the latest delta after it. A delta
    with no base is dead (nothing to apply it to); a delete or a new base ends the old chain."""

    def __init__(self) -> None:
        self.bases: dict[bytes, Span] = {}
        self.deltas: dict[bytes, Span] = {}
        self.live_bytes = 0
        # While a compaction copies: every placement since its snapshot, for the copy's index.
        self.placed: list[tuple[bytes, Span, bytes | None]] | None = None

    def place(self, key: bytes, span: Span, value_head: bytes | None) -> None:
        """The frame at `span` holds `key`'s value, which starts with `value_head` (None: a
        delete)."""
        if self.placed is not None:
            self.placed.append((key, span, value_head))
        if value_head is not None and is_delta(value_head):
            if key in self.bases:
                self._drop(self.deltas, key)
                self.deltas[key] = span
                self.live_bytes += span[1]
            return
        self._drop(self.bases, key)
        self._drop(self.deltas, key)
        if value_head is not None:
            self.bases[key] = span
            self.live_bytes += span[1]

    def _drop(self, spans: dict[bytes, Span], key: bytes) -> None:
        old = spans.pop(key, None)
        if old is not None:
            self.live_bytes -= old[1]

    def chains(self) -> list[tuple[bytes, Span, Span | None]]:
        """(key, base, delta or None) of every key, in the order of the bases in the log."""
        return sorted(((key, base, self.deltas.get(key)) for key, base in self.bases.items()),
                      key=lambda chain: chain[1][0])

    def __len__(self) -> int:
        return len(self.bases)


def frame(key: bytes, value: bytes | None) -> bytes:
    body = _KEY.pack(len(key)) + key + (value or b"")
    return _FRAME.pack(len(body), zlib.crc32(body)) + body


def _moved_index(bases: dict[bytes, Span], deltas: dict[bytes, Span], moved: dict[int, int]) -> _Index:
    """The index of a compaction's copy of these frames (`moved`: new offset by old)."""
    index = _Index()
    for spans, into in ((bases, index.bases), (deltas, index.deltas)):
        for key, (offset, length) in spans.items():
            into[key] = (moved[offset], length)
            index.live_bytes += length
    return index


def _replay(index: _Index, placed: list[tuple[bytes, Span, bytes | None]], start: int, shift: int) -> int:
    """The placements from `start` on, at their offsets in the copy (appended after the copied
    frames, `shift` bytes from where they are in the log); how many are replayed."""
    end = len(placed)  # appends may add more meanwhile: the next replay takes them
    for key, (offset, length), value_head in placed[start:end]:
        index.place(key, (offset + shift, length), value_head)
    return end


def _spans(bases: dict[bytes, Span], deltas: dict[bytes, Span]) -> list[Span]:
    """Every live frame's span, in log order."""
    return sorted([*bases.values(), *deltas.values()])


def _copy_range(source: int, at: int, target: int, to: int, length: int) -> None:
    """Copy `length` bytes of `source` from offset `at` to `target` at offset `to`: in the kernel
    (copy_file_range: no page of it passes through Python, and the GIL is let go, so a
    compaction's hundreds of MB hold off neither events nor flushes), else by reads and writes
    where the file system cannot."""
    end = at + length
    try:
        while at < end:
            copied = os.copy_file_range(source, target, end - at, at, to)
            if copied == 0:
                raise OSError(errno.EIO, f"the log ended {end - at} bytes early")
            at, to = at + copied, to + copied
        return
    except OSError as exc:  # EPERM: a seccomp profile that refuses the call
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
            raise
    while at < end:
        chunk = os.pread(source, min(READ_CHUNK, end - at), at)
        if not chunk:
            raise OSError(errno.EIO, f"the log ended {end - at} bytes early")
        written = os.pwrite(target, chunk, to)
        at, to = at + written, to + written


def _write_all(fd: int, data: bytes, at: int) -> None:
    """Write all of `data` at offset `at`: a short write (a file system or quota filling up, a
    file size limit) is carried on, so it ends whole or with the error that stopped it."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, at)
        if written <= 0:
            raise OSError(errno.EIO, f"a write of {len(view)} bytes wrote nothing")
        view, at = view[written:], at + written


def _read_value(handle, key: bytes, span: Span) -> bytes:
    handle.seek(span[0])
    return handle.read(span[1])[_FRAME.size + _KEY.size + len(key):]


class FileStateStore(StateStore):
    kind = "file"
    deltas = True

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self._index = _Index()
        self._size = 0  # bytes in the log, header included
        self._lock = asyncio.Lock()
        self.compactions = 0
        self._compaction: asyncio.Future | None = None  # a compaction beside the flushes
        self._compact_started = 0.0
        self.degraded = ""  # why the store could not write at start ("" while it can)
        self._log_created = False
        # What the last restore found damaged and moved aside (the keeper turns it into metrics).
        self.corrupt_bytes = 0
        self.corrupt_ranges = 0
        self.corrupt_path = ""
        self._lock_fd: int | None = None  # PATH.lock, held while this daemon owns the file

    def describe(self) -> str:
        return f"file:{self.path}"

    def check(self) -> None:
        """PATH (or the directory it will be created in) must be writable; nothing is changed."""
        path, directory = self.path, os.path.dirname(self.path)
        try:
            mode = os.stat(path).st_mode if os.path.lexists(path) else None
            if mode is not None and stat.S_ISDIR(mode):
                raise StateStoreError(f"state store {path} is a directory; give a file path")
            if mode is not None and not stat.S_ISREG(mode):
                raise StateStoreError(f"state store {path} is not a regular file ({_file_type(mode)}); "
                                      "give the path of a file (it is created when missing)")
            os.makedirs(directory, exist_ok=True)
            if mode is not None:
                with open(path, "r+b"):
                    pass
            self._probe(f"{path}.probe-{os.getpid()}")
        except StateStoreError:
            raise
        except OSError as exc:
            if exc.errno in NO_SPACE:
                self.degraded = f"{exc.strerror or exc} ({directory})"
                log.error("state store degraded: no space to write; serving from memory, and its "
                          "stored runs are still restored; flushes are retried until space is back",
                          extra={"state_store": path, "error": self.degraded})
                return
            raise StateStoreError(f"state store {path} is not writable: {exc.strerror or exc}") from None

    def claim(self) -> None:
        """One daemon per state file: the file store is one replica's, and two daemons appending to
        one log would each restore, flush and compact it as theirs. An exclusive lock on PATH.lock
        (not on the log, which a compaction replaces by a rename) is held for the daemon's life; the
        kernel lets it go when the process ends, however it ends. A full disk that cannot even
        create the lock file leaves the store unlocked (it is degraded anyway, and says so)."""
        if self._lock_fd is not None:
            return
        lock_path = f"{self.path}.lock"
        if lock_path in _LOCKS:
            _LOCKS[lock_path][1] += 1
            self._lock_fd = _LOCKS[lock_path][0]
            return
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            if exc.errno in NO_SPACE:
                return
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise StateStoreError(
                f"state store {self.path} is in use by another loopwarden daemon (pid {holder}); give this "
                "one a file of its own: --state-store file:PATH (make serve SERVE_STATE=file:PATH), or stop "
                "the other") from None
        with contextlib.suppress(OSError):  # the pid only names the holder in the message above
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _LOCKS[lock_path] = [fd, 1]
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is None:
            return
        self._lock_fd = None
        held = _LOCKS.get(f"{self.path}.lock")
        if held is not None:
            held[1] -= 1
            if held[1] == 0:
                del _LOCKS[f"{self.path}.lock"]
                os.close(held[0])  # closing the only descriptor lets the lock go

    @staticmethod
    def _probe(probe: str) -> None:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"x")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)

    def restore(self) -> Iterator[StoredRun]:
        """Each run's base and its delta (or None), oldest base first. A missing or empty file
        starts a new log (once there is space for one: a degraded store creates it on its first
        good flush)."""
        path = self.path
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            if not self.degraded:
                self._new_log()
            return
        with open(path, "rb") as handle:
            if handle.read(len(HEADER)) != HEADER:
                raise NotAStateFile(f"{path} is not a loopwarden state file")
        self._log_created = True
        good_end, damaged = self._scan()
        actual = os.path.getsize(path)
        if damaged:
            self._move_aside(damaged)
        if good_end < actual:
            log.warning("state file had a torn tail (a crash mid-write); the runs before it are kept",
                        extra={"state_store": path, "kept_bytes": good_end, "dropped_bytes": actual - good_end})
            if not self.degraded:
                with open(path, "r+b") as handle:
                    handle.truncate(good_end)
                    os.fsync(handle.fileno())
        self._size = good_end
        if damaged and not self.degraded:
            self._compact()  # the damaged ranges leave the log; their copy is PATH.corrupt-*
        with open(path, "rb") as handle:
            for key, base, delta in self._index.chains():
                yield _read_value(handle, key, base), None if delta is None else _read_value(handle, key, delta)

    def _scan(self) -> tuple[int, list[tuple[int, int]]]:
        """Index the log. Returns the offset after its last intact frame and the damaged ranges
        (offset, length) skipped before it: bytes between two intact frames that are no frame."""
        index = _Index()
        damaged: list[tuple[int, int]] = []
        with open(self.path, "rb") as handle:
            data = _Reader(handle.fileno(), os.fstat(handle.fileno()).st_size)
            offset = len(HEADER)
            while offset < data.size:
                length = _frame_at(data, offset)
                if length is None:
                    following = _next_frame(data, offset + 1)
                    if following is None:
                        break  # a torn tail: nothing intact after it
                    damaged.append((offset, following - offset))
                    offset = following
                    continue
                if length > WINDOW:  # read apart: its head comes into the window
                    data.view(offset, _FRAME.size + _KEY.size + 0xFFFF + 4)
                buf, start = data.data, offset - data.start + _FRAME.size
                key_length = _KEY.unpack_from(buf, start)[0]
                start += _KEY.size
                key = buf[start:start + key_length]
                value_head = buf[start + key_length:start + key_length + 4] if length > _KEY.size + key_length else None
                index.place(key, (offset, _FRAME.size + length), value_head)
                offset += _FRAME.size + length
        self._index = index
        return offset, damaged

    def _move_aside(self, damaged: list[tuple[int, int]]) -> None:
        """Copy the damaged ranges to PATH.corrupt-<time> (raw, in order) and log each one."""
        target = f"{self.path}.corrupt-{int(time.time())}"
        total = sum(length for _offset, length in damaged)
        self.corrupt_bytes, self.corrupt_ranges = total, len(damaged)
        for offset, length in damaged:
            log.error("state file damaged: bytes that are no intact frame were skipped; the runs "
                      "they held come back from an earlier frame, if any",
                      extra={"state_store": self.path, "offset": offset, "bytes": length, "moved_to": target})
        try:
            with open(self.path, "rb") as source, open(target, "ab") as copy:
                for offset, length in damaged:
                    source.seek(offset)
                    copy.write(source.read(length))
                copy.flush()
                os.fsync(copy.fileno())
            self.corrupt_path = target
        except OSError as exc:  # no space for the copy: the log is not rewritten, so nothing is lost
            self.degraded = self.degraded or f"cannot keep a copy of damaged bytes: {exc.strerror or exc}"
            log.error("state file damaged and no copy could be kept; the log is left as it is",
                      extra={"state_store": self.path, "error": str(exc)})

    def _new_log(self) -> None:
        self._write_atomically(iter(()))

    def start_empty(self) -> None:
        """A new empty log (after the old file was moved aside); on a full disk the store is
        degraded instead and its first good flush creates the log."""
        try:
            self._new_log()
        except OSError as exc:
            if exc.errno not in NO_SPACE:
                raise
            self.degraded, self._log_created = f"{exc.strerror or exc} ({os.path.dirname(self.path)})", False
            self._index, self._size = _Index(), 0

    def rewrite(self, items: Iterator[tuple[bytes, bytes]]) -> None:
        """Replace the whole log with these (key, value) pairs, atomically (used to convert)."""
        self._write_atomically(items)

    def _write_atomically(self, frames: Iterator[tuple[bytes, bytes]]) -> None:
        tmp = f"{self.path}.compact"
        index = _Index()
        offset = len(HEADER)
        try:
            with open(tmp, "wb") as handle:
                handle.write(HEADER)
                for key, value in frames:
                    data = frame(key, value)
                    handle.write(data)
                    index.place(key, (offset, len(data)), value[:4])
                    offset += len(data)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # a full disk must not leave half a log behind to fill it further
            raise
        os.replace(tmp, self.path)
        self._index, self._size, self._log_created = index, offset, True  # with the rename, before anything can fail
        self._fsync_directory()

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
                if not self._log_created:  # degraded at start with no log: create it now
                    await asyncio.to_thread(self._new_log)
                await asyncio.to_thread(self._append, items)
            except OSError as exc:
                # Nothing of the batch is in the log (see _append): the caller keeps its runs
                # dirty, and the store is degraded until a write succeeds.
                self.degraded = f"{exc.strerror or exc} (a flush)"
                raise StateStoreError(f"cannot write state store {self.path}: {exc.strerror or exc}") from None
            if self.degraded:
                log.info("state store writable again", extra={"state_store": self.path, "was": self.degraded})
                self.degraded = ""
            if ((self._compaction is None or self._compaction.done())
                    and self._size > max(COMPACT_MIN_BYTES, 2 * self._index.live_bytes)):
                self._compaction = asyncio.ensure_future(self._compact_beside())

    async def settle(self) -> None:
        """Wait for a compaction in progress (a stop, or a test that reads the log after it)."""
        if self._compaction is not None:
            await self._compaction

    async def close(self) -> None:
        await self.settle()
        self._release_lock()

    async def _compact_beside(self) -> None:
        """Compaction beside the flushes: the live frames up to now are copied without the lock
        (flushes keep appending meanwhile; what they write lies past the copied range), and so
        are, in rounds, the frames appended meanwhile and the copy's index (the placements since
        the snapshot replayed on it), until little is left; then, with the lock, the rest is
        copied and replayed and the copy replaces the log. A flush waits for that last step
        only. A failure leaves the log and its index as they were."""
        index = self._index
        try:
            async with self._lock:  # a snapshot of the live frames (sorted off the loop, below)
                upto, bases, deltas = self._size, dict(index.bases), dict(index.deltas)
                index.placed = []
            self._compact_started = time.monotonic()
            copied, moved = await asyncio.to_thread(lambda: self._copy_live(_spans(bases, deltas)))
            after = await asyncio.to_thread(_moved_index, bases, deltas, moved)
            # Every byte below `_size` is a complete frame (an append moves it only when done).
            # The copy's bulk reaches the disk here too, so the fsync that flushes wait for is
            # small; what was appended while it ran is caught up again, until little is left.
            caught_up, replayed = upto, 0
            while True:
                while self._size - caught_up > CATCH_UP_BYTES:
                    caught_up = await asyncio.to_thread(self._copy_tail, caught_up, self._size)
                await asyncio.to_thread(self._sync_copy)
                replayed = await asyncio.to_thread(_replay, after, index.placed, replayed, copied - upto)
                if self._size - caught_up <= CATCH_UP_BYTES:
                    break
            async with self._lock:
                replaced = await asyncio.to_thread(self._finish_compaction, upto, copied, after, caught_up, replayed)
            await asyncio.to_thread(os.close, replaced)  # frees the old log's blocks, off the lock
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(f"{self.path}.compact")
            log.error("state file compaction failed; the log is kept as it is and compacted later",
                      extra={"state_store": self.path, "error": str(exc)})
        finally:
            index.placed = None

    def _append(self, items: Sequence[FlushItem]) -> None:
        """Append the items' frames whole or not at all. Written at the log's known end (not
        O_APPEND) and to the last byte: a short write is carried on until done or an error, and
        an error takes the file back to that end, never past it (a truncate that extends the
        file leaves a hole, which the next restore reads as damage and a full tmpfs cannot even
        map). Only then are the frames indexed and the end moved."""
        frames = [(key, frame(key, value), value) for key, value, _ttl in items]
        start = self._size
        fd = os.open(self.path, os.O_WRONLY)
        try:
            on_disk = os.fstat(fd).st_size
            if on_disk < start:  # shortened under the daemon: appending would leave a hole
                raise OSError(errno.EIO, f"the log is {start - on_disk} bytes shorter than written; "
                                         "nothing more is appended to it")
            try:
                # Past the end: an append whose take-back failed too, or a torn tail that a
                # degraded start left (it could not write then); cut off before writing.
                if on_disk > start:
                    os.ftruncate(fd, start)
                _write_all(fd, b"".join(data for _key, data, _live in frames), start)
                os.fsync(fd)
            except OSError:
                with contextlib.suppress(OSError):  # if this fails too, the next append retries it
                    os.ftruncate(fd, start)
                raise
        finally:
            os.close(fd)
        offset = start
        place = self._index.place
        for key, data, value in frames:
            place(key, (offset, len(data)), None if value is None else value[:4])
            offset += len(data)
        self._size = offset

    def _compact(self) -> None:
        """Compact now (the restore's, after damage: nothing is appending)."""
        self._compact_started = time.monotonic()
        bases, deltas = self._index.bases, self._index.deltas
        copied, moved = self._copy_live(_spans(bases, deltas))
        os.close(self._finish_compaction(self._size, copied, _moved_index(bases, deltas, moved), self._size, 0))

    def _copy_live(self, spans: list[Span]) -> tuple[int, dict[int, int]]:
        """Copy these frames as they are (bytes, not re-framed: a byte that went bad on disk since
        it was written keeps failing its checksum instead of being sealed in), adjacent ones in
        one copy, into PATH.compact after a header. The copy's size and each frame's new offset
        by its old one."""
        moved: dict[int, int] = {}
        tmp = f"{self.path}.compact"
        try:
            with open(self.path, "rb") as source, open(tmp, "wb") as target:
                target.write(HEADER)
                target.flush()
                offset = len(HEADER)
                run_start = run_end = -1  # the source range of adjacent frames not yet copied
                for start, length in spans:
                    if start != run_end:
                        if run_end > run_start:
                            _copy_range(source.fileno(), run_start, target.fileno(), moved[run_start],
                                        run_end - run_start)
                        run_start = start
                    run_end = start + length
                    moved[start] = offset
                    offset += length
                if run_end > run_start:
                    _copy_range(source.fileno(), run_start, target.fileno(), moved[run_start], run_end - run_start)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # a full disk must not leave half a log behind to fill it further
            raise
        return offset, moved

    def _sync_copy(self) -> None:
        with open(f"{self.path}.compact", "ab") as target:
            os.fsync(target.fileno())

    def _copy_tail(self, start: int, end: int) -> int:
        """Append the log's bytes [start, end) to the copy, as they are; returns `end`."""
        with open(self.path, "rb") as source, open(f"{self.path}.compact", "r+b") as target:
            _copy_range(source.fileno(), start, target.fileno(), os.fstat(target.fileno()).st_size, end - start)
        return end

    def _finish_compaction(self, upto: int, copied: int, after: _Index, caught_up: int, replayed: int) -> int:
        """With the lock: append the log's frames past `caught_up` to the copy (those from `upto`
        on were written since the copy began), replay the placements past `replayed` on the
        copy's index, fsync the copy and rename it over PATH, the index swapped with it. Returns
        a descriptor of the old log for the caller to close once flushes may go on: a rename
        over the last name of a file frees its blocks right away, ~0.1 s for a few hundred MB
        (measured at 100,000 runs), and an open descriptor moves that to its close."""
        tmp, before, started = f"{self.path}.compact", self._size, time.monotonic()
        try:
            self._copy_tail(caught_up, self._size)
            self._sync_copy()
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _replay(after, self._index.placed or [], replayed, copied - upto)
        old = os.open(self.path, os.O_RDONLY)
        try:
            os.replace(tmp, self.path)
            self._index, self._size, self._log_created = after, copied + (before - upto), True
            self._fsync_directory()
        except OSError:
            os.close(old)
            raise
        self.compactions += 1
        log.info("state file compacted", extra={"state_store": self.path, "bytes_before": before,
                                                "bytes_after": self._size, "runs": len(self._index),
                                                "seconds": round(time.monotonic() - self._compact_started, 3),
                                                "flushes_waited_seconds": round(time.monotonic() - started, 3)})
        return old
