"""The `loopwarden` console script, run as a subprocess against the real daemon."""
from __future__ import annotations

import json
import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest

from loopwarden import LoopwardenClient

CONFIG = "{tools:{loopDetection:{enabled:true}}}"
REPO = pathlib.Path(__file__).resolve().parents[3]
TAU_BENCH_TRACE = REPO.parent / "shared" / "traces" / "tau-bench-airline-gpt-4o.jsonl"
SERVICE = "loopwarden.v1.LoopDetectionService"


def loopwarden(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the console script installed next to this interpreter."""
    script = pathlib.Path(sys.executable).parent / "loopwarden"
    assert script.exists(), f"console script not installed at {script}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWARDEN_")}
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=timeout, env=env)


def dead_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def summary_counts(stdout: str) -> dict[str, int]:
    """The `summary: allow=N, warn=M` line of a replay as a dict."""
    (line,) = [line for line in stdout.splitlines() if line.startswith("summary:")]
    return {action: int(n) for action, n in re.findall(r"(\w+)=(\d+)", line)}


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


class TestHealth:
    def test_live_daemon_is_serving(self, daemon):
        """`health` against a live daemon prints SERVING and exits 0."""
        result = loopwarden("health", "--address", daemon.grpc_target)

        assert 0 == result.returncode, result.stderr
        assert f"{daemon.grpc_target} (server): SERVING" == result.stdout.strip()

    def test_named_service_is_serving(self, daemon):
        """`health --service` names the loopwarden service, which is SERVING too."""
        result = loopwarden("health", "--address", daemon.grpc_target, "--service", SERVICE)

        assert (0, f"{daemon.grpc_target} {SERVICE}: SERVING") == (result.returncode, result.stdout.strip())

    def test_dead_port_fails(self):
        """`health` against a port nobody listens on exits non-zero and says the daemon is unavailable."""
        address = dead_address()

        result = loopwarden("health", "--address", address, "--timeout", "2")

        assert 0 != result.returncode
        assert "" == result.stdout
        assert f"{address}: UNAVAILABLE" in result.stderr


class TestInspect:
    def test_known_run_prints_its_json(self, daemon):
        """`inspect RUN` prints the run's records, guard state and effective config as JSON and exits 0."""
        with LoopwardenClient(daemon.grpc_target) as client:
            client.tool_call("cli/inspect", "read", {"path": "/x"})
            client.tool_outcome("cli/inspect", "read", {"path": "/x"}, result={"details": {"ok": True}})
            client.tool_call("cli/inspect", "write", {"path": "/y"})

        result = loopwarden("inspect", "cli/inspect", "--address", daemon.grpc_target)

        assert 0 == result.returncode, result.stderr
        shown = json.loads(result.stdout)
        assert "cli/inspect" == shown["run_id"]
        assert ["read", "write"] == [r["tool_name"] for r in shown["records"]]
        assert shown["records"][0]["result_hash"] != ""
        assert "" == shown["records"][1]["result_hash"]
        assert (True, 10) == (shown["effective_config"]["enabled"], shown["effective_config"]["warning_threshold"])
        assert (False, 0) == (shown["aborted"], shown["blocks"])

    def test_unknown_run_exits_1(self, daemon):
        """`inspect` of a run the daemon does not hold exits 1 with a not-found message and no JSON."""
        result = loopwarden("inspect", "cli/never-seen", "--address", daemon.grpc_target)

        assert 1 == result.returncode
        assert "" == result.stdout
        assert "not found" in result.stderr
        assert "cli/never-seen" in result.stderr

    def test_dead_daemon_exits_2(self):
        """`inspect` against a port nobody listens on exits 2 with an error."""
        result = loopwarden("inspect", "run", "--address", dead_address())

        assert 2 == result.returncode
        assert result.stderr.startswith("error:")


class TestReplay:
    def test_small_trace_warns_the_eleventh_call(self, daemon, tmp_path):
        """Eleven identical read calls replay as ten ALLOW lines, one WARN line and a summary."""
        trace = tmp_path / "repeat.jsonl"
        trace.write_text("".join(
            json.dumps({"run_id": "cli/replay-small", "seq": seq, "kind": "tool_call", "tool_name": "read",
                        "tool_call_id": f"c{seq}", "params": {"path": "/x"}}) + "\n"
            for seq in range(1, 12)))

        result = loopwarden("replay", str(trace), "--address", daemon.grpc_target)

        assert 0 == result.returncode, result.stderr
        lines = result.stdout.splitlines()
        assert 12 == len(lines)
        assert [f"cli/replay-small seq={seq} tool_call read -> ALLOW" for seq in range(1, 11)] == lines[:10]
        assert lines[10].startswith("cli/replay-small seq=11 tool_call read -> WARN generic_repeat count=10 ")
        assert "10 times" in lines[10]
        assert "summary: allow=10, warn=1" == lines[11]

    def test_quiet_prints_only_non_allow_verdicts(self, daemon, tmp_path):
        """With --quiet and a run prefix only the WARN line and the summary are printed."""
        trace = tmp_path / "repeat.jsonl"
        trace.write_text("".join(
            json.dumps({"run_id": "replay-quiet", "seq": seq, "kind": "tool_call", "tool_name": "read",
                        "params": {"path": "/x"}}) + "\n" for seq in range(1, 12)))

        result = loopwarden("replay", str(trace), "--address", daemon.grpc_target, "--quiet", "--run-prefix", "cli/")

        assert 0 == result.returncode, result.stderr
        warn_line, summary = result.stdout.splitlines()
        assert warn_line.startswith("cli/replay-quiet seq=11 tool_call read -> WARN generic_repeat count=10")
        assert "summary: allow=10, warn=1" == summary

    def test_line_that_is_not_json_exits_2(self, daemon, tmp_path):
        """A trace line that is not JSON stops the replay with exit 2 naming the file and line."""
        trace = tmp_path / "broken.jsonl"
        trace.write_text('{"run_id": "cli/broken", "seq": 1, "kind": "run_end"}\n{oops\n')

        result = loopwarden("replay", str(trace), "--address", daemon.grpc_target)

        assert 2 == result.returncode
        assert f"{trace}:2: not JSON" in result.stderr

    def test_tau_bench_trace_is_never_warned(self, daemon):
        """The 200 real tau-bench runs replay at default thresholds with every verdict ALLOW (they are the negatives)."""
        assert TAU_BENCH_TRACE.is_file(), f"shared trace missing: expected {TAU_BENCH_TRACE}"
        events = sum(1 for line in TAU_BENCH_TRACE.read_text(encoding="utf-8").splitlines() if line.strip())

        result = loopwarden("replay", str(TAU_BENCH_TRACE), "--address", daemon.grpc_target, "--quiet",
                            "--run-prefix", "cli/tau/", timeout=300)

        assert 0 == result.returncode, result.stderr
        counts = summary_counts(result.stdout)
        assert {"warn": 0, "block": 0, "abort": 0, "reject": 0} == {
            action: counts.get(action, 0) for action in ("warn", "block", "abort", "reject")}
        assert {"allow": events} == counts
        assert [] == [line for line in result.stdout.splitlines() if not line.startswith("summary:")]


class TestServe:
    def test_bad_listen_address_exits_2_naming_the_flag(self):
        """`serve --listen bad` exits 2 before starting, with a message naming --listen."""
        result = loopwarden("serve", "--listen", "bad", timeout=30)

        assert 2 == result.returncode
        assert "--listen" in result.stderr
        assert "HOST:PORT" in result.stderr
