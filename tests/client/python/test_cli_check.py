"""`loopwarden check`: one event from the shell, its verdict printed, the exit status saying whether the call may run."""
from __future__ import annotations

import json
import os

import pytest

from loopwarden import LoopwardenClient
from loopwarden.cli import main
from tests.support.cli import dead_address, loopwarden

PARAMS = '{"path": "/x"}'
RESULT = '{"content": [{"type": "text", "text": "same"}], "details": {}}'


@pytest.fixture(autouse=True)
def no_connection_environment(monkeypatch):
    """In-process runs of the CLI read os.environ: keep the caller's LOOPWARDEN_* out of them."""
    for name in [name for name in os.environ if name.startswith("LOOPWARDEN_")]:
        monkeypatch.delenv(name)


def check(capsys, daemon, run_id: str, *extra: str) -> tuple[int, list[str]]:
    """`loopwarden check` in-process (fast enough to send a whole loop through it)."""
    status = main(["check", "--address", daemon.grpc_target, "--run", run_id, "--tool", "read", "--params", PARAMS,
                   *extra])
    return status, capsys.readouterr().out.splitlines()


class TestVerdicts:
    def test_first_call_is_allowed(self, daemon):
        """A first tool call prints ALLOW and exits 0 (the console script, as a shell would run it)."""
        result = loopwarden("check", "--address", daemon.grpc_target, "--run", "check/first", "--tool", "read",
                            "--params", PARAMS)

        assert (0, "ALLOW") == (result.returncode, result.stdout.strip()), result.stderr

    def test_outcomes_and_calls_build_up_to_a_block(self, daemon, capsys, run_id):
        """Twenty identical calls and outcomes sent by `check` itself, then the 21st call: BLOCK generic_repeat
        count=20 with its decision id and message, exit 1; the 11th call was a WARN (exit 0)."""
        statuses = []
        for _ in range(20):
            statuses.append(check(capsys, daemon, run_id))
            assert (0, ["ALLOW"]) == check(capsys, daemon, run_id, "--result", RESULT)

        status, lines = check(capsys, daemon, run_id)

        assert [0] * 20 == [status for status, _ in statuses]
        assert statuses[10][1][0].startswith("WARN generic_repeat count=10 decision=")
        assert 1 == status
        assert lines[0].startswith("BLOCK generic_repeat count=20 decision=")
        assert 2 == len(lines) and lines[1]

    def test_error_outcome_is_reported(self, daemon, capsys, run_id):
        """`--error TEXT` reports a failed call; the outcome's verdict is printed."""
        assert (0, ["ALLOW"]) == check(capsys, daemon, run_id)

        assert (0, ["ALLOW"]) == check(capsys, daemon, run_id, "--error", "ENOENT: no such file")

    def test_json_prints_the_whole_verdict(self, daemon, capsys, run_id):
        """`--json` prints the verdict as one JSON object."""
        status, (line,) = check(capsys, daemon, run_id, "--json")

        verdict = json.loads(line)
        assert (0, "allow", run_id, "read") == (status, verdict["action"], verdict["run_id"], verdict["tool_name"])

    def test_one_shot_events_are_never_deduplicated(self, daemon, capsys, run_id):
        """Every `check` is seq 0, so eleven identical invocations are eleven calls: the 11th is warned."""
        for _ in range(10):
            check(capsys, daemon, run_id)

        status, lines = check(capsys, daemon, run_id)

        assert 0 == status
        assert lines[0].startswith("WARN generic_repeat count=10")


class TestRefusals:
    def test_invalid_params_are_rejected_with_exit_2(self, daemon, capsys, run_id):
        """Params that are not JSON are REJECTed by the daemon, named, and exit 2."""
        status = main(["check", "--address", daemon.grpc_target, "--run", run_id, "--tool", "read", "--params", "{oops"])

        lines = capsys.readouterr().out.splitlines()
        assert 2 == status
        assert "REJECT [invalid_params_json]" == lines[0]
        assert "params_json" in lines[1]

    def test_result_and_error_exclude_each_other(self, daemon):
        """--result and --error together are a usage error."""
        result = loopwarden("check", "--address", daemon.grpc_target, "--run", "r", "--tool", "t",
                            "--result", "{}", "--error", "boom")

        assert 2 == result.returncode
        assert "not allowed with argument" in result.stderr

    def test_dead_daemon_exits_2_with_a_hint(self):
        """Nobody listening: exit 2, the address and status, and what to check."""
        address = dead_address()

        result = loopwarden("check", "--address", address, "--run", "r", "--tool", "read")

        assert 2 == result.returncode
        assert "" == result.stdout
        first, hint = result.stderr.splitlines()
        assert first.startswith(f"error: {address}: UNAVAILABLE: ")
        assert hint.startswith("hint: is the daemon running there?")

    def test_unreadable_token_file_is_named(self, daemon, tmp_path):
        """A --token-file that cannot be read is named before anything is sent."""
        missing = tmp_path / "nope"

        result = loopwarden("check", "--address", daemon.grpc_target, "--run", "r", "--tool", "read",
                            "--token-file", str(missing))

        assert 2 == result.returncode
        assert result.stderr.startswith(f"error: --token-file: cannot read {missing}")


class TestAnyClient:
    def test_check_sees_what_the_library_client_sent(self, daemon, run_id):
        """Twenty identical calls and outcomes from the Python client, then `loopwarden check`: BLOCK."""
        with LoopwardenClient(daemon.grpc_target) as client:
            for _ in range(20):
                client.tool_call(run_id, "read", {"path": "/x"})
                client.tool_outcome(run_id, "read", {"path": "/x"}, result_json=RESULT)

        result = loopwarden("check", "--address", daemon.grpc_target, "--run", run_id, "--tool", "read",
                            "--params", PARAMS)

        assert 1 == result.returncode, result.stderr
        assert result.stdout.startswith("BLOCK generic_repeat count=20 decision=")
