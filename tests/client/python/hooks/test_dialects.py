"""Gemini CLI's and Cursor's hook mapping alone (no daemon): their inputs as events, verdicts in
their own output formats."""
from __future__ import annotations

import json

import pytest

from loopwarden import Action, Verdict
from loopwarden.eventformat import EventKind
from loopwarden.hooks import host, HookPayloadError, answer, parse, unavailable_answer
from loopwarden.hooks.protocol import ASK_THE_USER, unchecked_answer

from . import dialect_payloads as p

WARNING = "WARNING: run_shell_command has been called 10 times with identical arguments."
BLOCK = "CRITICAL: run_shell_command was called 20 times with identical arguments and identical outcomes."


def verdict(action: Action, message: str = "", *, announce: bool = False, error_code: str = "") -> Verdict:
    return Verdict(seq=0, run_id="s", action=action, message=message, announce=announce, error_code=error_code,
                   detector="generic_repeat", count=20)


class TestGeminiCliEvents:
    def test_before_tool_is_a_tool_call_that_cannot_be_asked(self):
        event = parse(host("gemini-cli"), p.gemini_before_tool("g-1"), agent_id="coder").event

        assert (EventKind.TOOL_CALL, "g-1", "coder", p.GEMINI_SHELL, False) == (
            event.kind, event.run_id, event.agent_id, event.tool_name, event.accepts_ask)
        assert p.GEMINI_INPUT == json.loads(event.params_json)

    def test_after_tool_reports_what_the_model_reads(self):
        event = parse(host("gemini-cli"), p.gemini_after_tool("g-1")).event

        assert (EventKind.TOOL_OUTCOME, "total 0\n", None) == (event.kind, json.loads(event.result_json), event.error)

    @pytest.mark.parametrize("pgid", ["48211", "48377"])
    def test_a_shell_outcome_leaves_out_the_process_ids_gemini_appends(self, pgid):
        """Gemini CLI's shell tool ends what the model reads with the call's process group (and any
        background PIDs), new every call (packages/core/src/tools/shell.ts): they are left out, so
        two runs of one command are one outcome; the output itself is kept whole."""
        content = f"Output: looping\nProcess Group PGID: 4242 (printed)\nBackground PIDs: 7, 9\nProcess Group PGID: {pgid}"
        response = {"llmContent": content, "returnDisplay": "looping"}
        event = parse(host("gemini-cli"), p.gemini_after_tool("g-1", response)).event

        assert "Output: looping\nProcess Group PGID: 4242 (printed)" == json.loads(event.result_json)

    def test_the_ids_go_inside_gemini_s_untrusted_context_wrapper_too(self):
        wrapped = "<untrusted_context>\nOutput: looping\nProcess Group PGID: {}\n</untrusted_context>"
        results = [json.loads(parse(host("gemini-cli"), p.gemini_after_tool(
            "g-1", {"llmContent": wrapped.format(pgid), "returnDisplay": ""})).event.result_json) for pgid in (5, 6)]

        assert ["<untrusted_context>\nOutput: looping\n</untrusted_context>"] * 2 == results

    def test_another_tool_s_outcome_keeps_such_lines(self):
        response = {"llmContent": "pid list\nProcess Group PGID: 12", "returnDisplay": ""}
        body = {**p.gemini_after_tool("g-1", response), "tool_name": "read_file"}

        assert "pid list\nProcess Group PGID: 12" == json.loads(parse(host("gemini-cli"), body).event.result_json)

    def test_after_tool_with_an_error_reports_the_error(self):
        response = {"llmContent": "failed", "returnDisplay": "failed",
                    "error": {"type": "execution_failed", "message": "Unknown tool: deploy_app"}}
        event = parse(host("gemini-cli"), p.gemini_after_tool("g-1", response)).event

        assert (EventKind.TOOL_OUTCOME, "Unknown tool: deploy_app") == (event.kind, event.error)

    @pytest.mark.parametrize(("payload", "kind"), [
        (p.gemini_before_agent("g"), EventKind.USER_TURN),
        (p.gemini_session_end("g"), EventKind.RUN_END),
    ])
    def test_lifecycle_events(self, payload, kind):
        assert kind == parse(host("gemini-cli"), payload).event.kind

    @pytest.mark.parametrize("payload", [{"hook_event_name": "BeforeModel", "session_id": "g"},
                                         p.gemini_pre_compress("g")])
    def test_events_loopwarden_does_not_read_have_no_event(self, payload):
        """PreCompress among them: 0.61.0 fires it before every model request, compaction or not."""
        request = parse(host("gemini-cli"), payload)

        assert (None, {}) == (request.event, answer(request, None))

    def test_a_missing_session_id_is_named(self):
        body = p.gemini_before_tool("g")
        del body["session_id"]
        with pytest.raises(HookPayloadError, match="session_id"):
            parse(host("gemini-cli"), body)


class TestGeminiCliAnswers:
    def request(self):
        return parse(host("gemini-cli"), p.gemini_before_tool("g"))

    def test_allow_is_empty(self):
        assert {} == answer(self.request(), verdict(Action.ALLOW))

    def test_block_is_decision_deny_with_the_reason_and_the_question_for_the_user(self):
        """Gemini CLI cannot ask (its input names no call): the deny tells the model to ask the user."""
        assert {"decision": "deny", "reason": f"{BLOCK} {ASK_THE_USER}"} == answer(self.request(),
                                                                                  verdict(Action.BLOCK, BLOCK))

    def test_an_announced_warning_tells_the_user_and_passes_the_context(self):
        assert {"hookSpecificOutput": {"additionalContext": WARNING}, "systemMessage": f"loopwarden: {WARNING}"} \
            == answer(self.request(), verdict(Action.WARN, WARNING, announce=True))

    def test_abort_denies_and_stops_the_agent_loop(self):
        out = answer(self.request(), verdict(Action.ABORT, "stop", error_code="compaction_loop_persisted"))

        # The message is the text (guard_policy.abort_text); the engine's abort messages name their code.
        assert ("deny", False, "stop") == (out["decision"], out["continue"], out["stopReason"])

    def test_abort_after_a_tool_stops_the_agent_loop(self):
        out = answer(parse(host("gemini-cli"), p.gemini_after_tool("g")), verdict(Action.ABORT, "stop"))

        assert {"continue": False, "stopReason": "stop"} == out

    def test_daemon_down(self):
        assert {"systemMessage": "loopwarden: down; this call ran without a loop check."} == unavailable_answer(
            self.request(), "down", fail_closed=False)
        closed = unavailable_answer(self.request(), "down", fail_closed=True)
        assert "deny" == closed["decision"] and "fail closed" in closed["reason"]

    def test_too_large_before_tool_is_denied_when_fail_closed(self):
        assert "deny" == unchecked_answer(host("gemini-cli"), "BeforeTool", "big", fail_closed=True)["decision"]
        assert "systemMessage" in unchecked_answer(host("gemini-cli"), "AfterTool", "big", fail_closed=True)


class TestCursorEvents:
    def test_pre_tool_use_is_a_tool_call_that_can_be_asked(self):
        event = parse(host("cursor"), p.cursor_pre_tool_use("c-1", "tu-1")).event

        assert (EventKind.TOOL_CALL, "c-1", p.CURSOR_SHELL, "tu-1", True) == (
            event.kind, event.run_id, event.tool_name, event.tool_call_id, event.accepts_ask)

    def test_before_shell_execution_is_the_same_call_as_the_generic_hook(self):
        """The shell pair names no tool: it is Cursor's Shell tool with the command as its input,
        so both hook families hash one command alike. It names no call, so it is never asked."""
        shell = parse(host("cursor"), p.cursor_before_shell_execution("c")).event
        generic = parse(host("cursor"), p.cursor_pre_tool_use("c", "tu")).event

        assert (shell.tool_name, shell.params_json, False) == (generic.tool_name, generic.params_json,
                                                               shell.accepts_ask)

    def test_mcp_tool_input_sent_as_json_text_is_read_as_the_object(self):
        event = parse(host("cursor"), p.cursor_before_mcp_execution("c")).event

        assert ("get_issue", {"owner": "acme", "repo": "app", "number": 7}) == (
            event.tool_name, json.loads(event.params_json))

    def test_post_tool_use_and_failure_are_outcomes(self):
        ok = parse(host("cursor"), p.cursor_post_tool_use("c", "tu")).event
        failed = parse(host("cursor"), p.cursor_post_tool_use_failure("c", "tu", "exit 1")).event

        assert (EventKind.TOOL_OUTCOME, json.loads(p.CURSOR_OUTPUT), 12) == (
            ok.kind, json.loads(ok.result_json), ok.duration_ms)
        assert (EventKind.TOOL_OUTCOME, "exit 1") == (failed.kind, failed.error)

    @pytest.mark.parametrize(("payload", "kind"), [
        (p.cursor_pre_compact("c"), EventKind.COMPACTION_RETRY),
        (p.cursor_before_submit_prompt("c"), EventKind.USER_TURN),
        (p.cursor_session_end("c"), EventKind.RUN_END),
    ])
    def test_lifecycle_events(self, payload, kind):
        assert kind == parse(host("cursor"), payload).event.kind


    def test_a_missing_conversation_id_is_named(self):
        body = p.cursor_pre_tool_use("c", "tu")
        del body["conversation_id"]
        with pytest.raises(HookPayloadError, match="conversation_id"):
            parse(host("cursor"), body)

    def test_a_post_tool_use_settles_an_ask_of_its_call(self):
        assert parse(host("cursor"), p.cursor_post_tool_use("c", "tu")).settles_ask is True
        assert parse(host("gemini-cli"), p.gemini_after_tool("g")).settles_ask is None


class TestCursorAnswers:
    def request(self):
        return parse(host("cursor"), p.cursor_pre_tool_use("c", "tu"))

    def test_allow_is_empty_never_permission_allow(self):
        assert {} == answer(self.request(), verdict(Action.ALLOW))

    def test_block_is_permission_deny(self):
        assert {"permission": "deny", "agent_message": BLOCK, "user_message": f"loopwarden: {BLOCK}"} == answer(
            self.request(), verdict(Action.BLOCK, BLOCK))

    def test_ask_is_permission_ask(self):
        assert "ask" == answer(self.request(), verdict(Action.ASK, BLOCK))["permission"]

    @pytest.mark.parametrize("action", [Action.ASK, Action.BLOCK])
    def test_a_deny_on_the_shell_hook_tells_the_model_to_ask_the_user(self, action):
        """beforeShellExecution names no call, so it cannot ask: its denials carry the question."""
        shell = parse(host("cursor"), p.cursor_before_shell_execution("c"))

        out = answer(shell, verdict(action, BLOCK))
        assert ("deny", f"{BLOCK} {ASK_THE_USER}") == (out["permission"], out["agent_message"])

    def test_an_announced_warning_reaches_model_and_user(self):
        assert {"agent_message": WARNING, "user_message": f"loopwarden: {WARNING}"} == answer(
            self.request(), verdict(Action.WARN, WARNING, announce=True))

    def test_abort_denies_the_call(self):
        out = answer(self.request(), verdict(Action.ABORT, "stop", error_code="compaction_loop_persisted"))

        assert "deny" == out["permission"] and "continue" not in out

    def test_abort_after_a_tool_is_context_for_the_model(self):
        out = answer(parse(host("cursor"), p.cursor_post_tool_use("c", "tu")), verdict(Action.ABORT, "stop"))

        assert {"additional_context": "stop"} == out

    def test_daemon_down(self):
        assert {"user_message": "loopwarden: down; this call ran without a loop check."} == unavailable_answer(
            self.request(), "down", fail_closed=False)
        assert "deny" == unavailable_answer(self.request(), "down", fail_closed=True)["permission"]

    def test_too_large(self):
        assert "deny" == unchecked_answer(host("cursor"), "beforeShellExecution", "big", fail_closed=True)["permission"]
        assert "additional_context" in unchecked_answer(host("cursor"), "postToolUse", "big", fail_closed=True)
