"""--snapshot PATH (the alias of --state-store file:PATH): runs survive a graceful restart; an
unreadable file is moved aside and the daemon starts empty; a format-4 snapshot is converted."""
from __future__ import annotations

import json
import signal
import time
import zlib

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb

from loopwarden_server.snapshot import VERSION as SNAPSHOT_VERSION
from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import SAME, Stream, call, channel, compaction, outcome

pytestmark = pytest.mark.daemon

ENABLED = "{tools: {loopDetection: {enabled: true}}}"


def _stop(daemon) -> None:
    daemon.signal(signal.SIGTERM)
    assert 0 == daemon.process.wait(timeout=15)


def _done(stream: Stream, run_id: str, times: int) -> list[pb.Verdict]:
    verdicts = []
    for _ in range(times):
        verdicts += stream.send(call(run_id, "read", '{"path":"/x"}'), outcome(run_id, "read", '{"path":"/x"}', SAME))
    return verdicts


class TestRestart:
    def test_a_looping_run_is_blocked_on_time_after_a_restart(self, tmp_path):
        """15 identical outcomes before the restart, 5 after: the 21st call is BLOCK with count 20."""
        path = tmp_path / "runs.snapshot"
        with running_daemon(ENABLED, ["--snapshot", str(path)]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                _done(stream, "snap-1", 15)
                stream.one(compaction("snap-2"))
                stream.send(call("snap-2", "gw"), outcome("snap-2", "gw", "{}", SAME))
            _stop(daemon)
            written = daemon.wait_for_log(lambda l: l.get("msg") == "state flushed")
        assert 2 == written["runs_held"] and path.exists()

        with running_daemon(ENABLED, ["--snapshot", str(path)]) as daemon:
            restored = daemon.wait_for_log(lambda l: l.get("msg") == "state restored")
            assert (2, 0) == (restored["runs"], restored["expired_skipped"])
            assert path.exists(), "the state file is the store of record: never consumed"
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                after = _done(stream, "snap-1", 5)
                verdict = stream.one(call("snap-1", "read", '{"path":"/x"}'))
                # The guard window survives too: two more identical outcomes abort the run.
                guard = [stream.send(call("snap-2", "gw"), outcome("snap-2", "gw", "{}", SAME))[1] for _ in range(2)]
        assert [pb.ACTION_WARN] * 5 == [v.action for v in after[0::2]]
        assert (pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT, 20) == (verdict.action, verdict.detector, verdict.count)
        assert [pb.ACTION_ALLOW, pb.ACTION_ABORT] == [v.action for v in guard]

    def test_announcements_and_aborts_survive(self, tmp_path):
        """An announced warning is not announced again, and an aborted run stays aborted, after a restart."""
        path = tmp_path / "runs.snapshot"
        with running_daemon(ENABLED, ["--snapshot", str(path)]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                for _ in range(11):
                    stream.one(call("snap-3", "read"))
                stream.one(compaction("snap-4"))
                for _ in range(3):
                    stream.send(call("snap-4", "gw"), outcome("snap-4", "gw", "{}", SAME))
            _stop(daemon)
        with running_daemon(ENABLED, ["--snapshot", str(path)]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                warned = stream.one(call("snap-3", "read"))
                aborted = stream.one(call("snap-4", "other"))
        assert (pb.ACTION_WARN, 11, False) == (warned.action, warned.count, warned.announce)
        assert (pb.ACTION_ABORT, "compaction_loop_persisted") == (aborted.action, aborted.error_code)

    def test_runs_idle_past_the_ttl_are_skipped(self, tmp_path):
        """Time spent stopped counts as idle time."""
        path = tmp_path / "runs.snapshot"
        args = ["--snapshot", str(path), "--run-idle-ttl", "1"]
        with running_daemon(ENABLED, args) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                stream.one(call("snap-5", "read"))
            _stop(daemon)
        time.sleep(1.5)
        with running_daemon(ENABLED, args) as daemon:
            restored = daemon.wait_for_log(lambda l: l.get("msg") == "state restored")
        assert (0, 1) == (restored["runs"], restored["expired_skipped"])


class TestRefusal:
    @pytest.mark.parametrize("content", [
        b"definitely not a snapshot",
        zlib.compress(b"{not json"),
        zlib.compress(json.dumps({"format": "loopwarden-run-snapshot", "version": 99, "written_at": 0, "runs": []}).encode()),
        zlib.compress(json.dumps({"format": "someone-else", "version": 1}).encode()),
        zlib.compress(json.dumps({"format": "loopwarden-run-snapshot", "version": SNAPSHOT_VERSION, "written_at": 0,
                                  "runs": [{"run_id": "x"}]}).encode()),
    ], ids=["garbage", "corrupt-json", "foreign-version", "foreign-format", "malformed-run"])
    def test_bad_snapshots_are_refused_and_the_daemon_starts_empty(self, tmp_path, content):
        """A corrupt or foreign snapshot is logged, moved aside, and the daemon serves with no runs."""
        path = tmp_path / "runs.snapshot"
        path.write_bytes(content)
        with running_daemon(ENABLED, ["--snapshot", str(path), "--run-idle-ttl", "1e9"]) as daemon:
            refused = daemon.wait_for_log(lambda l: l.get("msg", "").startswith("state refused"))
            listening = daemon.wait_for_log(lambda l: l.get("msg") == "listening")
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                assert pb.ACTION_ALLOW == stream.one(call("x", "read")).action
        assert 0 == listening["runs_restored"]
        assert str(path) + ".refused" == refused["moved_to"]
        assert (tmp_path / "runs.snapshot.refused").read_bytes() == content


class TestConversion:
    def test_a_format_4_snapshot_is_converted_and_kept_blocking(self, tmp_path):
        """A snapshot written before the state store is read, rewritten as a state file, and its runs go on."""
        from loopwarden_server.config import load_default_config
        from tests.reference.engine import ToolCall, ToolOutcome, evaluate, new_run_state
        from tests.reference.codec import write_snapshot
        from tests.reference.store import RunStore

        config = load_default_config()
        settings = config.settings_for("")
        store = RunStore(max_runs=10, idle_ttl_seconds=3600, clock=time.monotonic)
        entry = store.create("", "old-1", new_run_state(settings))
        for _ in range(15):
            evaluate(entry.state, ToolCall("read", '{"path":"/x"}'), settings, config.tool_catalog)
            evaluate(entry.state, ToolOutcome("read", '{"path":"/x"}', result_json=SAME), settings, config.tool_catalog)
        path = tmp_path / "runs.snapshot"
        write_snapshot(str(path), store, time.time())
        with running_daemon(ENABLED, ["--snapshot", str(path)]) as daemon:
            daemon.wait_for_log(lambda l: l.get("msg") == "snapshot converted to a state file")
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                _done(stream, "old-1", 5)
                verdict = stream.one(call("old-1", "read", '{"path":"/x"}'))
        assert path.read_bytes().startswith(b"LWSTATE")
        assert (pb.ACTION_BLOCK, 20) == (verdict.action, verdict.count)
