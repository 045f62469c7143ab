"""The file store under damage, through the real daemon: a flipped byte costs the
records it touches, a large restore answers health NOT_SERVING (and the API "restoring") until it
is done, a path that is no regular file is refused, and a full disk at start degrades to memory
instead of refusing to start."""
from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden_server.statestore.encoding import run_key
from loopwarden_server.statestore.file import HEADER
from loopwarden_server.statestore.file import frame as log_frame
from tests.support.stored import frame_run

from tests.support.daemon import running_daemon, started
from tests.support.grpc_helpers import SAME, Stream, call, channel, outcome
from tests.support.metrics import value
from tests.support.state import stored_runs, wait_until_flushed

pytestmark = pytest.mark.daemon

ENABLED = "{tools: {loopDetection: {enabled: true}}}"
ARGS = '{"path":"/x"}'
RESTORING = "restoring state; health says NOT_SERVING until it is done"


def _loop(stream: Stream, run_id: str, times: int) -> list[pb.Verdict]:
    verdicts = []
    for _ in range(times):
        verdicts += stream.send(call(run_id, "read", ARGS), outcome(run_id, "read", ARGS, SAME))
    return verdicts[0::2]


def _template_record(tmp_path: pathlib.Path):
    """The stored record of a real run with 15 identical outcomes (written by a real daemon)."""
    path = tmp_path / "template.state"
    with running_daemon(ENABLED, ["--state-store", f"file:{path}"]) as daemon:
        with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
            _loop(stream, "template", 15)
        wait_until_flushed(daemon)
    [record] = stored_runs(path).values()
    return record


def _write_state(path: pathlib.Path, record: dict, runs: int) -> list[tuple[int, int]]:
    """A state file of `runs` copies of the record (run ids r-0 …), as the file store lays them
    out; the (offset, length) of each run's frame."""
    placed = []
    offset = len(HEADER)
    with path.open("wb") as handle:
        handle.write(HEADER)
        for index in range(runs):
            copy = type(record)()
            copy.CopyFrom(record)
            copy.run_id, copy.last_seen = f"r-{index}", time.time()
            data = log_frame(run_key(copy.tenant, copy.run_id), frame_run(copy))
            handle.write(data)
            placed.append((offset, len(data)))
            offset += len(data)
    return placed


def _serve_args(state: pathlib.Path) -> list[str]:
    return [sys.executable, "-m", "loopwarden", "serve", "--listen", "127.0.0.1:0", "--metrics-listen",
            "127.0.0.1:0", "--state-store", f"file:{state}"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LOOPWARDEN_")}


def _health(target: str) -> int:
    with grpc.insecure_channel(target) as ch:
        return health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5).status


class TestDamagedFile:
    def test_a_flipped_byte_at_10_percent_costs_one_run(self, tmp_path):
        """200 stored runs, one byte flipped in the run at 10% of the file: 199 runs come back, each
        still blocked at call 21; the bad bytes are in runs.state.corrupt-*, counted and logged."""
        record = _template_record(tmp_path)
        state = tmp_path / "runs.state"
        frames = _write_state(state, record, 200)
        hit = next(i for i, (offset, _l) in enumerate(frames) if offset >= state.stat().st_size // 10)
        data = bytearray(state.read_bytes())
        data[frames[hit][0] + 30] ^= 0x01
        state.write_bytes(bytes(data))
        with running_daemon(ENABLED, ["--state-store", f"file:{state}"]) as daemon:
            restored = daemon.wait_for_log(lambda line: line.get("msg") == "state restored")
            damaged = daemon.wait_for_log(lambda line: line.get("msg", "").startswith("state file damaged"))
            with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                kept = _loop(stream, "r-0", 6)
                lost = _loop(stream, f"r-{hit}", 6)
            metrics = daemon.scrape()
        assert restored["runs"] == 199
        assert (damaged["offset"], damaged["bytes"]) == frames[hit]
        assert value(metrics, "loopwarden_state_file_damaged_bytes") == frames[hit][1]
        assert [v.action for v in kept] == [pb.ACTION_WARN] * 5 + [pb.ACTION_BLOCK]
        assert pb.ACTION_BLOCK not in [v.action for v in lost], "the damaged run starts over"
        [aside] = list(tmp_path.glob("runs.state.corrupt-*"))
        assert aside.read_bytes() == bytes(data[frames[hit][0]:frames[hit][0] + frames[hit][1]])


class TestRestoreHealth:
    def test_health_is_not_serving_and_the_api_says_restoring_until_the_restore_is_done(self, tmp_path):
        """30,000 stored runs: while they load, every port answers (health NOT_SERVING, Check
        UNAVAILABLE "restoring"); once done, SERVING, and a restored run blocks at call 21."""
        record = _template_record(tmp_path)
        state = tmp_path / "runs.state"
        _write_state(state, record, 30_000)
        with started(_serve_args(state), _env(), until=RESTORING, startup_timeout=60) as daemon:
            target = daemon.listening["grpc_address"]
            statuses = [_health(target)]
            with channel(target) as ch:
                with pytest.raises(grpc.RpcError) as refused:
                    ch.unary_unary("/loopwarden.v1.LoopDetectionService/Check")(
                        pb.CheckRequest(event=call("r-1", "read", ARGS)).SerializeToString(), timeout=5)
            deadline = time.monotonic() + 180
            while statuses[-1] != health_pb2.HealthCheckResponse.SERVING and time.monotonic() < deadline:
                time.sleep(0.05)
                statuses.append(_health(target))
            restored = _wait_for(daemon, "state restored")
            with channel(target) as ch, Stream(ch) as stream:
                verdicts = _loop(stream, "r-29999", 6)
        assert statuses[0] == health_pb2.HealthCheckResponse.NOT_SERVING
        assert statuses[-1] == health_pb2.HealthCheckResponse.SERVING
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "restoring its stored runs" in refused.value.details()
        assert restored["runs"] == 30_000
        assert [v.action for v in verdicts] == [pb.ACTION_WARN] * 5 + [pb.ACTION_BLOCK]


def _wait_for(daemon, message: str, timeout: float = 30.0) -> dict:
    for line in daemon.seen:
        if line.get("msg") == message:
            return line
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            line = daemon.lines.get(timeout=0.1)
            daemon.seen.append(line)
            if line.get("msg") == message:
                return line
    raise AssertionError(f"no {message!r} in the log: {daemon.seen[-5:]}")


class TestStatePath:
    def test_dev_full_is_refused_at_start_and_stays_a_device(self):
        result = subprocess.run(_serve_args(pathlib.Path("/dev/full")), capture_output=True, text=True, timeout=30,
                                stdin=subprocess.DEVNULL, env=_env())
        assert result.returncode != 0
        assert "/dev/full is not a regular file (a character device)" in result.stderr
        assert pathlib.Path("/dev/full").is_char_device()


@contextlib.contextmanager
def _small_disk(where: pathlib.Path, size: str = "512k") -> Iterator[pathlib.Path]:
    """A tmpfs of `size` mounted at `where` (root only: the issue's "full disk")."""
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (this test needs root, as make test runs): {mounted.stderr}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.system
class TestFullDisk:
    def test_a_full_disk_at_start_degrades_to_memory_and_recovers_when_space_is_back(self, tmp_path):
        """The disk holding the state path is full: the daemon starts (store down, counted),
        judges calls from memory; once space is freed its next flush writes the runs, and a
        restart restores them."""
        with _small_disk(tmp_path / "disk") as disk:
            filler = disk / "filler"
            with contextlib.suppress(OSError), filler.open("wb") as handle:
                while True:
                    handle.write(b"\0" * 65536)
                    handle.flush()
            state = disk / "runs.state"
            with running_daemon(ENABLED, ["--state-store", f"file:{state}", "--state-flush-interval", "0.2"]) as daemon:
                degraded = daemon.wait_for_log(lambda line: line.get("msg", "").startswith("state store degraded"))
                with channel(daemon.grpc_target) as ch, Stream(ch) as stream:
                    verdicts = _loop(stream, "full-1", 21)
                    before = daemon.scrape()
                    filler.unlink()
                    wait_until_flushed(daemon)
                    after = daemon.scrape()
            with running_daemon(ENABLED, ["--state-store", f"file:{state}"]) as daemon:
                restored = daemon.wait_for_log(lambda line: line.get("msg") == "state restored")
        assert "No space left on device" in degraded["error"]
        assert verdicts[-1].action == pb.ACTION_BLOCK, "judged from memory while the disk was full"
        assert value(before, "loopwarden_state_store_up") == 0
        assert value(before, "loopwarden_state_store_errors_total", operation="check") == 1
        assert value(after, "loopwarden_state_store_up") == 1
        assert restored["runs"] == 1
