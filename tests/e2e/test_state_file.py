"""The file state store: runs survive kill -9, a failed start touches nothing, a bad path fails fast."""
from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys

import pytest
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden_server.statestore.encoding import is_delta
from loopwarden_server.statestore.file import FileStateStore

from tests.support.daemon import running_daemon
from tests.support.grpc_helpers import SAME, Stream, call, channel, outcome
from tests.support.metrics import value
from tests.support.state import flushed_count, stored_runs, wait_until_flushed

pytestmark = pytest.mark.daemon

ENABLED = "{tools: {loopDetection: {enabled: true}}}"


def _loop(stream: Stream, run_id: str, times: int) -> list[pb.Verdict]:
    verdicts = []
    for _ in range(times):
        verdicts += stream.send(call(run_id, "read", '{"path":"/x"}'), outcome(run_id, "read", '{"path":"/x"}', SAME))
    return verdicts


def _serve(args: list[str]) -> subprocess.CompletedProcess:
    """A start expected to fail: the daemon's exit code and log."""
    return subprocess.run([sys.executable, "-m", "loopwarden", "serve", "--metrics-listen", "127.0.0.1:0", *args],
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                          env={k: v for k, v in os.environ.items() if not k.startswith("LOOPWARDEN_")})


class TestKillNine:
    def test_a_flushed_run_is_blocked_on_time_after_kill_9(self, tmp_path):
        """15 identical outcomes, flushed, kill -9, restart: the 21st call is BLOCK with count 20."""
        state = f"file:{tmp_path / 'runs.state'}"
        with running_daemon(ENABLED, ["--state-store", state]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                _loop(stream, "kill-1", 15)
            wait_until_flushed(daemon)
            daemon.process.kill()
            assert -signal.SIGKILL == daemon.process.wait(timeout=10)
        with running_daemon(ENABLED, ["--state-store", state]) as daemon:
            restored = daemon.wait_for_log(lambda l: l.get("msg") == "state restored")
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                after = _loop(stream, "kill-1", 5)
                verdict = stream.one(call("kill-1", "read", '{"path":"/x"}'))
        assert 1 == restored["runs"]
        assert [pb.ACTION_WARN] * 5 == [v.action for v in after[0::2]]
        assert (pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT, 20) == (verdict.action, verdict.detector, verdict.count)

    def test_a_run_written_as_deltas_comes_back_whole_after_kill_9(self, tmp_path):
        """10 distinct calls and 4 identical outcomes flushed (a full record), then 3 more, each
        flushed on its own: only what changed each time is written, as a delta against that
        record; kill -9, restart: the restore applies the latest delta to its base, and the
        20th identical outcome's call is BLOCK with count 20, as with one record. (Distinct calls
        first: a run of nothing but one loop stores its one digest once, so its whole record is
        small and its deltas are never half of it.)"""
        path = tmp_path / "runs.state"
        with running_daemon(ENABLED, ["--state-store", f"file:{path}", "--state-flush-interval", "0.1"]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                for i in range(10):
                    params = f'{{"path":"/d{i}"}}'
                    stream.send(call("deltas-1", "read", params), outcome("deltas-1", "read", params, SAME))
                _loop(stream, "deltas-1", 4)
                flushed = wait_until_flushed(daemon)
                for _ in range(3):
                    _loop(stream, "deltas-1", 1)
                    flushed = wait_until_flushed(daemon, at_least=flushed + 1)
            daemon.process.kill()
            assert -signal.SIGKILL == daemon.process.wait(timeout=10)
        store = FileStateStore(str(path))
        store.check()
        [(base, delta)] = list(store.restore())
        assert delta is not None and is_delta(delta), "a delta after the base"
        assert len(delta) * 2 <= len(base), "a delta is at most half its base"
        assert 34 == stored_runs(path)[("", "deltas-1")].events_evaluated, "17 calls and 17 outcomes"
        with running_daemon(ENABLED, ["--state-store", f"file:{path}"]) as daemon:
            restored = daemon.wait_for_log(lambda l: l.get("msg") == "state restored")
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                after = _loop(stream, "deltas-1", 13)
                verdict = stream.one(call("deltas-1", "read", '{"path":"/x"}'))
        assert (1, 1, 0) == (restored["runs"], restored["runs_with_delta"], restored["deltas_left_out"])
        assert [pb.ACTION_ALLOW] * 3 + [pb.ACTION_WARN] * 10 == [v.action for v in after[0::2]]
        assert (pb.ACTION_BLOCK, pb.DETECTOR_GENERIC_REPEAT, 20) == (verdict.action, verdict.detector, verdict.count)

    def test_ended_runs_stay_ended_after_kill_9(self, tmp_path):
        """run_end is flushed as a delete: the run does not come back."""
        state = f"file:{tmp_path / 'runs.state'}"
        with running_daemon(ENABLED, ["--state-store", state]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                _loop(stream, "kill-2", 3)
                _loop(stream, "kill-3", 3)
                wait_until_flushed(daemon, 2)
                stream.one(pb.Event(run_id="kill-2", run_end=pb.RunEnd()))
                wait_until_flushed(daemon, 3)
            daemon.process.kill()
            daemon.process.wait(timeout=10)
        with running_daemon(ENABLED, ["--state-store", state]) as daemon:
            restored = daemon.wait_for_log(lambda l: l.get("msg") == "state restored")
        assert 1 == restored["runs"]

    def test_a_torn_tail_keeps_every_earlier_run(self, tmp_path):
        """Garbage after the last good frame (a crash mid-append) is cut off; the runs before it load."""
        path = tmp_path / "runs.state"
        with running_daemon(ENABLED, ["--state-store", f"file:{path}"]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                _loop(stream, "torn-1", 4)
                wait_until_flushed(daemon)
            daemon.process.kill()
            daemon.process.wait(timeout=10)
        with path.open("ab") as handle:
            handle.write(b"\x00\x00\x10\x00\xde\xad")  # a frame header promising 4 KiB that never came
        with running_daemon(ENABLED, ["--state-store", f"file:{path}"]) as daemon:
            torn = daemon.wait_for_log(lambda l: l.get("msg", "").startswith("state file had a torn tail"))
            restored = daemon.wait_for_log(lambda l: l.get("msg") == "state restored")
        assert (1, 6) == (restored["runs"], torn["dropped_bytes"])

    def test_a_graceful_stop_flushes_everything_and_exits_0(self, tmp_path):
        """SIGTERM: the final flush writes runs changed within the last interval too."""
        state = f"file:{tmp_path / 'runs.state'}"
        with running_daemon(ENABLED, ["--state-store", state, "--state-flush-interval", "60"]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                _loop(stream, "term-1", 15)
            assert 0 == flushed_count(daemon)
            daemon.signal(signal.SIGTERM)
            assert 0 == daemon.process.wait(timeout=15)
            daemon.wait_for_log(lambda l: l.get("msg") == "state flushed")
        with running_daemon(ENABLED, ["--state-store", state]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                _loop(stream, "term-1", 5)
                verdict = stream.one(call("term-1", "read", '{"path":"/x"}'))
        assert (pb.ACTION_BLOCK, 20) == (verdict.action, verdict.count)


class TestFailedFinalFlush:
    def test_a_final_flush_that_cannot_write_exits_1_and_says_so(self, tmp_path):
        """The state path turned into a directory under the daemon: SIGTERM, the flush fails, exit 1."""
        path = tmp_path / "runs.state"
        with running_daemon(ENABLED, ["--state-store", f"file:{path}", "--state-flush-interval", "60"]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                _loop(stream, "final-1", 2)
            path.unlink()
            path.mkdir()
            daemon.signal(signal.SIGTERM)
            assert 1 == daemon.process.wait(timeout=20)
            failed = daemon.wait_for_log(lambda l: l.get("msg", "").startswith("final state flush failed"))
        assert 1 == failed["dirty_runs"]


class TestFailedStart:
    def _stored(self, tmp_path) -> tuple[str, bytes]:
        path = tmp_path / "runs.state"
        with running_daemon(ENABLED, ["--state-store", f"file:{path}"]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                _loop(stream, "fail-1", 15)
                wait_until_flushed(daemon)
        return str(path), path.read_bytes()

    def test_a_busy_port_leaves_the_state_intact(self, tmp_path):
        """A start that cannot bind its port exits non-zero and the state file is byte-for-byte unchanged."""
        path, before = self._stored(tmp_path)
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            failed = _serve(["--listen", f"127.0.0.1:{port}", "--state-store", f"file:{path}"])
        assert 2 == failed.returncode
        assert "cannot listen" in failed.stderr
        assert before == pathlib.Path(path).read_bytes()
        with running_daemon(ENABLED, ["--state-store", f"file:{path}"]) as daemon:
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                _loop(stream, "fail-1", 5)
                assert pb.ACTION_BLOCK == stream.one(call("fail-1", "read", '{"path":"/x"}')).action

    def test_a_bad_key_path_leaves_the_state_intact(self, tmp_path):
        """A missing TLS key fails the start before the state is read, and the file is unchanged."""
        path, before = self._stored(tmp_path)
        failed = _serve(["--listen", "127.0.0.1:0", "--state-store", f"file:{path}",
                         "--tls-cert", str(tmp_path / "no-cert.pem"), "--tls-key", str(tmp_path / "no-key.pem")])
        assert 2 == failed.returncode
        assert before == pathlib.Path(path).read_bytes()

    @pytest.mark.parametrize("where", ["under-a-file", "a-directory"])
    def test_an_unwritable_state_path_fails_the_start_with_a_clear_message(self, tmp_path, where):
        """A path that can never be written: exit 2 at once, naming the path."""
        blocker = tmp_path / "plain-file"
        blocker.write_text("x")
        path = blocker / "runs.state" if where == "under-a-file" else tmp_path
        failed = _serve(["--listen", "127.0.0.1:0", "--state-store", f"file:{path}"])
        assert 2 == failed.returncode
        assert str(path) in failed.stderr
        assert "not writable" in failed.stderr or "is a directory" in failed.stderr

    def test_a_missing_directory_is_created(self, tmp_path):
        """PATH need not exist: its directory and file are created."""
        path = tmp_path / "new" / "dir" / "runs.state"
        with running_daemon(ENABLED, ["--state-store", f"file:{path}"]) as daemon:
            assert 0 == value(daemon.scrape(), "loopwarden_state_store_errors_total", operation="check")
        assert path.is_file()
