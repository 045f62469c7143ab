"""The hook mapping alone: hook inputs as events, verdicts as hook answers (no daemon)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from loopwarden import Action, Verdict
from loopwarden.eventformat import EventKind
from loopwarden.hooks import host, HookPayloadError, answer, parse, unavailable_answer
from loopwarden.hooks.protocol import host_seq

from . import payloads

WARNING = "WARNING: Bash has been called 10 times with identical arguments."
BLOCK = "CRITICAL: exec was called 20 times with identical arguments and identical outcomes."
ABORT = "CRITICAL: exec repeated after a compaction (compaction_loop_persisted)."


def verdict(action: Action, message: str = "", *, announce: bool = False, error_code: str = "") -> Verdict:
    return Verdict(seq=0, run_id="s", action=action, message=message, announce=announce, error_code=error_code,
                   detector="generic_repeat", count=20)


class TestEvents:
    def test_pre_tool_use_is_a_tool_call_of_the_session(self):
        """PreToolUse: run id and session id are the hook's session_id, the call id its tool_use_id."""
        request = parse(host("claude-code"), payloads.claude_pre_tool_use("sess-1", "toolu_1"), agent_id="coder")

        event = request.event
        assert (EventKind.TOOL_CALL, "sess-1", "sess-1", "coder", "Bash", "toolu_1") == (
            event.kind, event.run_id, event.session_id, event.agent_id, event.tool_name, event.tool_call_id)
        assert {"command": payloads.COMMAND, "description": "List the files"} == json.loads(event.params_json)

    def test_post_tool_use_reports_the_tool_response(self):
        event = parse(host("claude-code"), payloads.claude_post_tool_use("s", "toolu_1")).event

        assert (EventKind.TOOL_OUTCOME, payloads.BASH_RESPONSE) == (event.kind, json.loads(event.result_json))

    def test_post_tool_use_failure_reports_the_error(self):
        event = parse(host("claude-code"), payloads.claude_post_tool_use_failure("s", "toolu_1", "exit 1")).event

        assert (EventKind.TOOL_OUTCOME, "exit 1", None) == (event.kind, event.error, event.result_json)

    @pytest.mark.parametrize(("payload", "kind"), [
        (payloads.claude_pre_compact("s"), EventKind.COMPACTION_RETRY),
        (payloads.claude_session_end("s"), EventKind.RUN_END),
    ])
    def test_compaction_and_session_end(self, payload, kind):
        assert kind == parse(host("claude-code"), payload).event.kind

    def test_user_prompt_submit_is_a_user_turn_of_the_session_answered_with_nothing(self):
        request = parse(host("claude-code"), payloads.claude_user_prompt_submit("sess-1", "run it again", "p-2"))

        event = request.event
        assert (EventKind.USER_TURN, "sess-1", "p-2") == (event.kind, event.run_id, event.prompt_id)
        assert "" == parse(host("claude-code"), payloads.claude_user_prompt_submit("sess-1", "x")).event.prompt_id
        for action in ("allow", "abort"):
            verdict = SimpleNamespace(action=action, message="m", announce=True, error_code="tool_loop_persisted")
            assert {} == answer(request, verdict), "a new prompt is never held up"

    @pytest.mark.parametrize(("dialect", "payload"), [
        (host("claude-code"), payloads.claude_session_start("s")),
        (host("codex"), payloads.claude_session_end("s")),  # Codex has no SessionEnd
        (host("claude-code"), {"hook_event_name": "SomethingNew"}),
    ])
    def test_events_loopwarden_does_not_map_ask_nothing(self, dialect, payload):
        assert parse(dialect, payload).event is None

    def test_post_tool_batch_ends_a_batch_and_asks_nothing(self):
        """PostToolBatch: no event to evaluate (its answer is {}), but the end of the session's batch."""
        request = parse(host("claude-code"), payloads.claude_post_tool_batch("sess-1"))

        assert (None, True, "sess-1", "") == (request.event, request.ends_batch, request.session_id, request.subagent)
        assert not parse(host("claude-code"), payloads.claude_pre_tool_use("sess-1", "toolu_1")).ends_batch

    def test_a_subagents_hooks_name_their_subagent(self):
        """Claude Code's agent_id (only inside a subagent): the subagent's turns are batches of their own."""
        pre = parse(host("claude-code"), {**payloads.claude_pre_tool_use("s", "toolu_1"), "agent_id": "sub-1"})
        end = parse(host("claude-code"), {**payloads.claude_post_tool_batch("s"), "agent_id": "sub-1"})

        assert ("sub-1", "sub-1") == (pre.subagent, end.subagent)

    def test_a_call_joins_a_batch(self):
        request = parse(host("claude-code"), payloads.claude_pre_tool_use("s", "toolu_2"))

        assert ("", "toolu_1") == (request.event.batch_id, request.in_batch("toolu_1").event.batch_id)
        with pytest.raises(ValueError, match="before-tool call joins a batch, not PostToolUse"):
            parse(host("claude-code"), payloads.claude_post_tool_use("s", "toolu_2")).in_batch("toolu_1")

    def test_codex_has_no_batch_end(self):
        """Codex has no PostToolBatch: a hook of that name is an event it does not map."""
        request = parse(host("codex"), {**payloads.codex_stop("s"), "hook_event_name": "PostToolBatch"})

        assert (None, False) == (request.event, request.ends_batch)

    def test_codex_events(self):
        """Codex: PreToolUse, PostToolUse (tool_response) and PreCompact map like Claude Code's."""
        kinds = [parse(host("codex"), p).event.kind for p in (
            payloads.codex_pre_tool_use("s", "call_1"), payloads.codex_post_tool_use("s", "call_1"),
            payloads.codex_pre_compact("s"))]

        assert [EventKind.TOOL_CALL, EventKind.TOOL_OUTCOME, EventKind.COMPACTION_RETRY] == kinds

    @pytest.mark.parametrize(("payload", "field"), [
        ([1, 2], "JSON object"),
        ({"session_id": "s"}, "hook_event_name"),
        ({"hook_event_name": "PreToolUse", "tool_name": "Bash"}, "session_id"),
        ({"hook_event_name": "PreToolUse", "session_id": "  ", "tool_name": "Bash"}, "session_id"),
        ({"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": 7}, "tool_name"),
        ({"hook_event_name": "PostToolUseFailure", "session_id": "s", "tool_name": "Bash"}, "error"),
    ])
    def test_malformed_inputs_name_the_field(self, payload, field):
        with pytest.raises(HookPayloadError, match=field):
            parse(host("claude-code"), payload)


class TestAnswers:
    pre = parse(host("claude-code"), payloads.claude_pre_tool_use("s", "toolu_1"))
    codex_pre = parse(host("codex"), payloads.codex_pre_tool_use("s", "call_1"))
    post = parse(host("claude-code"), payloads.claude_post_tool_use("s", "toolu_1"))

    def test_allow_carries_no_permission_decision(self):
        """ALLOW answers nothing at all: the host's own permission rules still apply."""
        assert {} == answer(self.pre, verdict(Action.ALLOW))

    def test_announced_warning_reaches_model_and_user(self):
        assert {"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": WARNING},
                "systemMessage": f"loopwarden: {WARNING}"} == answer(self.pre, verdict(Action.WARN, WARNING,
                                                                                     announce=True))

    def test_unannounced_warning_is_silent(self):
        assert {} == answer(self.pre, verdict(Action.WARN, WARNING, announce=False))

    def test_block_denies_with_the_message(self):
        assert {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                       "permissionDecisionReason": BLOCK}} == answer(self.pre, verdict(Action.BLOCK,
                                                                                                  BLOCK))

    def test_abort_denies_and_stops_the_claude_code_session(self):
        result = answer(self.pre, verdict(Action.ABORT, ABORT, error_code="compaction_loop_persisted"))

        assert (False, ABORT, "deny") == (result["continue"], result["stopReason"],
                                          result["hookSpecificOutput"]["permissionDecision"])

    def test_codex_pre_tool_use_answers_use_only_what_codex_accepts(self):
        """Codex drops a PreToolUse answer with continue, stopReason or suppressOutput (or an allow
        without updatedInput) as invalid, which would run the call: its answers never carry them."""
        for action, message in ((Action.BLOCK, BLOCK), (Action.ABORT, ABORT), (Action.WARN, WARNING)):
            result = answer(self.codex_pre, verdict(action, message, announce=True))

            assert set() == {"continue", "stopReason", "suppressOutput"} & set(result)
            assert "allow" != result.get("hookSpecificOutput", {}).get("permissionDecision")

    def test_abort_after_a_tool_ran_stops_the_session(self):
        assert {"continue": False, "stopReason": ABORT} == answer(self.post, verdict(Action.ABORT, ABORT))

    def test_block_is_reported_as_the_calls_outcome(self):
        """The blocked call's outcome is the blocked result the model got (spec section 6)."""
        outcome = self.pre.blocked_outcome(verdict(Action.BLOCK, BLOCK))

        assert (EventKind.TOOL_OUTCOME, "toolu_1") == (outcome.kind, outcome.tool_call_id)
        assert {"status": "blocked", "deniedReason": "tool-loop", "detector": "generic_repeat", "count": 20} == (
            json.loads(outcome.result_json)["details"])
        assert self.pre.blocked_outcome(verdict(Action.WARN, WARNING)) is None

    def test_a_refused_event_runs_with_the_reason_unless_fail_closed(self):
        """A REJECT judged nothing: not the silent `{}` of an ALLOW."""
        refused = verdict(Action.REJECT, "run_id is 300 characters; the limit is 256", error_code="run_id_too_long")

        opened = answer(self.pre, refused)
        closed = answer(self.pre, refused, fail_closed=True)
        after = answer(self.post, refused, fail_closed=True)

        assert "hookSpecificOutput" not in opened
        assert "run_id_too_long" in opened["systemMessage"] and "without a loop check" in opened["systemMessage"]
        assert "deny" == closed["hookSpecificOutput"]["permissionDecision"]
        assert "run_id_too_long" in closed["hookSpecificOutput"]["permissionDecisionReason"]
        assert "hookSpecificOutput" not in after and "not checked" in after["systemMessage"]

    @pytest.mark.parametrize(("dialect", "body", "denied"), [
        (host("gemini-cli"), "gemini_before_tool",
         lambda out: out["decision"] == "deny" and "json_too_deep" in out["reason"]),
        (host("cursor"), "cursor_pre_tool_use",
         lambda out: out["permission"] == "deny" and "json_too_deep" in out["agent_message"]),
    ])
    def test_a_refused_event_is_denied_in_the_hosts_own_format(self, dialect, body, denied):
        from . import dialect_payloads

        make = getattr(dialect_payloads, body)
        request = parse(dialect, make("s", "tu_1") if dialect is host("cursor") else make("s"))

        assert denied(answer(request, verdict(Action.REJECT, "too deep", error_code="json_too_deep"), fail_closed=True))

    def test_unavailable_runs_the_call_unless_fail_closed(self):
        opened = unavailable_answer(self.pre, "loopwarden is busy", fail_closed=False)
        closed = unavailable_answer(self.pre, "loopwarden is busy", fail_closed=True)

        assert "hookSpecificOutput" not in opened and "loopwarden is busy" in opened["systemMessage"]
        assert "deny" == closed["hookSpecificOutput"]["permissionDecision"]
        assert {} == unavailable_answer(self.post, "loopwarden is busy", fail_closed=True)


class TestSubagents:
    """Claude Code's sub-agents (`agent_id`) are child runs of the session's run."""

    def test_a_subagents_call_is_an_event_of_its_child_run(self):
        request = parse(host("claude-code"), payloads.in_subagent(payloads.claude_pre_tool_use("sess-1", "toolu_1"),
                                                                  "a1", "Explore"), agent_id="coder")

        event = request.event
        assert ("sess-1/a1", "sess-1", "coder", "Explore") == (
            event.run_id, event.parent_run_id, event.agent_id, event.session_id)
        assert "sess-1" == request.root_run_id, "every event of the session is routed by its root"

    def test_the_main_threads_call_is_the_sessions_root_run(self):
        """No agent_id: the session's run, no parent; agent_type alone (claude --agent) changes nothing."""
        body = {**payloads.claude_pre_tool_use("sess-1", "toolu_1"), "agent_type": "reviewer"}
        event = parse(host("claude-code"), body).event

        assert ("sess-1", "", "sess-1") == (event.run_id, event.parent_run_id, event.session_id)

    @pytest.mark.parametrize("build", [
        lambda: payloads.claude_post_tool_use("s", "toolu_1"),
        lambda: payloads.claude_post_tool_use_failure("s", "toolu_1", "exit 1"),
        lambda: payloads.claude_pre_compact("s"),
    ])
    def test_every_event_of_a_subagent_goes_to_its_child_run(self, build):
        event = parse(host("claude-code"), payloads.in_subagent(build(), "a2")).event

        assert ("s/a2", "s") == (event.run_id, event.parent_run_id)

    def test_subagent_start_creates_the_child_without_a_tool_call(self):
        request = parse(host("claude-code"), payloads.claude_subagent_start("s", "a1", "Explore"))

        event = request.event
        assert (EventKind.USER_TURN, "s/a1", "s", "Explore") == (
            event.kind, event.run_id, event.parent_run_id, event.session_id)
        assert {} == answer(request, verdict(Action.ALLOW))

    def test_a_refused_child_is_told_at_its_start(self):
        """tree_too_deep / too_many_children: the sub-agent's start carries the reason to it and the user."""
        request = parse(host("claude-code"), payloads.claude_subagent_start("s", "a1"))

        result = answer(request, verdict(Action.ABORT, "CRITICAL: too many children", error_code="too_many_children"))

        assert {"hookEventName": "SubagentStart",
                "additionalContext": "CRITICAL: too many children"} == result["hookSpecificOutput"]
        assert "continue" not in result, "a refused child never stops the session"

    def test_subagent_stop_judges_the_childs_final_answer_then_ends_the_child_run(self):
        request = parse(host("claude-code"), payloads.claude_subagent_stop("s", "a1"))

        assert (EventKind.MODEL_OUTPUT, "s/a1", "s", "Done.", "final_answer") == (
            request.event.kind, request.event.run_id, request.event.parent_run_id, request.event.text,
            request.event.output_kind)
        (end,) = request.trailing
        assert (EventKind.RUN_END, "s/a1", "s", True) == (end.kind, end.run_id, end.parent_run_id,
                                                        request.ends_subagent)
        assert [EventKind.MODEL_OUTPUT, EventKind.RUN_END] == [event.kind for event in request.events()]

    def test_a_subagent_stop_without_an_answer_only_ends_the_child_run(self):
        request = parse(host("claude-code"), payloads.claude_subagent_stop("s", "a1", message=None))

        assert (EventKind.RUN_END, "s/a1", (), True) == (request.event.kind, request.event.run_id, request.trailing,
                                                        request.ends_subagent)
        assert {} == answer(request, verdict(Action.ALLOW))

    def test_session_end_ends_the_root_even_from_a_subagent(self):
        event = parse(host("claude-code"), payloads.in_subagent(payloads.claude_session_end("s"), "a1")).event

        assert (EventKind.RUN_END, "s", "") == (event.kind, event.run_id, event.parent_run_id)

    @pytest.mark.parametrize("build", [payloads.claude_subagent_start, payloads.claude_subagent_stop])
    def test_a_subagent_hook_without_its_agent_id_names_the_field(self, build):
        with pytest.raises(HookPayloadError, match="agent_id"):
            parse(host("claude-code"), {**build("s", "a1"), "agent_id": " "})

    def test_only_claude_code_and_codex_name_their_subagents(self):
        """Gemini CLI's and Cursor's hooks name no sub-agent: an agent_id there changes nothing."""
        from . import dialect_payloads as p

        assert [True, True, False, False] == [host(name).reports_subagents for name in ("claude-code", "codex", "gemini-cli", "cursor")]
        gemini = parse(host("gemini-cli"), {**p.gemini_before_tool("g"), "agent_id": "a1"}).event
        assert ("g", "") == (gemini.run_id, gemini.parent_run_id)


class TestCodex:
    """Codex's sub-agents, prompts and its missing ask (codex-rs/hooks schemas, hook_runtime.rs)."""

    def test_a_subagents_hooks_are_events_of_its_child_run(self):
        """agent_id (the child thread's id) makes every mapped hook an event of `<session>/<agent_id>`,
        parent the session's run; the child's session_id field carries its agent_type."""
        hooks = [payloads.codex_pre_tool_use("s", "c1"), payloads.codex_post_tool_use("s", "c1"),
                 payloads.codex_pre_compact("s"), payloads.codex_user_prompt_submit("s", "look again")]
        for hook in hooks:
            request = parse(host("codex"), payloads.in_codex_subagent(hook, "th-7", "worker"), agent_id="coder")
            event = request.event
            assert ("s/th-7", "s", "worker", "coder") == (event.run_id, event.parent_run_id, event.session_id,
                                                          event.agent_id), hook["hook_event_name"]
            assert "s" == request.root_run_id, "routed by the tree's root"

    def test_subagent_start_creates_the_child_and_subagent_stop_ends_no_run(self):
        """SubagentStart is a user_turn of the child (no call counted); Codex's SubagentStop ends a
        turn of the sub-agent, which send_input starts again, so it is not the child's run_end."""
        start = parse(host("codex"), payloads.codex_subagent_start("s", "th-7"))

        assert (EventKind.USER_TURN, "s/th-7", "s") == (start.event.kind, start.event.run_id,
                                                        start.event.parent_run_id)
        assert {} == answer(start, verdict(Action.ALLOW))
        stop = parse(host("codex"), payloads.codex_subagent_stop("s", "th-7"))
        # The sub-agent's turn ends on its answer, judged in the child run, which goes on.
        assert (EventKind.MODEL_OUTPUT, "s/th-7", "final_answer", ()) == (
            stop.event.kind, stop.event.run_id, stop.event.output_kind, stop.trailing)

    def test_a_refused_subagent_is_told_in_the_shape_codex_accepts(self):
        """A child past a tree bound: SubagentStart's answer carries the reason as additionalContext
        under hookEventName SubagentStart (subagent-start.command.output)."""
        start = parse(host("codex"), payloads.codex_subagent_start("s", "th-7"))

        out = answer(start, verdict(Action.ABORT, "too many", error_code="too_many_children"))
        assert {"hookEventName": "SubagentStart", "additionalContext": "too many"} == \
            out["hookSpecificOutput"]
        assert set() == {"continue", "stopReason"} & set(out)

    def test_user_prompt_submit_is_a_user_turn_named_by_its_turn_id(self):
        request = parse(host("codex"), payloads.codex_user_prompt_submit("s", "I fixed it, run it again", "turn-9"))

        assert (EventKind.USER_TURN, "s", "", "turn-9") == (request.event.kind, request.event.run_id,
                                                             request.event.parent_run_id, request.event.prompt_id)
        assert {} == answer(request, verdict(Action.ABORT, ABORT)), "a prompt is never held up"

    def test_a_change_of_turn_id_alone_is_no_user_turn(self):
        """Codex has UserPromptSubmit: a tool hook of a new turn is only the call it reports."""
        request = parse(host("codex"), {**payloads.codex_pre_tool_use("s", "c9"), "turn_id": "turn-9"})

        assert EventKind.TOOL_CALL == request.event.kind

    def test_a_deny_tells_the_model_to_ask_the_user(self):
        """Codex cannot ask: a BLOCK (and an ASK, which the engine never gives Codex) is a deny whose
        reason ends with the instruction to ask the user; an ABORT's reason is the abort's."""
        from loopwarden.hooks.protocol import ASK_THE_USER

        pre = parse(host("codex"), payloads.codex_pre_tool_use("s", "c1"))
        for action in (Action.BLOCK, Action.ASK):
            reason = answer(pre, verdict(action, BLOCK))["hookSpecificOutput"]["permissionDecisionReason"]
            assert f"{BLOCK} {ASK_THE_USER}" == reason
        assert "ask the user" in ASK_THE_USER
        assert ABORT == answer(pre, verdict(Action.ABORT, ABORT))["hookSpecificOutput"]["permissionDecisionReason"]

    def test_a_finished_calls_duration_is_carried(self):
        """PostToolUse's duration_ms is ToolOutcome.duration_ms (budgets.toolSecondsPerTree)."""
        assert 12 == parse(host("claude-code"), payloads.claude_post_tool_use("s", "t")).event.duration_ms
        with pytest.raises(HookPayloadError, match="duration_ms"):
            parse(host("claude-code"), {**payloads.claude_post_tool_use("s", "t"), "duration_ms": -1})


ASK = "CRITICAL: Bash was called 20 times with identical arguments. A person must decide whether this call runs."


class TestAsk:
    pre = parse(host("claude-code"), payloads.claude_pre_tool_use("s", "toolu_1"))

    def test_claude_code_calls_accept_ask_and_codex_calls_do_not(self):
        assert self.pre.event.accepts_ask
        assert not parse(host("codex"), payloads.codex_pre_tool_use("s", "c1")).event.accepts_ask
        assert not parse(host("claude-code"), payloads.claude_post_tool_use("s", "toolu_1")).event.accepts_ask

    def test_ask_is_permission_decision_ask_with_the_message(self):
        result = answer(self.pre, verdict(Action.ASK, ASK, announce=True))

        assert {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask",
                                       "permissionDecisionReason": ASK}} == result
        assert self.pre.asked(verdict(Action.ASK, ASK))
        assert not self.pre.asked(verdict(Action.BLOCK, BLOCK))
        assert self.pre.blocked_outcome(verdict(Action.ASK, ASK)) is None, "an asked call is not a blocked one"

    def test_an_ask_where_the_host_cannot_ask_is_a_deny(self):
        codex = parse(host("codex"), payloads.codex_pre_tool_use("s", "c1"))

        assert "deny" == answer(codex, verdict(Action.ASK, ASK))["hookSpecificOutput"]["permissionDecision"]

    def test_the_asked_calls_post_tool_use_is_an_approval_once_ahead_of_its_outcome(self):
        post = parse(host("claude-code"), payloads.in_subagent(payloads.claude_post_tool_use("s", "toolu_1"), "a1"))

        assert True is post.settles_ask
        approval, outcome = post.events(post.approval(True))
        assert (EventKind.APPROVAL, "s/a1", "s", "toolu_1", True, "once") == (
            approval.kind, approval.run_id, approval.parent_run_id, approval.tool_call_id, approval.approved,
            approval.scope)
        assert EventKind.TOOL_OUTCOME == outcome.kind
        assert (outcome,) == post.events(), "without an ask, only the outcome"

    def test_a_failed_asked_call_ran_so_it_was_approved(self):
        assert True is parse(host("claude-code"), payloads.claude_post_tool_use_failure("s", "t", "x")).settles_ask

    def test_permission_denied_is_a_denial_and_nothing_else(self):
        denied = parse(host("claude-code"), payloads.claude_permission_denied("s", "toolu_1"))

        assert (None, False) == (denied.event, denied.settles_ask)
        (approval,) = denied.events(denied.approval(False))
        assert (EventKind.APPROVAL, "s", "toolu_1", False) == (
            approval.kind, approval.run_id, approval.tool_call_id, approval.approved)
        assert () == denied.events()
        assert {} == answer(denied, None)

    def test_other_hooks_settle_nothing(self):
        for body in (payloads.claude_pre_tool_use("s", "t"), payloads.claude_pre_compact("s"),
                     payloads.claude_user_prompt_submit("s", "x")):
            assert parse(host("claude-code"), body).settles_ask is None
        assert parse(host("codex"), payloads.codex_post_tool_use("s", "c1")).settles_ask is None, "Codex never asks"

    def test_the_approval_travels_as_the_contracts_approval_event(self):
        from loopwarden._wire import event_from_record
        from loopwarden.v1 import loopwarden_pb2 as pb

        post = parse(host("claude-code"), payloads.in_subagent(payloads.claude_post_tool_use("s", "toolu_1"), "a1"))
        approval, outcome = (event_from_record(r) for r in post.events(post.approval(True)))
        call = event_from_record(parse(host("claude-code"), payloads.claude_pre_tool_use("s", "t")).event)

        assert ("approval", "toolu_1", True, pb.APPROVAL_SCOPE_ONCE, "s") == (
            approval.WhichOneof("kind"), approval.approval.tool_call_id, approval.approval.approved,
            approval.approval.scope, approval.parent_run_id)
        assert (12, "s") == (outcome.tool_outcome.duration_ms, outcome.parent_run_id)
        assert call.accepts_ask


class TestHostCallIds:
    """A call the host names (tool_use_id) carries a seq of that name: every delivery of one hook
    is the contract's retry of the first, counted once."""

    def test_a_calls_events_carry_one_seq_each_kind_its_own(self):
        pre = parse(host("claude-code"), payloads.claude_pre_tool_use("s", "toolu_1"))
        again = parse(host("claude-code"), payloads.claude_pre_tool_use("s", "toolu_1"))
        post = parse(host("claude-code"), payloads.claude_post_tool_use("s", "toolu_1"))
        other = parse(host("claude-code"), payloads.claude_pre_tool_use("s", "toolu_2"))

        assert pre.event.seq > 0 and pre.event.seq == again.event.seq
        assert len({pre.event.seq, post.event.seq, other.event.seq}) == 3
        assert post.event.seq == host_seq(EventKind.TOOL_OUTCOME, "toolu_1")
        assert pre.approval(True).seq == host_seq(EventKind.APPROVAL, "toolu_1")

    def test_events_of_no_named_call_are_never_deduplicated(self):
        prompt = parse(host("claude-code"), payloads.claude_user_prompt_submit("s", "go", "prompt-1"))
        compact = parse(host("claude-code"), payloads.claude_pre_compact("s"))
        unnamed = parse(host("claude-code"), {**payloads.claude_pre_tool_use("s", "x"), "tool_use_id": ""})

        assert (0, 0, 0) == (prompt.event.seq, compact.event.seq, unnamed.event.seq)

    def test_the_blocked_calls_outcome_is_the_calls(self):
        pre = parse(host("claude-code"), payloads.claude_pre_tool_use("s", "toolu_1"))
        blocked = pre.blocked_outcome(verdict(Action.BLOCK, BLOCK))

        assert host_seq(EventKind.TOOL_OUTCOME, "toolu_1") == blocked.seq
