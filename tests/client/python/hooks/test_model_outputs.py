"""What the model wrote, through every host's hooks (no daemon): Claude Code's and Codex's Stop and
SubagentStop, Gemini CLI's AfterModel and AfterAgent, Cursor's afterAgentResponse,
afterAgentThought and stop, as `model_output` events; and what a verdict on one answers. A stop
hook's "keep going" (Claude Code's and Codex's `decision: "block"`, `additionalContext` at a stop,
Gemini CLI's `decision: "deny"`, Cursor's `followup_message`) is never in an answer."""
from __future__ import annotations

import hashlib

import pytest

from loopwarden import Action, Verdict
from loopwarden.eventformat import EventKind
from loopwarden.hooks import HookPayloadError, answer, host, parse

from . import dialect_payloads as dp
from . import payloads

STOP_LOOP = "CRITICAL: run aborted: a stop hook kept the turn going 3 times with no new tool result (stop_hook_loop)."
REPEATED = "WARNING: you have written the same final answer 3 times in a row with no new tool result in between."
# What keeps a stopping turn going in each host's answer: never loopwarden's.
KEEP_GOING_KEYS = {"decision", "hookSpecificOutput", "followup_message", "reason"}


def verdict(action: Action, message: str = "", *, announce: bool = True, error_code: str = "",
            detector: str = "stop_continuation") -> Verdict:
    return Verdict(seq=0, run_id="s", action=action, message=message, announce=announce, error_code=error_code,
                   detector=detector, count=3)


ABORTED = verdict(Action.ABORT, STOP_LOOP, error_code="stop_hook_loop")
WARNED = verdict(Action.WARN, REPEATED, detector="repeated_output")


class TestClaudeCodeStop:
    def test_stop_is_the_final_answer_with_stop_hook_active(self):
        for active in (False, True):
            request = parse(host("claude-code"), payloads.claude_stop("sess-1", "All done.", stop_hook_active=active),
                            agent_id="coder")
            event = request.event
            assert (EventKind.MODEL_OUTPUT, "sess-1", "coder", "All done.", "", "final_answer", active) == (
                event.kind, event.run_id, event.agent_id, event.text, event.text_digest, event.output_kind,
                event.stop_hook_active)
            assert 0 == event.seq  # no call names it: never taken for a retry of another

    @pytest.mark.parametrize("message", [None, "", "  \n "])
    def test_a_stop_with_no_text_is_not_judged(self, message):
        request = parse(host("claude-code"), payloads.claude_stop("s", message, stop_hook_active=True))

        assert (None, {}) == (request.event, answer(request, None))

    def test_abort_ends_the_session_with_continue_false_never_a_block(self):
        """`decision: "block"` (and `additionalContext`) at a Stop KEEP the session going."""
        request = parse(host("claude-code"), payloads.claude_stop("s", stop_hook_active=True))

        assert {"continue": False, "stopReason": STOP_LOOP} == answer(request, ABORTED)

    def test_an_announced_warning_is_only_shown(self):
        request = parse(host("claude-code"), payloads.claude_stop("s"))

        assert {"systemMessage": f"loopwarden: {REPEATED}"} == answer(request, WARNED)
        assert {} == answer(request, verdict(Action.WARN, REPEATED, announce=False))
        assert {} == answer(request, verdict(Action.ALLOW))

    def test_a_block_on_an_output_is_shown_too_and_keeps_nothing_going(self):
        """The no-tool detectors give WARN or ABORT; a BLOCK from another rule (a budget) has no
        call to refuse."""
        request = parse(host("claude-code"), payloads.claude_stop("s"))

        for action in (Action.BLOCK, Action.ASK):
            assert {"systemMessage": "loopwarden: CRITICAL: over budget"} == answer(
                request, verdict(action, "CRITICAL: over budget", detector="budget"))

    def test_a_refused_output_tells_the_person_it_was_not_checked(self):
        request = parse(host("claude-code"), payloads.claude_stop("s"))

        refused = answer(request, verdict(Action.REJECT, "text too large", error_code="output_text_too_large"))
        assert set(refused) == {"systemMessage"} and "output_text_too_large" in refused["systemMessage"]

    def test_a_text_over_the_daemons_limit_is_sent_as_its_sha256(self):
        text = "x" * 2000
        request = parse(host("claude-code"), payloads.claude_stop("s", text), max_output_bytes=1000)

        assert ("", hashlib.sha256(text.encode()).hexdigest()) == (request.event.text, request.event.text_digest)
        assert ["output_text"] == [reduced.field for reduced in request.reduced]

    def test_stop_hook_active_must_be_a_boolean(self):
        with pytest.raises(HookPayloadError, match="stop_hook_active must be a boolean"):
            parse(host("claude-code"), {**payloads.claude_stop("s"), "stop_hook_active": "yes"})


class TestClaudeCodeSubagentStop:
    def test_a_stuck_subagent_is_ended_and_its_run_kept_while_a_stop_hook_keeps_it_going(self):
        """stop_hook_active: a stop hook keeps the sub-agent going, so its run stays to count the
        continuations (the session's end frees it with the tree)."""
        request = parse(host("claude-code"), payloads.claude_subagent_stop("s", "a1", stop_hook_active=True))

        assert (EventKind.MODEL_OUTPUT, "s/a1", True, (), False) == (
            request.event.kind, request.event.run_id, request.event.stop_hook_active, request.trailing,
            request.ends_subagent)
        assert {"continue": False, "stopReason": STOP_LOOP} == answer(request, ABORTED)
        assert {} == answer(request, verdict(Action.ALLOW))


class TestCodex:
    def test_stop_and_a_subagents_stop_are_final_answers(self):
        stop = parse(host("codex"), payloads.codex_stop("s", "Done.", stop_hook_active=True)).event
        sub = parse(host("codex"), payloads.in_codex_subagent(payloads.codex_subagent_stop("s", "th-1"), "th-1")).event

        assert (EventKind.MODEL_OUTPUT, "s", "Done.", True) == (stop.kind, stop.run_id, stop.text,
                                                               stop.stop_hook_active)
        assert (EventKind.MODEL_OUTPUT, "s/th-1", "s") == (sub.kind, sub.run_id, sub.parent_run_id)

    def test_a_null_last_message_is_not_judged(self):
        assert parse(host("codex"), payloads.codex_stop("s", None)).event is None

    def test_answers_use_only_what_codexs_stop_output_takes(self):
        """stop.command.output: continue, stopReason, systemMessage, decision/reason; no
        hookSpecificOutput (additionalProperties: false)."""
        request = parse(host("codex"), payloads.codex_stop("s", stop_hook_active=True))

        assert {"continue": False, "stopReason": STOP_LOOP} == answer(request, ABORTED)
        assert {"systemMessage": f"loopwarden: {REPEATED}"} == answer(request, WARNED)

    def test_a_compaction_storms_abort_stops_at_precompact(self):
        """pre-compact.command.output takes continue/stopReason, and Codex honours them."""
        request = parse(host("codex"), payloads.codex_pre_compact("s"))
        storm = verdict(Action.ABORT, "CRITICAL: compaction storm", error_code="compaction_storm",
                        detector="compaction_storm")

        assert {"continue": False, "stopReason": "CRITICAL: compaction storm"} == answer(request, storm)


class TestGeminiCli:
    def test_after_model_is_a_message_of_the_chunks_text(self):
        event = parse(host("gemini-cli"), dp.gemini_after_model("g", "Working on it.", thought="Hmm.")).event

        assert (EventKind.MODEL_OUTPUT, "g", "Working on it.", "message", False) == (
            event.kind, event.run_id, event.text, event.output_kind, event.stop_hook_active)

    def test_a_chunk_of_no_text_is_not_judged(self):
        request = parse(host("gemini-cli"), dp.gemini_after_model("g", None, thought="Thinking."))

        assert (None, {}) == (request.event, answer(request, None))

    def test_after_model_without_a_response_names_the_field(self):
        body = dp.gemini_after_model("g")
        del body["llm_response"]
        with pytest.raises(HookPayloadError, match="llm_response"):
            parse(host("gemini-cli"), body)

    def test_after_agent_is_the_final_answer_with_stop_hook_active(self):
        event = parse(host("gemini-cli"), dp.gemini_after_agent("g", "All done.", stop_hook_active=True)).event

        assert (EventKind.MODEL_OUTPUT, "All done.", "final_answer", True) == (
            event.kind, event.text, event.output_kind, event.stop_hook_active)

    @pytest.mark.parametrize("build", [dp.gemini_after_model, dp.gemini_after_agent])
    def test_abort_stops_the_agent_loop_and_a_warning_is_shown(self, build):
        request = parse(host("gemini-cli"), build("g"))

        assert {"continue": False, "stopReason": STOP_LOOP} == answer(request, ABORTED)
        assert {"systemMessage": f"loopwarden: {REPEATED}"} == answer(request, WARNED)


class TestCursor:
    @pytest.mark.parametrize(("build", "kind"), [(dp.cursor_after_agent_response, "message"),
                                                 (dp.cursor_after_agent_thought, "thought")])
    def test_responses_and_thoughts_are_model_outputs_whose_answers_cursor_does_not_read(self, build, kind):
        request = parse(host("cursor"), build("c", "Let me look."))

        assert (EventKind.MODEL_OUTPUT, "c", "Let me look.", kind) == (
            request.event.kind, request.event.run_id, request.event.text, request.event.output_kind)
        assert {} == answer(request, ABORTED) == answer(request, WARNED)

    def test_stop_is_a_final_answer_named_by_its_generation_active_after_a_follow_up(self):
        first = parse(host("cursor"), dp.cursor_stop("c", 0, "gen-1")).event
        again = parse(host("cursor"), dp.cursor_stop("c", 2, "gen-3")).event

        assert (EventKind.MODEL_OUTPUT, "", "cursor-generation:gen-1", "final_answer", False) == (
            first.kind, first.text, first.text_digest, first.output_kind, first.stop_hook_active)
        assert ("cursor-generation:gen-3", True) == (again.text_digest, again.stop_hook_active)

    def test_stop_answers_nothing_a_follow_up_would_keep_the_loop_going(self):
        request = parse(host("cursor"), dp.cursor_stop("c", 3, "gen-4"))

        assert {} == answer(request, ABORTED) == answer(request, WARNED)

    @pytest.mark.parametrize("loops", [-1, "2", 1.5, True])
    def test_a_bad_loop_count_is_named(self, loops):
        with pytest.raises(HookPayloadError, match="loop_count"):
            parse(host("cursor"), dp.cursor_stop("c", loops))


@pytest.mark.parametrize(("name", "payload"), [
    ("claude-code", payloads.claude_stop("s", stop_hook_active=True)),
    ("claude-code", payloads.claude_subagent_stop("s", "a1", stop_hook_active=True)),
    ("codex", payloads.codex_stop("s", stop_hook_active=True)),
    ("gemini-cli", dp.gemini_after_agent("s", stop_hook_active=True)),
    ("gemini-cli", dp.gemini_after_model("s")),
    ("cursor", dp.cursor_stop("s", 1, "gen-2")),
    ("cursor", dp.cursor_after_agent_response("s")),
])
def test_no_answer_to_what_the_model_wrote_ever_keeps_a_turn_going(name, payload):
    request = parse(host(name), payload)

    for action in Action:
        out = answer(request, verdict(action, "CRITICAL: message", error_code="stop_hook_loop"))
        assert not KEEP_GOING_KEYS & set(out), (action, out)
