"""The host's own words, through the real daemon's Claude Code hook endpoint:
the model reads "Bash has been called 10 times", not OpenClaw's alias `exec`, and InspectRun
shows `Bash`, while matching still folds the alias (a `Bash` call and an `exec` call of the same
command are one loop, and keys and argument hashes keep the normalised name)."""
from __future__ import annotations

import signal

import pytest

from loopwarden import LoopwardenClient
from tests.client.python.hooks import payloads
from tests.support.daemon import running_daemon
from tests.e2e.test_hooks_http import claude_loop
from tests.e2e.test_hooks_http import daemon_args, send  # noqa: F401 - the hook tests' shared fixtures

pytestmark = pytest.mark.daemon

ENABLED = "{tools: {loopDetection: {enabled: true}}}"


def test_a_bash_loop_is_named_bash_in_the_warning_the_block_and_inspect_run(send, client, run_id):
    answers = claude_loop(send, run_id)  # 21 identical Bash calls: 11 warned, 21 denied

    warning = answers[10]["hookSpecificOutput"]["additionalContext"]
    assert warning.startswith("WARNING: Bash has been called 10 times with identical arguments."), warning
    assert "exec" not in warning
    reason = answers[20]["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason.startswith("CRITICAL: Bash was called 20 times with identical arguments"), reason

    records = client.inspect(run_id).records
    assert {"Bash"} == {r.tool_name for r in records}
    assert all(r.args_hash.startswith("exec:") for r in records), "argument hashes fold the alias"


def test_a_loop_spelled_two_ways_is_one_loop_named_as_the_current_call_spells_it(send, client, run_id):
    """Ten Bash calls through the hook, then the same command as `exec` over gRPC: the eleventh
    call is the loop's warning, and it names `exec`, the spelling of the call it answers."""
    for index in range(10):
        assert {} == send(payloads.claude_pre_tool_use(run_id, f"toolu_{index}"))
        assert {} == send(payloads.claude_post_tool_use(run_id, f"toolu_{index}"))
    params = payloads.claude_pre_tool_use(run_id, "x")["tool_input"]

    verdict = client.tool_call(run_id, "exec", params, tool_call_id="call_exec")

    assert ("warn", "generic_repeat", 10) == (verdict.action.value, verdict.detector, verdict.count)
    assert verdict.message.startswith("WARNING: exec has been called 10 times"), verdict.message
    assert "exec" == verdict.tool_name
    assert verdict.warning_key.startswith("generic:exec:"), "keys keep the normalised name"
    assert ["Bash"] * 10 + ["exec"] == [r.tool_name for r in client.inspect(run_id).records]


def test_a_records_spelling_survives_a_restart_through_the_state_file(tmp_path):
    """The state record keeps each record's spelling (the optional history key `spellings`): after
    a graceful restart InspectRun still shows `Bash`, and the loop goes on under the folded name."""
    path = tmp_path / "runs.state"
    params = payloads.claude_pre_tool_use("restart", "x")["tool_input"]
    with running_daemon(ENABLED, ["--state-store", f"file:{path}"]) as daemon:
        with LoopwardenClient(daemon.grpc_target) as client:
            for index in range(5):
                client.tool_call("restart-1", "Bash", params, tool_call_id=f"c{index}")
                client.tool_outcome("restart-1", "Bash", params, result=payloads.BASH_RESPONSE, tool_call_id=f"c{index}")
        daemon.signal(signal.SIGTERM)
        assert 0 == daemon.process.wait(timeout=15)

    with running_daemon(ENABLED, ["--state-store", f"file:{path}"]) as daemon:
        with LoopwardenClient(daemon.grpc_target) as client:
            assert ["Bash"] * 5 == [r.tool_name for r in client.inspect("restart-1").records]
            for index in range(5, 10):
                client.tool_call("restart-1", "exec", params, tool_call_id=f"c{index}")
                client.tool_outcome("restart-1", "exec", params, result=payloads.BASH_RESPONSE, tool_call_id=f"c{index}")
            verdict = client.tool_call("restart-1", "Bash", params, tool_call_id="c10")
            records = client.inspect("restart-1").records
    assert ("warn", 10) == (verdict.action.value, verdict.count), "one loop across the restart and both spellings"
    assert verdict.message.startswith("WARNING: Bash has been called 10 times"), verdict.message
    assert ["Bash"] * 5 + ["exec"] * 5 + ["Bash"] == [r.tool_name for r in records]
