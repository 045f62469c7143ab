"""The file store's log: appends, deletes, torn tails, compaction, and the writability check."""
from __future__ import annotations

import asyncio
import contextlib
import os

import pytest

from loopwarden_server.statestore import file as file_module
from loopwarden_server.statestore.base import StateStoreError
from loopwarden_server.statestore.encoding import DELTA_MAGIC
from loopwarden_server.statestore.file import HEADER, FileStateStore, NotAStateFile


def _flush(store: FileStateStore, items) -> None:
    """One flush, and the compaction it may start (beside the flushes) to its end."""
    async def flush() -> None:
        await store.flush([(key, value, 60.0) for key, value in items])
        await store.settle()
    asyncio.run(flush())


def _opened(path) -> FileStateStore:
    """A store on `path`, checked and restored, ready to flush."""
    store = FileStateStore(str(path))
    store.check()
    list(store.restore())
    return store


def _chains(path) -> list[tuple[bytes, bytes | None]]:
    store = FileStateStore(str(path))
    store.check()
    return list(store.restore())


def _descriptors_of(path) -> list[str]:
    """What this process's open descriptors on `path` name (a replaced log: "PATH (deleted)")."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(path)):
                names.append(target)
    return names


def _reopen(path) -> list[bytes]:
    """The restored values (these logs hold no deltas)."""
    chains = _chains(path)
    assert all(delta is None for _value, delta in chains)
    return [value for value, _delta in chains]


class TestLog:
    def test_the_latest_value_of_a_key_wins_and_an_empty_one_deletes(self, tmp_path):
        """Three flushes: a, b; a again; b deleted -> only the newest a."""
        path = tmp_path / "s"
        store = FileStateStore(str(path))
        store.check()
        assert [] == list(store.restore())
        _flush(store, [(b"{a}", b"a1"), (b"{b}", b"b1")])
        _flush(store, [(b"{a}", b"a2")])
        _flush(store, [(b"{b}", None)])
        assert [b"a2"] == _reopen(path)

    @pytest.mark.parametrize("cut", [1, 5, 9, 13])
    def test_a_torn_tail_loses_only_the_torn_frame(self, tmp_path, cut):
        """Cutting the file inside its last frame keeps every earlier frame."""
        path = tmp_path / "s"
        store = _opened(path)
        _flush(store, [(b"{a}", b"first")])
        _flush(store, [(b"{b}", b"second-value")])
        data = path.read_bytes()
        path.write_bytes(data[:-cut])
        assert [b"first"] == _reopen(path)
        assert len(path.read_bytes()) < len(data), "the torn tail is truncated"

    def test_a_foreign_file_is_refused_not_overwritten(self, tmp_path):
        """A file without the header raises NotAStateFile and is left as it was."""
        path = tmp_path / "s"
        path.write_bytes(b"something else")
        store = FileStateStore(str(path))
        with pytest.raises(NotAStateFile):
            list(store.restore())
        assert b"something else" == path.read_bytes()

    def test_compaction_keeps_the_live_values_only(self, tmp_path, monkeypatch):
        """Past twice the live bytes, the log is rewritten with the newest frames only."""
        monkeypatch.setattr(file_module, "COMPACT_MIN_BYTES", 1)
        path = tmp_path / "s"
        store = _opened(path)
        for round_ in range(5):
            _flush(store, [(f"{{k{i}}}".encode(), f"v{round_}-{i}".encode() * 10) for i in range(20)])
        assert store.compactions >= 1
        assert sorted(f"v4-{i}".encode() * 10 for i in range(20)) == sorted(_reopen(path))
        assert path.read_bytes().startswith(HEADER)


def _delta(text: bytes) -> bytes:
    return DELTA_MAGIC + text


class TestDeltas:
    """A run's base (a full value) and the latest delta after it are both live; a new base, a
    delete or compaction never pairs a delta with a base it did not follow."""

    def test_the_latest_delta_comes_back_with_its_base(self, tmp_path):
        path = tmp_path / "s"
        store = _opened(path)
        _flush(store, [(b"{a}", b"a-base"), (b"{b}", b"b-base")])
        _flush(store, [(b"{a}", _delta(b"a-d1"))])
        _flush(store, [(b"{a}", _delta(b"a-d2")), (b"{b}", _delta(b"b-d1"))])
        assert _chains(path) == [(b"a-base", _delta(b"a-d2")), (b"b-base", _delta(b"b-d1"))]

    def test_a_new_base_ends_the_old_delta_and_a_delete_ends_both(self, tmp_path):
        path = tmp_path / "s"
        store = _opened(path)
        _flush(store, [(b"{a}", b"a-base"), (b"{b}", b"b-base")])
        _flush(store, [(b"{a}", _delta(b"a-d1")), (b"{b}", _delta(b"b-d1"))])
        _flush(store, [(b"{a}", b"a-base2"), (b"{b}", None)])
        assert _chains(path) == [(b"a-base2", None)]
        _flush(store, [(b"{b}", _delta(b"b-d2"))])  # a delta with no base before it: dead
        assert _chains(path) == [(b"a-base2", None)]

    def test_compaction_keeps_each_base_and_its_delta(self, tmp_path, monkeypatch):
        monkeypatch.setattr(file_module, "COMPACT_MIN_BYTES", 1)
        path = tmp_path / "s"
        store = _opened(path)
        _flush(store, [(f"{{k{i}}}".encode(), f"base-{i}".encode() * 10) for i in range(10)])
        for round_ in range(6):
            _flush(store, [(f"{{k{i}}}".encode(), _delta(f"d{round_}-{i}".encode() * 10)) for i in range(10)])
        assert store.compactions >= 1
        expected = [(f"base-{i}".encode() * 10, _delta(f"d5-{i}".encode() * 10)) for i in range(10)]
        assert _chains(path) == expected
        before = path.stat().st_size
        assert before < 2 * sum(len(b) + len(d) + 30 for b, d in expected), "dead deltas left the log"

    def test_a_damaged_delta_gives_way_to_the_one_before(self, tmp_path):
        """The flipped byte costs the latest delta: the run comes back with the delta before it."""
        path = tmp_path / "s"
        store = _opened(path)
        _flush(store, [(b"{a}", b"a-base" * 10), (b"{b}", b"b-base" * 10)])
        _flush(store, [(b"{a}", _delta(b"a-d1" * 10))])
        _flush(store, [(b"{a}", _delta(b"a-d2" * 10)), (b"{b}", _delta(b"b-d1" * 10))])
        _flip(path, store._index.deltas[b"{a}"][0] + 20)
        assert _chains(path) == [(b"a-base" * 10, _delta(b"a-d1" * 10)), (b"b-base" * 10, _delta(b"b-d1" * 10))]


    @pytest.mark.parametrize("in_kernel", [True, False], ids=["copy_file_range", "read_write"])
    @pytest.mark.parametrize("catch_up_bytes", [file_module.CATCH_UP_BYTES, 0])
    def test_flushes_go_on_while_a_compaction_copies(self, tmp_path, monkeypatch, catch_up_bytes, in_kernel):
        """A compaction copies beside the flushes: a flush that lands while the copy runs (new
        bases, new deltas, a delete) is in the compacted log, and restore gives the latest;
        whether those frames are copied with the lock held or caught up before it (0), and
        whether the file system copies in the kernel or the store reads and writes."""
        import errno
        import threading

        monkeypatch.setattr(file_module, "COMPACT_MIN_BYTES", 1)
        monkeypatch.setattr(file_module, "CATCH_UP_BYTES", catch_up_bytes)
        refused = []
        if not in_kernel:
            def no_copy_file_range(*_args):
                refused.append(1)
                raise OSError(errno.EXDEV, "Invalid cross-device link")
            monkeypatch.setattr(os, "copy_file_range", no_copy_file_range)
            monkeypatch.setattr(file_module, "READ_CHUNK", 7)  # many reads a range
        path = tmp_path / "s"
        store = _opened(path)
        copying, resume = threading.Event(), threading.Event()
        copy_live = store._copy_live

        def slow_copy(spans):
            copied = copy_live(spans)
            copying.set()
            assert resume.wait(10)
            return copied
        store._copy_live = slow_copy

        async def scenario() -> int:
            await store.flush([(f"{{k{i}}}".encode(), f"base-{i}".encode() * 10, 60.0) for i in range(10)])
            for round_ in range(4):  # dead deltas: the log passes twice its live bytes
                await store.flush([(f"{{k{i}}}".encode(), _delta(f"d{round_}-{i}".encode() * 10), 60.0)
                                   for i in range(10)])
            assert store._compaction is not None and not store._compaction.done()
            await asyncio.to_thread(copying.wait, 10)
            # While the copy runs: flushes are not held up.
            await asyncio.wait_for(store.flush([(b"{k0}", b"new-base-0", 60.0), (b"{k1}", _delta(b"late-1"), 60.0),
                                                (b"{k2}", None, 60.0), (b"{k10}", b"base-10", 60.0)]), 5)
            resume.set()
            await store.settle()
            return store.compactions

        assert asyncio.run(scenario()) == 1
        # The index the compaction built as it went is the one a fresh scan of the file builds.
        scanned = FileStateStore(str(path))
        scanned.check()
        list(scanned.restore())
        assert (store._index.bases, store._index.deltas, store._index.live_bytes) == \
            (scanned._index.bases, scanned._index.deltas, scanned._index.live_bytes)
        assert store._size == path.stat().st_size
        # The old log, held open across the rename so that freeing its blocks does not hold
        # flushes off, is closed once it is done.
        assert _descriptors_of(path) == []
        assert bool(refused) is not in_kernel
        chains = dict(_chains(path))
        assert chains.pop(b"new-base-0") is None
        assert chains.pop(b"base-1" * 10) == _delta(b"late-1")
        assert chains.pop(b"base-10") is None
        assert chains == {f"base-{i}".encode() * 10: _delta(f"d3-{i}".encode() * 10) for i in range(3, 10)}

    def test_a_compaction_that_fails_leaves_the_log_as_it_was(self, tmp_path, monkeypatch, caplog):
        """No space for the copy's last step: the copy goes, the log and its index stay as they
        were (later flushes land and restore gives them), and the next compaction succeeds."""
        import errno

        monkeypatch.setattr(file_module, "COMPACT_MIN_BYTES", 1)
        path = tmp_path / "s"
        store = _opened(path)
        copy_tail, failing = store._copy_tail, [True]

        def no_space(start, end):
            if failing[0]:
                raise OSError(errno.ENOSPC, "No space left on device")
            return copy_tail(start, end)
        store._copy_tail = no_space
        _flush(store, [(f"{{k{i}}}".encode(), f"base-{i}".encode() * 10) for i in range(5)])
        for round_ in range(4):
            _flush(store, [(f"{{k{i}}}".encode(), _delta(f"d{round_}-{i}".encode() * 10)) for i in range(5)])
        assert store.compactions == 0 and "state file compaction failed" in caplog.text
        assert not (tmp_path / "s.compact").exists()
        expected = {f"base-{i}".encode() * 10: _delta(f"d3-{i}".encode() * 10) for i in range(5)}
        assert dict(_chains(path)) == expected
        failing[0] = False
        _flush(store, [(b"{k0}", _delta(b"after"))])
        assert store.compactions == 1
        assert dict(_chains(path)) == {**expected, b"base-0" * 10: _delta(b"after")}

    def test_compaction_copies_frames_as_they_are(self, tmp_path, monkeypatch):
        """A byte that went bad in a live frame after it was written is not sealed in by a
        compaction (a re-framed copy would carry a fresh checksum over the bad byte): the next
        restore still catches it and keeps every other run."""
        monkeypatch.setattr(file_module, "COMPACT_MIN_BYTES", 1)
        path = tmp_path / "s"
        store = _opened(path)
        _flush(store, [(f"{{k{i}}}".encode(), f"base-{i}-".encode() * 10) for i in range(10)])
        _flip(path, store._index.bases[b"{k3}"][0] + 30)
        for round_ in range(12):  # dead deltas, until a compaction rewrites the log
            _flush(store, [(b"{k9}", _delta(f"d{round_}".encode() * 40))])
        assert store.compactions >= 1
        reopened = FileStateStore(str(path))
        reopened.check()
        values = [value for value, _delta in reopened.restore()]
        assert reopened.corrupt_ranges == 1
        assert sorted(values) == sorted(f"base-{i}-".encode() * 10 for i in range(10) if i != 3)


class TestCheck:
    def test_a_path_under_a_file_is_not_writable(self, tmp_path):
        """check() names the path and says why."""
        (tmp_path / "f").write_text("x")
        with pytest.raises(StateStoreError, match="not writable"):
            FileStateStore(str(tmp_path / "f" / "s")).check()

    def test_check_changes_nothing(self, tmp_path):
        """An existing state file is not touched by the check; a missing one is not created by it."""
        FileStateStore(str(tmp_path / "missing")).check()
        assert not (tmp_path / "missing").exists()
        (tmp_path / "s").write_bytes(HEADER + b"tail")
        FileStateStore(str(tmp_path / "s")).check()
        assert HEADER + b"tail" == (tmp_path / "s").read_bytes()


def _store_with(path, runs: int, flushes: int = 1) -> list[tuple[int, int]]:
    """A log of `runs` keys written `flushes` times (value k:v<flush>); the (offset, length) of
    each frame of the last flush, in key order."""
    store = _opened(path)
    for round_ in range(flushes):
        _flush(store, [(f"{{run-{k:04d}}}".encode(), f"value-{k:04d}-v{round_}-".encode() * 20) for k in range(runs)])
    return [store._index.bases[f"{{run-{k:04d}}}".encode()] for k in range(runs)]


def _flip(path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


class TestDamage:
    """One flipped byte costs the frame it hits, not the log after it (a byte flipped at 10%
    of the file once truncated the log there: 90% of the runs were gone)."""

    @pytest.mark.parametrize("where", ["body", "length", "checksum"])
    def test_a_flipped_byte_costs_only_the_frame_it_hits(self, tmp_path, where):
        path = tmp_path / "s"
        frames = _store_with(path, 100)
        offset, length = frames[10]  # the frame at about 10% of the file
        _flip(path, offset + {"body": 40, "length": 1, "checksum": 5}[where])
        damaged = path.read_bytes()
        damaged_size = len(damaged)
        store = FileStateStore(str(path))
        store.check()
        values = [value for value, _delta in store.restore()]
        assert len(values) == 99
        assert not any(value.startswith(b"value-0010-") for value in values)
        assert (store.corrupt_ranges, store.corrupt_bytes) == (1, length)
        corrupt = list(tmp_path.glob("s.corrupt-*"))
        assert [store.corrupt_path] == [str(p) for p in corrupt]
        assert corrupt[0].read_bytes() == damaged[offset:offset + length], "the bad bytes, as they were"
        assert len(path.read_bytes()) == damaged_size - length, "the damaged range left the log"
        assert sorted(_reopen(path)) == sorted(values)
        again = FileStateStore(str(path))
        assert again.corrupt_bytes == 0, "the rewritten log is clean"

    def test_the_run_comes_back_from_its_previous_frame(self, tmp_path):
        """Two flushes of every run: the damaged latest frame gives way to the one before."""
        path = tmp_path / "s"
        frames = _store_with(path, 20, flushes=2)
        _flip(path, frames[3][0] + 30)
        values = _reopen(path)
        assert len(values) == 20
        assert [v for v in values if v.startswith(b"value-0003-")][0].startswith(b"value-0003-v0-")
        assert all(v.split(b"-")[2] == b"v1" for v in values if not v.startswith(b"value-0003-"))

    def test_a_damaged_last_frame_is_a_torn_tail(self, tmp_path):
        """Nothing intact after it: cut off as a crash's torn tail, no copy kept."""
        path = tmp_path / "s"
        frames = _store_with(path, 5)
        _flip(path, frames[4][0] + 20)
        assert len(_reopen(path)) == 4
        assert not list(tmp_path.glob("s.corrupt-*"))


class TestPathKind:
    @pytest.mark.parametrize("make", ["fifo", "socket"])
    def test_a_path_that_is_no_regular_file_is_refused(self, tmp_path, make):
        import os
        import socket

        path = tmp_path / "state"
        if make == "fifo":
            os.mkfifo(path)
        else:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.bind(str(path))
        with pytest.raises(StateStoreError, match=f"is not a regular file \\(a {'FIFO' if make == 'fifo' else 'socket'}\\)"):
            FileStateStore(str(path)).check()

    def test_dev_full_is_refused_and_left_a_device(self):
        """As root, a compaction's rename over `file:/dev/full` replaced the device with a file."""
        import os
        import stat

        with pytest.raises(StateStoreError, match="/dev/full is not a regular file \\(a character device\\)"):
            FileStateStore("/dev/full").check()
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
