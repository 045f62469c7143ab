"""The file store's log: appends, deletes, torn tails, compaction, and the writability check."""
from __future__ import annotations

import asyncio

import pytest

from loopwarden_server.statestore import file as file_module
from loopwarden_server.statestore.base import StateStoreError
from loopwarden_server.statestore.file import HEADER, FileStateStore, NotAStateFile


def _flush(store: FileStateStore, items) -> None:
    asyncio.run(store.flush([(key, value, 60.0) for key, value in items]))


def _reopen(path) -> list[bytes]:
    store = FileStateStore(str(path))
    store.check()
    return list(store.restore())


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
        store = FileStateStore(str(path))
        store.check()
        list(store.restore())
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
        store = FileStateStore(str(path))
        store.check()
        list(store.restore())
        for round_ in range(5):
            _flush(store, [(f"{{k{i}}}".encode(), f"v{round_}-{i}".encode() * 10) for i in range(20)])
        assert store.compactions >= 1
        assert sorted(f"v4-{i}".encode() * 10 for i in range(20)) == sorted(_reopen(path))
        assert path.read_bytes().startswith(HEADER)


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
