"""The file store when the disk fills: an append is whole or not at all, a failed run stays
dirty and is written once space is back, a restart on a full disk serves degraded, and a stop
that could not save every run exits non-zero and says how many.

Without root the disk is filled by a file size limit (RLIMIT_FSIZE) on the daemon: the write
that crosses it comes back short and the next one fails with EFBIG, the same short-write path
a filling disk takes. As root, a small tmpfs fills for real (ENOSPC), and a restart on a full
one meets a file larger than the blocks backing it (a hole)."""
from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb

from loopwarden_server.statestore import file as file_module
from loopwarden_server.statestore.base import StateStoreError
from loopwarden_server.statestore.file import FileStateStore
from tests.support.daemon import DaemonHandle, running_daemon
from tests.support.grpc_helpers import Stream, call, channel, health_status
from tests.support.metrics import value
from tests.support.state import stored_runs, wait_for

ENABLED = "{tools: {loopDetection: {enabled: true}}}"
RUNS = 300
EARLY = 50  # runs written before the disk fills
CALLS = 3


# ---------------------------------------------------------------- the store itself
def _flush(store: FileStateStore, items) -> None:
    import asyncio
    asyncio.run(store.flush(items))


def _items(first: int, count: int) -> list[tuple[bytes, bytes, float]]:
    return [(f"k{n}".encode(), f"value of key {n} ".encode() * 20, 60.0) for n in range(first, first + count)]


def _restored(path) -> dict[bytes, bytes]:
    store = FileStateStore(str(path))
    store.check()
    values = [base for base, _delta in store.restore()]
    assert store.corrupt_bytes == 0, "nothing damaged"
    return {b"k" + value.split(b" ")[3]: value for value in values}


class TestWholeOrNothing:
    def test_short_writes_are_carried_on_to_the_last_byte(self, tmp_path, monkeypatch):
        """A file system that takes 7 bytes a write: every frame arrives whole."""
        path = tmp_path / "runs.state"
        store = FileStateStore(str(path))
        store.check()
        list(store.restore())
        real = os.pwrite
        monkeypatch.setattr(file_module.os, "pwrite", lambda fd, data, at: real(fd, bytes(data[:7]), at))
        _flush(store, _items(0, 20))
        monkeypatch.undo()
        assert len(_restored(path)) == 20

    def test_a_write_cut_short_by_a_full_disk_leaves_the_log_as_it_was(self, tmp_path, monkeypatch):
        """Half a batch written, then ENOSPC: the flush fails, the file is byte for byte what it
        was (no half frame, no hole), the store says degraded; the batch written again later is
        there after a restore, with the runs before it."""
        path = tmp_path / "runs.state"
        store = FileStateStore(str(path))
        store.check()
        list(store.restore())
        _flush(store, _items(0, 10))
        before = path.read_bytes()
        real, calls = os.pwrite, []

        def full_disk(fd, data, at):
            calls.append(len(data))
            if len(calls) > 1:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(fd, bytes(data[:len(data) // 2]), at)

        monkeypatch.setattr(file_module.os, "pwrite", full_disk)
        with pytest.raises(StateStoreError, match="No space left on device"):
            _flush(store, _items(10, 10))
        monkeypatch.undo()
        assert len(calls) == 2, "the short write was carried on"
        assert path.read_bytes() == before
        assert "No space left on device" in store.degraded
        _flush(store, _items(10, 10))
        assert store.degraded == ""
        assert sorted(_restored(path)) == sorted(f"k{n}".encode() for n in range(20))

    def test_an_append_after_a_take_back_that_failed_starts_at_the_last_whole_frame(self, tmp_path, monkeypatch):
        """The write fails and so does the truncate that takes it back: the half frame stays on
        disk until the next append, which cuts it off before it writes."""
        path = tmp_path / "runs.state"
        store = FileStateStore(str(path))
        store.check()
        list(store.restore())
        _flush(store, _items(0, 5))
        whole = path.stat().st_size
        real = os.pwrite

        def half_then_eio(fd, data, at):
            if at > whole:
                raise OSError(errno.EIO, "Input/output error")
            return real(fd, bytes(data[:len(data) // 2]), at)

        def no_truncate(fd, length):
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(file_module.os, "pwrite", half_then_eio)
        monkeypatch.setattr(file_module.os, "ftruncate", no_truncate)
        with pytest.raises(StateStoreError):
            _flush(store, _items(5, 5))
        monkeypatch.undo()
        assert path.stat().st_size > whole, "the half batch is still there"
        _flush(store, _items(5, 5))
        assert sorted(_restored(path)) == sorted(f"k{n}".encode() for n in range(10))

    def test_a_log_shorter_than_written_is_not_appended_to(self, tmp_path):
        """Someone cut the file under the daemon: appending would leave a hole; the flush fails."""
        path = tmp_path / "runs.state"
        store = FileStateStore(str(path))
        store.check()
        list(store.restore())
        _flush(store, _items(0, 5))
        os.truncate(path, path.stat().st_size - 3)
        size = path.stat().st_size
        with pytest.raises(StateStoreError, match="shorter than written"):
            _flush(store, _items(5, 1))
        assert path.stat().st_size == size

    def test_a_hole_after_the_last_frame_is_a_torn_tail(self, tmp_path):
        """A file larger than its frames (an older version's failed append extended it with a
        hole): the restore reads it, keeps every frame and cuts the hole off."""
        path = tmp_path / "runs.state"
        store = FileStateStore(str(path))
        store.check()
        list(store.restore())
        _flush(store, _items(0, 5))
        whole = path.stat().st_size
        os.truncate(path, whole + 65536)
        assert len(_restored(path)) == 5
        assert path.stat().st_size == whole


# ---------------------------------------------------------------- a real daemon
FSIZE_WRAPPER = (
    "import os, resource, signal, sys\n"
    # Past the limit a write fails with EFBIG instead of the process being killed by SIGXFSZ.
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def _fsize_limited(limit: int) -> list[str]:
    """A wrapper that execs the daemon with at most `limit` bytes per file it writes."""
    return [sys.executable, "-c", FSIZE_WRAPPER, str(limit)]


def _lift_fsize(daemon: DaemonHandle) -> None:
    resource.prlimit(daemon.process.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def _env() -> dict[str, str]:
    return {"PYTHONDONTWRITEBYTECODE": "1"}  # the limit applies to every file the process writes


def _send_runs(daemon: DaemonHandle, prefix: str, runs: int = RUNS) -> set[str]:
    """`runs` runs of CALLS distinct calls each; the ids of those whose every event was answered
    (acknowledged)."""
    acknowledged = set()
    with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
        for run in range(runs):
            run_id = f"{prefix}-{run}"
            events = [call(run_id, "read", f'{{"path":"/{prefix}/{run}/{n}","pad":"{"x" * 40}"}}')
                      for n in range(CALLS)]
            if len(stream.send(*events)) == CALLS:
                acknowledged.add(run_id)
    return acknowledged


def _store_down(daemon: DaemonHandle) -> str:
    text = ""

    def down() -> bool:
        nonlocal text
        text = daemon.scrape()
        return (value(text, "loopwarden_state_store_up") == 0
                and value(text, "loopwarden_state_store_errors_total", operation="flush") >= 1)

    wait_for(down, timeout=30)
    return text


def _all_flushed(daemon: DaemonHandle, at_least: int) -> str:
    text = ""

    def flushed() -> bool:
        nonlocal text
        text = daemon.scrape()
        return (value(text, "loopwarden_state_store_up") == 1 and value(text, "loopwarden_state_dirty_runs") == 0
                and value(text, "loopwarden_state_runs_flushed_total") >= at_least)

    wait_for(flushed, timeout=60)
    return text


def _stop(daemon: DaemonHandle, timeout: float = 30) -> int:
    daemon.signal(signal.SIGTERM)
    return daemon.process.wait(timeout=timeout)


def _restorable_as_it_stands(path: pathlib.Path, tmp_path: pathlib.Path) -> int:
    """A copy of the log as it is now: every byte a whole frame (nothing torn, nothing damaged);
    the number of runs it holds."""
    copy = tmp_path / "copy.state"
    shutil.copyfile(path, copy)
    size = copy.stat().st_size
    store = FileStateStore(str(copy))
    store.check()
    held = sum(1 for _ in store.restore())
    assert store.corrupt_bytes == 0 and not list(tmp_path.glob("copy.state.corrupt-*"))
    assert copy.stat().st_size == size, "no torn tail"
    copy.unlink()
    return held


def _restart_restores(path: pathlib.Path) -> tuple[int, list[dict]]:
    """A real restart on the file: the runs its restore took in, and its log."""
    with running_daemon(ENABLED, ["--state-store", f"file:{path}"]) as daemon:
        restored = daemon.wait_for_log(lambda line: line.get("msg") == "state restored")
        return restored["runs"], daemon.logs()


def _fill_then_recover(tmp_path: pathlib.Path, state: pathlib.Path, wrapper: list[str],
                       make_space: Callable[[DaemonHandle], None], limit: int) -> None:
    """Runs acknowledged while the store cannot write them all; space comes back; every one of
    them is on disk, restored by a restart."""
    args = ["--state-store", f"file:{state}", "--state-flush-interval", "0.1"]
    with running_daemon(ENABLED, args, env=_env(), wrapper=wrapper) as daemon:
        acknowledged = _send_runs(daemon, "early", EARLY)
        _all_flushed(daemon, EARLY)
        acknowledged |= _send_runs(daemon, "full", RUNS - EARLY)
        down = _store_down(daemon)
        assert state.stat().st_size <= limit
        held_while_full = _restorable_as_it_stands(state, tmp_path)
        assert EARLY <= held_while_full < RUNS, "the limit stopped some runs, and kept the earlier ones"
        assert value(down, "loopwarden_state_dirty_runs") > 0, "the runs not written stay dirty"
        make_space(daemon)
        _all_flushed(daemon, RUNS)
        assert _stop(daemon) == 0
        back = daemon.wait_for_log(lambda line: line.get("msg") == "state store back; dirty runs flushed")
    assert len(acknowledged) == RUNS
    assert back["failed_attempts"] >= 1
    stored = stored_runs(state)
    assert {run_id for _tenant, run_id in stored} == acknowledged
    assert {record.events_evaluated for record in stored.values()} == {CALLS}
    assert not list(state.parent.glob("runs.state.corrupt-*"))
    restored, _log = _restart_restores(state)
    assert restored == RUNS


@pytest.mark.daemon
class TestFileSizeLimit:
    """No root needed: RLIMIT_FSIZE on the daemon stands in for a disk that fills."""

    LIMIT = 48 * 1024

    def test_every_acknowledged_run_is_restored_after_the_limit_is_lifted(self, tmp_path):
        state = tmp_path / "runs.state"
        _fill_then_recover(tmp_path, state, _fsize_limited(self.LIMIT), _lift_fsize, self.LIMIT)

    def test_a_stop_that_cannot_save_every_run_exits_1_and_says_how_many(self, tmp_path):
        """SIGTERM while the store still cannot write: exit 1, the log names the runs not saved,
        and a restart restores exactly the others (the log is whole)."""
        state = tmp_path / "runs.state"
        args = ["--state-store", f"file:{state}", "--state-flush-interval", "0.1"]
        with running_daemon(ENABLED, args, env=_env(), wrapper=_fsize_limited(self.LIMIT)) as daemon:
            acknowledged = _send_runs(daemon, "early", EARLY)
            _all_flushed(daemon, EARLY)
            acknowledged |= _send_runs(daemon, "lost", RUNS - EARLY)
            _store_down(daemon)
            code = _stop(daemon)
            failed = daemon.wait_for_log(lambda line: line.get("msg", "").startswith("final state flush failed"))
        assert len(acknowledged) == RUNS
        assert code == 1
        not_saved = failed["runs_not_saved"]
        assert 0 < not_saved <= RUNS - EARLY
        restored, _log = _restart_restores(state)
        # Every run the restart lacks was counted (a run of a write that succeeded beside a
        # failed one is put back too, so it may be counted and restored alike).
        assert restored >= EARLY
        assert RUNS - restored <= not_saved
        assert not list(tmp_path.glob("runs.state.corrupt-*"))


# ---------------------------------------------------------------- a real full tmpfs (root)
@contextlib.contextmanager
def _tmpfs(where: pathlib.Path, size: str) -> Iterator[pathlib.Path]:
    """A tmpfs of `size` at `where`, unmounted however the test ends; skipped where the OS
    refuses the mount (not root, or no mount namespace rights)."""
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"the OS refused to mount a tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(disk: pathlib.Path, leave: int = 0) -> pathlib.Path:
    """Fill the file system with one file, then give back `leave` bytes of it."""
    filler = disk / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as handle:
        while True:
            handle.write(b"\xff" * 65536)
            handle.flush()
    with contextlib.suppress(OSError), filler.open("ab") as handle:  # the last pages, by the byte
        while True:
            handle.write(b"\xff" * 512)
            handle.flush()
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


@pytest.mark.system
class TestFullTmpfs:
    def test_every_acknowledged_run_is_restored_after_space_comes_back(self, tmp_path):
        """A 3 MiB tmpfs with 48 KiB left: flushes hit ENOSPC mid-batch; the filler removed,
        every acknowledged run is written and restored."""
        with _tmpfs(tmp_path / "disk", "3m") as disk:
            state = disk / "runs.state"
            filler = _fill(disk, leave=48 * 1024)
            _fill_then_recover(tmp_path, state, [], lambda _daemon: filler.unlink(), 48 * 1024)

    def test_a_restart_on_a_full_tmpfs_with_a_file_larger_than_its_blocks_serves_degraded(self, tmp_path):
        """The log ends in a hole (as an older version's failed append left it) and the tmpfs is
        full: the start restores every run instead of dying of SIGBUS, serves (store down,
        degraded); once space is back the hole is cut off, new runs are written after the old
        ones, and the file restores whole."""
        with _tmpfs(tmp_path / "disk", "3m") as disk:
            state = disk / "runs.state"
            with running_daemon(ENABLED, ["--state-store", f"file:{state}", "--state-flush-interval", "0.1"]) as daemon:
                first = _send_runs(daemon, "before", 50)
                _all_flushed(daemon, 50)
                assert _stop(daemon) == 0
            os.truncate(state, state.stat().st_size + 256 * 1024)
            filler = _fill(disk)
            args = ["--state-store", f"file:{state}", "--state-flush-interval", "0.1"]
            with running_daemon(ENABLED, args) as daemon:
                restored = daemon.wait_for_log(lambda line: line.get("msg") == "state restored")
                degraded = daemon.wait_for_log(lambda line: line.get("msg", "").startswith("state store degraded"))
                metrics = daemon.scrape()
                health = health_status(daemon.grpc_target)
                with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                    verdict = stream.one(call("before-0", "read", '{"path":"/before/0/0","pad":"' + "x" * 40 + '"}'))
                later = _send_runs(daemon, "after", 20)
                filler.unlink()
                _all_flushed(daemon, 20)
                assert _stop(daemon) == 0
            stored = stored_runs(state)
            aside = list(disk.glob("runs.state.corrupt-*"))
        assert restored["runs"] == 50
        assert "No space left on device" in degraded["error"]
        assert value(metrics, "loopwarden_state_store_up") == 0
        assert health == "SERVING"
        assert verdict.action == pb.ACTION_ALLOW, "judged from memory, with the restored history"
        assert {run_id for _tenant, run_id in stored} == first | later
        assert stored[("", "before-0")].events_evaluated == CALLS + 1
        assert aside == [], "the hole was a torn tail, cut off; nothing damaged"
