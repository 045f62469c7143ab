"""The `loopwarden` console script, run as a subprocess against the real daemon."""
from __future__ import annotations

import json
import pathlib
import re

import pytest

from loopwarden import LoopwardenClient
from tests.support.cli import dead_address, loopwarden

CONFIG = "{tools:{loopDetection:{enabled:true}}}"
REPO = pathlib.Path(__file__).resolve().parents[3]
TAU_BENCH_TRACE = REPO / "traces" / "tau-bench-airline-gpt-4o.jsonl"  # vendored: see traces/README.md
SERVICE = "loopwarden.v1.LoopDetectionService"


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

    def test_unknown_service_is_named(self, daemon):
        """`health --service nope` exits 2 naming the unknown service and the ones the daemon reports."""
        result = loopwarden("health", "--address", daemon.grpc_target, "--service", "nope")

        assert 2 == result.returncode
        assert "" == result.stdout
        assert (f"error: {daemon.grpc_target}: unknown health service 'nope': the daemon reports "
                f'"" (the whole server) and {SERVICE}') == result.stderr.strip()

    def test_address_from_the_environment(self, daemon):
        """LOOPWARDEN_ADDRESS stands in for --address."""
        result = loopwarden("health", env={"LOOPWARDEN_ADDRESS": daemon.grpc_target})

        assert (0, f"{daemon.grpc_target} (server): SERVING") == (result.returncode, result.stdout.strip())

    def test_dead_port_fails(self):
        """`health` against a port nobody listens on exits non-zero and says the daemon is unavailable."""
        address = dead_address()

        result = loopwarden("health", "--address", address, "--timeout", "2")

        assert 0 != result.returncode
        assert "" == result.stdout
        assert f"{address}: UNAVAILABLE" in result.stderr


class TestInspect:
    def test_json_prints_the_raw_view(self, daemon):
        """`inspect RUN --json` prints the run's records, guard state and effective config as JSON and exits 0."""
        with LoopwardenClient(daemon.grpc_target) as client:
            client.tool_call("cli/inspect", "read", {"path": "/x"})
            client.tool_outcome("cli/inspect", "read", {"path": "/x"}, result={"details": {"ok": True}})
            client.tool_call("cli/inspect", "write", {"path": "/y"})

        result = loopwarden("inspect", "cli/inspect", "--json", "--address", daemon.grpc_target)

        assert 0 == result.returncode, result.stderr
        shown = json.loads(result.stdout)
        assert "cli/inspect" == shown["run_id"]
        assert ["read", "write"] == [r["tool_name"] for r in shown["records"]]
        assert shown["records"][0]["result_hash"] != ""
        assert "" == shown["records"][1]["result_hash"]
        assert (True, 10) == (shown["effective_config"]["enabled"], shown["effective_config"]["warning_threshold"])
        assert (False, 0) == (shown["aborted"], shown["blocks"])

    def test_an_agent_the_config_does_not_name_is_shown_as_the_metrics_count_it(self, daemon):
        """A run whose agent id is not in the config shows agent "default" (as in the metrics), with
        the id it sent; --json carries both agent_id and agent_label."""
        with LoopwardenClient(daemon.grpc_target, agent_id="stranger") as client:
            client.tool_call("cli/inspect-stranger", "read", {"path": "/x"})

        summary = loopwarden("inspect", "cli/inspect-stranger", "--address", daemon.grpc_target)
        raw = loopwarden("inspect", "cli/inspect-stranger", "--json", "--address", daemon.grpc_target)

        assert 0 == summary.returncode, summary.stderr
        assert ("agent     default (agent id 'stranger' is not in the config: the global settings)"
                == summary.stdout.splitlines()[1])
        assert ("stranger", "default") == (json.loads(raw.stdout)["agent_id"], json.loads(raw.stdout)["agent_label"])

    def test_summary_is_readable(self, daemon):
        """Without --json, `inspect` prints a summary: run, the agent as metrics spell it, guard, blocks,
        config, the records as a table and the recent verdicts with their evidence, in a few dozen lines."""
        with LoopwardenClient(daemon.grpc_target) as client:
            for n in range(11):
                client.tool_call("cli/inspect-summary", "read", {"path": "/x"}, tool_call_id=f"c{n}")
            verdict = client.tool_call("cli/inspect-summary", "read", {"path": "/x"}, tool_call_id="c11")

        result = loopwarden("inspect", "cli/inspect-summary", "--address", daemon.grpc_target)

        assert 0 == result.returncode, result.stderr
        lines = result.stdout.splitlines()
        assert len(lines) < 40
        assert "run       cli/inspect-summary" == lines[0]
        assert lines[1].startswith("agent     default ")
        assert "guard     not armed" in lines
        assert "blocks    0" in lines
        assert any(line.startswith("config    detection on · history 30 · W 10 · C 20") for line in lines)
        assert "records   12 held; the last 10, oldest first:" in lines
        header = next(line for line in lines if line.strip().startswith("seq"))
        assert ["seq", "tool", "args", "result", "call", "id", "note"] == header.split()
        assert "c11" in lines[lines.index(header) + 10]
        assert any(f"decision {verdict.decision_id}" in line and "WARN" in line and "generic_repeat" in line
                   for line in lines)
        assert any(line.strip().startswith("evidence: seqs ") and "records)" in line for line in lines)

    def test_records_flag_chooses_how_many(self, daemon):
        """`--records 0` lists every record held."""
        with LoopwardenClient(daemon.grpc_target) as client:
            for n in range(12):
                client.tool_call("cli/inspect-all", "read", {"path": f"/{n}"})

        result = loopwarden("inspect", "cli/inspect-all", "--records", "0", "--address", daemon.grpc_target)

        assert 0 == result.returncode, result.stderr
        assert "records   12 held; all, oldest first:" in result.stdout.splitlines()

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

    def test_unknown_event_kind_is_named_and_exits_1(self, daemon, tmp_path):
        """An event of a kind nobody knows is REJECTed with a message naming that kind, and the replay exits 1
        saying how many events were rejected."""
        trace = tmp_path / "typo.jsonl"
        trace.write_text(json.dumps({"run_id": "cli/typo", "seq": 1, "kind": "tool_cal", "tool_name": "read"}) + "\n"
                         + json.dumps({"run_id": "cli/typo", "seq": 2, "kind": "tool_call", "tool_name": "read"}) + "\n")

        result = loopwarden("replay", str(trace), "--address", daemon.grpc_target)

        assert 1 == result.returncode, result.stderr
        first, second, summary = result.stdout.splitlines()
        assert ("cli/typo seq=1 tool_cal read -> REJECT [missing_event_kind] unknown event kind 'tool_cal': "
                "expected one of tool_call, tool_outcome, compaction_retry, run_end, user_turn, usage, approval, model_output") == first
        assert "summary: allow=1, reject=1" == summary
        assert "error: 1 event was rejected as malformed (REJECT)" in result.stderr

    def test_missing_kind_still_says_so(self, daemon, tmp_path):
        """An event without a kind keeps the daemon's own message."""
        trace = tmp_path / "nokind.jsonl"
        trace.write_text(json.dumps({"run_id": "cli/nokind", "seq": 1, "tool_name": "read"}) + "\n")

        result = loopwarden("replay", str(trace), "--address", daemon.grpc_target, "--quiet")

        assert 1 == result.returncode
        assert "[missing_event_kind] event has no kind: set one of" in result.stdout

    def test_tau_bench_trace_is_never_warned(self, daemon):
        """The 200 real tau-bench runs replay at default thresholds with every verdict ALLOW (they are the negatives)."""
        assert TAU_BENCH_TRACE.is_file(), f"vendored trace missing: expected {TAU_BENCH_TRACE}"
        events = sum(1 for line in TAU_BENCH_TRACE.read_text(encoding="utf-8").splitlines() if line.strip())

        result = loopwarden("replay", str(TAU_BENCH_TRACE), "--address", daemon.grpc_target, "--quiet",
                            "--run-prefix", "cli/tau/", timeout=300)

        assert 0 == result.returncode, result.stderr
        counts = summary_counts(result.stdout)
        assert {"warn": 0, "block": 0, "abort": 0, "reject": 0} == {
            action: counts.get(action, 0) for action in ("warn", "block", "abort", "reject")}
        assert {"allow": events} == counts
        assert [] == [line for line in result.stdout.splitlines() if not line.startswith("summary:")]


class TestVersion:
    def test_version_names_both_distributions(self):
        """`loopwarden --version` prints the installed versions of the client and the daemon distributions."""
        from importlib.metadata import version

        result = loopwarden("--version")

        assert 0 == result.returncode, result.stderr
        assert (f"loopwarden-client {version('loopwarden-client')}, loopwarden (daemon) {version('loopwarden')}"
                == result.stdout.strip())

    def test_serve_logs_its_version_at_start(self, daemon):
        """The daemon's `listening` line carries the daemon distribution's version."""
        from importlib.metadata import version

        listening = daemon.wait_for_log(lambda line: line.get("msg") == "listening")

        assert version("loopwarden") == listening["version"]


class TestServe:
    def test_bad_listen_address_exits_2_naming_the_flag(self):
        """`serve --listen bad` exits 2 before starting, with a message naming --listen."""
        result = loopwarden("serve", "--listen", "bad", timeout=30)

        assert 2 == result.returncode
        assert "--listen" in result.stderr
        assert "HOST:PORT" in result.stderr

    def test_busy_port_says_address_already_in_use(self, daemon):
        """A second daemon on a port in use exits 2, its last log line saying `address already in use: HOST:PORT`
        and naming the flag and the variable that move it, and gRPC prints no line of its own (every
        line is one of the daemon's JSON lines)."""
        result = loopwarden("serve", "--listen", daemon.grpc_target, "--metrics-listen", "127.0.0.1:0", timeout=30)

        assert 2 == result.returncode
        logged = [json.loads(line) for line in result.stderr.splitlines()]
        assert ("cannot start", f"cannot listen: address already in use: {daemon.grpc_target} "
                                "(--listen HOST:PORT or LOOPWARDEN_LISTEN moves it)") == (
            logged[-1]["msg"], logged[-1]["error"])

    def test_busy_metrics_port_names_the_flag(self, daemon):
        """A metrics port in use is named with its flag and variable."""
        metrics = f"127.0.0.1:{daemon.metrics_port}"

        result = loopwarden("serve", "--listen", "127.0.0.1:0", "--metrics-listen", metrics, timeout=30)

        assert 2 == result.returncode
        assert (f"cannot listen: address already in use: {metrics} "
                "(--metrics-listen HOST:PORT or LOOPWARDEN_METRICS_LISTEN moves it)"
                ) == json.loads(result.stderr.splitlines()[-1])["error"]

    def test_busy_port_adds_the_hint_it_was_started_with(self, daemon):
        """LOOPWARDEN_PORT_HINT (what `make serve` passes) follows the flag and the variable."""
        result = loopwarden("serve", "--listen", daemon.grpc_target, "--metrics-listen", "127.0.0.1:0", timeout=30,
                            env={"LOOPWARDEN_PORT_HINT": "make serve GRPC_PORT=PORT moves it"})

        assert 2 == result.returncode
        assert (f"cannot listen: address already in use: {daemon.grpc_target} "
                "(--listen HOST:PORT or LOOPWARDEN_LISTEN moves it; make serve GRPC_PORT=PORT moves it)"
                ) == json.loads(result.stderr.splitlines()[-1])["error"]
