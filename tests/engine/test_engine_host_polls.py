"""Host poll presets (default-on, docs/extensions.md "Host polls"): Codex `write_stdin` with empty
input, Claude Code's `TaskOutput` / `BashOutput`, MCP `tasks/get`. Under the reference defaults
(W 10, C 20) a poll whose output never changes is warned, then blocked at call 21; one whose
output changes is never warned."""
import pytest

from tests.engine.driver import A, D, NO_DETECTOR, Run

CODEX_POLL = {"session_id": 7, "chars": "", "yield_time_ms": 5000}


def codex_answer(i: int, output: str = "") -> dict:
    """What Codex's unified exec returns: the wall time and chunk id differ on every call."""
    return {"chunk_id": f"c{i:04x}", "wall_time_seconds": 5.0 + i / 100, "session_id": 7,
            "original_token_count": 0, "output": output}


def test_codex_polls_with_unchanged_output_are_warned_then_blocked_by_call_21():
    run = Run()
    seen = []
    for i in range(21):
        verdict = run.call("write_stdin", CODEX_POLL)
        seen.append((verdict.action, verdict.detector, verdict.count))
        if verdict.action in (A.allow, A.warn):
            run.outcome("write_stdin", CODEX_POLL, codex_answer(i))
    assert seen[:10] == [(A.allow, NO_DETECTOR, 0)] * 10
    assert seen[10] == (A.warn, D.known_poll_no_progress, 10)
    assert seen[20] == (A.block, D.known_poll_no_progress, 20)
    blocked = run.call("write_stdin", CODEX_POLL)
    assert "yield_time_ms 300000" in blocked.message and "vary" not in blocked.message


def test_codex_polls_whose_output_changes_are_never_warned():
    run = Run()
    for i in range(40):
        verdict = run.call("write_stdin", {"session_id": 7})  # `chars` absent: a poll too
        assert verdict.action == A.allow, i
        run.outcome("write_stdin", {"session_id": 7}, codex_answer(i, f"step {i}\n"))


def test_codex_text_answers_drop_their_header_bookkeeping():
    run = Run()
    for i in range(11):
        verdict = run.call("write_stdin", CODEX_POLL)
        text = f"Chunk ID: {i:x}\nWall time: {5 + i / 10} seconds\nProcess running with session ID 7\nOutput:\n"
        run.outcome("write_stdin", CODEX_POLL, {"content": [{"type": "text", "text": text}]})
    assert (verdict.action, verdict.detector, verdict.count) == (A.warn, D.known_poll_no_progress, 10)


@pytest.mark.parametrize(("tool", "params", "answer"), [
    ("TaskOutput", {"task_id": "t1", "block": False, "timeout": 1000}, "<status>running</status>"),
    ("BashOutput", {"bash_id": "b1"}, "<status>running</status>\n<timestamp>{i}</timestamp>"),
    ("tasks/get", {"taskId": "x"}, {"taskId": "x", "status": "working"}),
])
def test_claude_code_and_mcp_task_polls_are_known_polls(tool, params, answer):
    run = Run()
    for i in range(20):
        verdict = run.call(tool, params)
        run.outcome(tool, params, answer.format(i=i) if isinstance(answer, str) else answer)
    assert (verdict.action, verdict.detector) == (A.warn, D.known_poll_no_progress)
    blocked = run.call(tool, params)
    assert (blocked.action, blocked.detector, blocked.count) == (A.block, D.known_poll_no_progress, 20)
    assert "make one " in blocked.message


def test_write_stdin_with_input_is_generic_repeats_to_judge():
    run = Run()
    params = {"session_id": 7, "chars": "y\n"}
    for _ in range(10):
        run.done("write_stdin", params, {"output": ""})
    verdict = run.call("write_stdin", params)
    assert (verdict.action, verdict.detector, verdict.count) == (A.warn, D.generic_repeat, 10)
