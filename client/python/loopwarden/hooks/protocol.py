"""Agent hook inputs <-> loopwarden events and verdicts, for every host in `hooks/hosts/`.

Pure mapping, shared by the daemon's HTTP endpoints (`POST /v1/hooks/NAME`) and the command form
(`loopwarden hook NAME`): `parse` reads one hook input, through its host's module, into the event
to evaluate; `answer` turns the verdict into the hook's JSON output. What differs between hosts
(field names, answer formats, what each can do) is the host module's (hooks/host.py is the
interface); what a hook *means* is written here once, by stage:

- a tool call about to run (`Stage.BEFORE_TOOL`) is a `tool_call`; a call that ran is its
  `tool_outcome` (its result, or its error); a compaction is a `compaction_retry`;
- what the model wrote is a `model_output`: a message or a thought (`Stage.MODEL_OUTPUT`), or the
  final answer a turn is about to end on (`Stage.STOP`, a stop hook, with `stop_hook_active` when
  a stop hook already kept the turn going). Its verdict can only be shown or end the session
  (guard_policy.decide_output): a stop hook's "keep going" (Claude Code's `decision: "block"`,
  Gemini CLI's AfterAgent deny, Cursor's followup_message) is never loopwarden's answer, and
  neither is context at a stop (Claude Code continues the turn to deliver it);
- a new prompt (`Stage.USER_PROMPT`; the prompt's id is carried along) is a `user_turn` of the
  session's run: the run starts fresh for loop detection, so a call blocked before the prompt runs
  again after it. Its answer is always empty (loopwarden never holds up a prompt; an aborted run's
  next tool call is still denied);
- the end of a model turn's calls (`Stage.BATCH_END`) is no event to evaluate but the end of a
  parallel batch: grouping the calls of one batch under one `ToolCall.batch_id` needs state across
  hooks, so it is the caller's job (loopwarden_server.hook_batches), not this stateless mapping's.
  `HookRequest.session_id` and `.subagent` say whose batch a hook is in.

Sub-agents are child runs (run trees): a hook input naming a sub-agent (`HookInput.subagent`, a
host that `reports_subagents`) is an event of the run `<session_id>/<agent_id>` (`child_run_id`)
whose `parent_run_id` is the session's run, so each sub-agent keeps its own history and a stuck one
warns its parent (`child_stopped`). The child's `session_id` field (logs and inspection only)
carries the sub-agent's type, the one thing its run id does not say; the config agent stays the
hook's (`?agent=` / `--agent`) for the whole tree. `Stage.SUBAGENT_START` creates the child (a
`user_turn` of it: no tool call counted) and `Stage.SUBAGENT_STOP` ends it (`run_end`); both are
answered empty. Every event of a session is routed by the tree's root, the session's run
(`HookRequest.root_run_id`). A `Stage.SUBAGENT_STOP` carrying the sub-agent's final answer is its
`model_output` first, then the `run_end` (`HookRequest.trailing`), except while a stop hook keeps
the sub-agent going (`stop_hook_active`): its run then stays, so that the continuations are
counted, and the session's end ends it with the tree.

ASK: a host that `can_ask` holds a call for the person; its before-tool events carry
`accepts_ask`, and an ASK verdict is answered with the host's ask and the verdict's message. Every
denial of a call that could not be asked ends with ASK_THE_USER, which tells the model to put the
question to the person; the person's reply is a new prompt, a user turn that lifts the block. The
person's answer to an ask is no hook of its own: the asked call's later outcome (it ran) means
"approved once", and `Stage.PERMISSION_DENIED` "denied". Many denials reach no hook (a headless
session's unanswerable ask, an interactive "No"), so an ask the run has visibly moved on from (its
batch ended, the same call asked again, a new prompt) is declined too. Which calls were asked needs
memory across hooks, so the hook driver keeps it (hooks/driver.py, over the caller's asked-call
store) and asks `HookRequest.approval` and `HookRequest.declined` for the events to send ahead of
the hook's own.

Every host:

- runs the call unless a hook denies it, so an ALLOW answers with the empty reply: loopwarden
  never says "allow", which would skip the host's own permission rules and prompts;
- shows context to the model and a note to the person, which is how an announced warning reaches
  both (unannounced warnings stay silent: spec section 6);
- takes a deny with its reason as a denied call whose reason the model reads: that is a BLOCK, and
  the blocked call is reported as its own outcome, as the tool guard does;
- ends the session on an ABORT where it can (`stops_before_tool`); where it cannot, an ABORT before
  a tool only denies the call, every later call of the run is denied the same way, and the
  after-tool hook that reports the loop's outcome stops the session.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..daemon_limits import MAX_OUTPUT_TEXT_BYTES, MAX_PARAMS_BYTES, MAX_RESULT_BYTES
from ..eventformat import EventKind, EventRecord, json_text
from ..guard_policy import VerdictView, abort_text, decide, decide_output
from .host import HookHost, HookInput, HookPayloadError, Reply, Stage
from .reduction import Reduction, bounded_json, bounded_text

INTEGRATION_HEADER = "x-loopwarden-integration"
# Appended to every denial (BLOCK, or an ASK, which the engine gives such events as the BLOCK) of a
# call whose hook cannot ask the person: the model is told to put the question to the person
# itself. Their reply is a new prompt, a user turn, which lifts the block for the same call.
ASK_THE_USER = ("If this call still has to run, ask the user whether it should, and try it again only after "
                "they reply.")


class VerdictLike(VerdictView, Protocol):
    """What `answer` reads of a verdict: what the guard policy reads, and what the blocked result
    names. Read-only members, so a frozen dataclass's fields satisfy them."""

    @property
    def detector(self) -> str: ...  # these two: the blocked result (runner.blocked_tool_result)
    @property
    def count(self) -> int: ...


# Stages after which an asked call is settled: it ran (the person approved it), or it was denied.
_SETTLES_ASK = {Stage.AFTER_TOOL: True, Stage.TOOL_FAILED: True, Stage.PERMISSION_DENIED: False}
_TOOL_STAGES = (Stage.BEFORE_TOOL, Stage.AFTER_TOOL, Stage.TOOL_FAILED, Stage.PERMISSION_DENIED)


def host_seq(kind: EventKind, tool_use_id: str) -> int:
    """The seq of an event of a call the host names (`tool_use_id`): the call, its outcome, the
    approval of its ask. Every delivery of one host event carries the same seq and
    the same content, which is the contract's retry: Claude Code running both the plugin's hooks
    and the ones `install-hooks` wrote, Cursor running Claude Code's hooks beside its own, or a hook
    retried after a timeout is answered with the first delivery's verdict and counted once. 0 (no
    dedup) for an event of no named call: a prompt's id is no such name (Codex keeps a turn's id for
    a prompt that steers the running turn, a new user turn all the same), and a user turn delivered
    twice only starts the run fresh twice."""
    if not tool_use_id:
        return 0
    digest = hashlib.blake2b(f"{kind.value}\0{tool_use_id}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") or 1


def child_run_id(session_id: str, agent_id: str) -> str:
    """The run of a sub-agent: a child of the session's run."""
    return f"{session_id}/{agent_id}"


@dataclass(frozen=True, slots=True)
class HookRun:
    """The run a hook belongs to: the session's, or a sub-agent's child run of it."""

    run_id: str
    parent_run_id: str = ""
    agent_id: str = ""  # the config agent (the hook's ?agent= / --agent)
    session_id: str = ""  # Event.session_id: the session id; a sub-agent's agent_type

    def event(self, kind: EventKind, **fields: Any) -> EventRecord:
        seq = host_seq(kind, fields.get("tool_call_id", ""))
        return EventRecord(kind, run_id=self.run_id, parent_run_id=self.parent_run_id, agent_id=self.agent_id,
                           session_id=self.session_id, seq=seq, **fields)


@dataclass(frozen=True, slots=True)
class HookRequest:
    """One hook input, read: the event to evaluate (None: an event loopwarden does not evaluate,
    which gets the empty answer). `session_id` and `subagent` (present only inside a sub-agent,
    whose turns are batches of their own) say whose batch the hook is in."""

    host: HookHost
    hook_event_name: str  # the host's own name of the hook event
    stage: Stage | None = None  # None: an event loopwarden does not read
    event: EventRecord | None = None
    session_id: str = ""
    subagent: str = ""
    run: HookRun | None = None  # the run of the hook's event (None: a hook of no run)
    tool_call_id: str = ""  # a tool hook's call id (Claude Code's tool_use_id)
    reduced: tuple[Reduction, ...] = ()  # fields over the event limits, judged by their stand-in (reduction)
    # Events to send after the hook's own, whose verdicts decide nothing (a sub-agent's run_end
    # after its final answer).
    trailing: tuple[EventRecord, ...] = ()

    @property
    def before_tool(self) -> bool:
        return self.stage is Stage.BEFORE_TOOL

    @property
    def root_run_id(self) -> str:
        """The run tree's root, the session's run: the routing header of all the session's events."""
        return self.session_id

    @property
    def ends_subagent(self) -> bool:
        return self.stage is Stage.SUBAGENT_STOP and any(event.kind is EventKind.RUN_END
                                                         for event in (self.event, *self.trailing) if event)

    @property
    def settles_ask(self) -> bool | None:
        """After this hook an asked call of its tool call id is settled: True (it ran: approved),
        False (denied), None (this hook says nothing about it)."""
        if not self.host.can_ask or not self.tool_call_id or self.run is None or self.stage is None:
            return None  # a host that cannot ask was never asked
        return _SETTLES_ASK.get(self.stage)

    @property
    def call(self) -> tuple[str, str] | None:
        """A before-tool hook's call as the host named it, (tool name, input as JSON text): what
        tells the same call asked again under another call id."""
        if not self.before_tool or self.event is None:
            return None
        return self.event.tool_name, self.event.params_json

    @property
    def declines_every_ask(self) -> bool:
        """After this hook no earlier ask of its run can still be answered: the run's batch
        ended (a call that ran sent its outcome first) or a new prompt came."""
        return self.ends_batch or (self.event is not None and self.event.kind is EventKind.USER_TURN)

    def asked(self, verdict: VerdictLike) -> bool:
        """The verdict on this before-tool hook holds the call for the person: remember its call
        id, whose later outcome or denial is the person's answer."""
        return self.before_tool and bool(self.tool_call_id) and action_of(verdict) == "ask"

    def approval(self, approved: bool) -> EventRecord:
        """The approval event of this hook's asked call (once: the next critical asks again), to be
        sent ahead of the hook's own event."""
        if self.run is None or not self.tool_call_id:
            raise ValueError(f"{self.hook_event_name} names no call to approve")
        return self.run.event(EventKind.APPROVAL, tool_call_id=self.tool_call_id, approved=approved, scope="once")

    def declined(self, tool_call_ids: Sequence[str]) -> tuple[EventRecord, ...]:
        """The approvals that deny asks of this hook's run its host never answered (the caller
        knows which: its asks that this hook shows the run has moved on from), to be sent ahead of
        the hook's own event."""
        if self.run is None:
            return ()
        return tuple(self.run.event(EventKind.APPROVAL, tool_call_id=call, approved=False, scope="once")
                     for call in tool_call_ids)

    def events(self, *approvals: EventRecord | None) -> tuple[EventRecord, ...]:
        """What to send for this hook, in order: the approvals of asked calls (when the caller
        knows the calls were asked), then the hook's own event, then its `trailing` events. The
        hook's verdict is the own event's: `verdict_in`."""
        return tuple(event for event in (*approvals, self.event, *self.trailing) if event is not None)

    def verdict_in(self, verdicts: Sequence[Any], approvals: int) -> Any:
        """The hook's own verdict among the verdicts on `events(*approvals)` (`approvals` of them
        ahead of it), or None when the hook has no event."""
        return verdicts[approvals] if self.event is not None else None

    @property
    def ends_batch(self) -> bool:
        """Every call issued since the last batch end has resolved (a host that ends batches)."""
        return self.stage is Stage.BATCH_END and self.host.ends_batches

    @property
    def ends_session(self) -> bool:
        return self.stage is Stage.SESSION_END and self.event is not None

    def in_batch(self, batch_id: str) -> HookRequest:
        """This before-tool call sent under `batch_id` (ToolCall.batch_id)."""
        if not self.before_tool or self.event is None:
            raise ValueError(f"only a before-tool call joins a batch, not {self.hook_event_name}")
        return replace(self, event=replace(self.event, batch_id=batch_id))

    def blocked_outcome(self, verdict: VerdictLike) -> EventRecord | None:
        """After a refusal of this call (a BLOCK, or an ASK this hook could not ask: guard_policy):
        the outcome to report, the blocked result the model got instead (spec section 6), so the
        run's history holds the blocked call like the guard's."""
        if not self.before_tool or self.event is None or action_of(verdict) == "reject":
            return None
        if not decide(verdict, can_ask=self.event.accepts_ask).reports_refusal:
            return None
        from ..runner import blocked_tool_result  # the one spelling of the blocked result

        call = self.event
        return EventRecord(EventKind.TOOL_OUTCOME, run_id=call.run_id, parent_run_id=call.parent_run_id,
                           agent_id=call.agent_id, session_id=call.session_id,
                           seq=host_seq(EventKind.TOOL_OUTCOME, call.tool_call_id), tool_name=call.tool_name,
                           tool_call_id=call.tool_call_id, params_json=call.params_json,
                           result_json=json_text(blocked_tool_result(verdict)))


def parse(host: HookHost, payload: Any, *, agent_id: str = "", max_params_bytes: int = MAX_PARAMS_BYTES.default,
          max_result_bytes: int = MAX_RESULT_BYTES.default,
          max_output_bytes: int = MAX_OUTPUT_TEXT_BYTES.default) -> HookRequest:
    """Read one hook input (the decoded JSON) of `host`. The run is the hook's session, or a
    sub-agent's child run of it. A tool input over `max_params_bytes`, or a result or error over
    `max_result_bytes` (the daemon's event limits), is reduced to its stand-in (reduction), named
    in `HookRequest.reduced`; a model's text over `max_output_bytes` is sent as its sha256
    (`text_digest`).

    HookPayloadError names the field when a mapped event lacks what its host always sends."""
    if not isinstance(payload, Mapping):
        raise HookPayloadError(f"the hook input must be a JSON object, got {type(payload).__name__}")
    name = host.event_name(payload)
    if host.stage_of(name) is None:
        return HookRequest(host, name)
    return _request(host, name, host.read(name, payload), agent_id, max_params_bytes, max_result_bytes,
                    max_output_bytes)


def _run(host: HookHost, name: str, read: HookInput, agent_id: str) -> HookRun:
    """The session's run, or for a sub-agent's hook its child run. A session's end ends the
    session, whoever sends it."""
    subagent = read.subagent if host.reports_subagents else ""
    if read.stage in (Stage.SUBAGENT_START, Stage.SUBAGENT_STOP) and not subagent.strip():
        raise HookPayloadError(f"agent_id must not be blank in {name}: it names the sub-agent")
    if not subagent.strip() or read.stage is Stage.SESSION_END:
        return HookRun(read.session_id, agent_id=agent_id, session_id=read.session_id)
    return HookRun(child_run_id(read.session_id, subagent), parent_run_id=read.session_id, agent_id=agent_id,
                   session_id=read.agent_type or read.session_id)


def _output_event(run: HookRun, read: HookInput, max_output_bytes: int) -> tuple[EventRecord | None, Reduction | None]:
    """What the model wrote as a `model_output` of `run`, or None when there is nothing to judge
    (no text, or only whitespace, and no digest: a chunk of a function call, a turn that ended
    on no text)."""
    text, digest, reduced = read.output_text, read.output_digest, None
    if not text.strip():
        text = ""
        if not digest:
            return None, None
    data = text.encode("utf-8", "surrogatepass")
    if len(data) > max_output_bytes:
        # Over the daemon's limit the text would be refused: its hash stands for it (equal texts,
        # equal hashes), and only the repetition inside it goes unjudged.
        digest = hashlib.sha256(data).hexdigest()
        text, reduced = "", Reduction("output_text", len(data), digest)
    event = run.event(EventKind.MODEL_OUTPUT, text=text, text_digest=digest if not text else "",
                      output_kind=read.output_kind, stop_hook_active=read.stop_hook_active)
    return event, reduced


def _request(host: HookHost, name: str, read: HookInput, agent_id: str, max_params_bytes: int,
             max_result_bytes: int, max_output_bytes: int = MAX_OUTPUT_TEXT_BYTES.default) -> HookRequest:
    if not read.session_id.strip():
        raise HookPayloadError("session_id must not be blank: it names the run")
    run = _run(host, name, read, agent_id)
    stage = read.stage
    scope: dict[str, Any] = {"session_id": read.session_id, "run": run,
                             "subagent": read.subagent if host.reports_subagents else ""}
    if stage is Stage.BATCH_END:
        return HookRequest(host, name, stage, **scope)
    if stage is Stage.COMPACT:
        return HookRequest(host, name, stage, run.event(EventKind.COMPACTION_RETRY), **scope)
    if stage in (Stage.MODEL_OUTPUT, Stage.STOP):
        output, output_reduced = _output_event(run, read, max_output_bytes)
        return HookRequest(host, name, stage, output, reduced=tuple(r for r in (output_reduced,) if r), **scope)
    if stage is Stage.SUBAGENT_STOP:
        # The sub-agent's final answer, then its end; no end while a stop hook keeps it going.
        output, output_reduced = _output_event(run, read, max_output_bytes)
        end = () if read.stop_hook_active else (run.event(EventKind.RUN_END),)
        if output is None:
            return HookRequest(host, name, stage, end[0] if end else None, **scope)
        return HookRequest(host, name, stage, output, reduced=tuple(r for r in (output_reduced,) if r),
                           trailing=end, **scope)
    if stage is Stage.SESSION_END:
        return HookRequest(host, name, stage, run.event(EventKind.RUN_END), **scope)
    if stage is Stage.SUBAGENT_START:
        # Creates the child run (its parent set) without counting a tool call; a sub-agent started
        # again under the same agent_id gets a new instruction, which a user turn is.
        return HookRequest(host, name, stage, run.event(EventKind.USER_TURN), **scope)
    if stage is Stage.USER_PROMPT:
        return HookRequest(host, name, stage, run.event(EventKind.USER_TURN, prompt_id=read.prompt_id), **scope)
    if stage not in _TOOL_STAGES:
        raise AssertionError(f"stage {stage} has no event")  # every Stage is handled above
    tool_call_id = read.tool_use_id
    scope["tool_call_id"] = tool_call_id
    if stage is Stage.PERMISSION_DENIED:
        return HookRequest(host, name, stage, **scope)  # an approval, when the call was asked; else nothing
    tool_input = {} if read.tool_input is None else read.tool_input
    params_json, params_reduced = bounded_json("tool_input", json_text(tool_input), max_params_bytes)
    tool = {"tool_name": read.tool_name, "tool_call_id": tool_call_id, "params_json": params_json}
    reduced = tuple(r for r in (params_reduced,) if r is not None)
    if stage is Stage.BEFORE_TOOL:
        event = run.event(EventKind.TOOL_CALL, **tool, accepts_ask=host.accepts_ask(tool_call_id))
        return HookRequest(host, name, stage, event, reduced=reduced, **scope)
    if stage is Stage.AFTER_TOOL:
        outcome, outcome_reduced = bounded_json("tool_response", json_text(read.tool_response), max_result_bytes)
        outcome_fields = {"result_json": outcome}
    else:
        error, outcome_reduced = bounded_text("error", read.error, max_result_bytes)
        outcome_fields = {"error": error}
    reduced += tuple(r for r in (outcome_reduced,) if r is not None)
    event = run.event(EventKind.TOOL_OUTCOME, **tool, duration_ms=read.duration_ms, **outcome_fields)
    return HookRequest(host, name, stage, event, reduced=reduced, **scope)


def action_of(verdict: VerdictLike) -> str:
    """The verdict's action as its plain name ("allow" … "reject"), from an enum or a string."""
    return str(getattr(verdict.action, "value", verdict.action))


def reply_for(request: HookRequest, verdict: VerdictLike | None) -> Reply:
    """What the hook's answer says about the verdict on `request.event`, whatever the host: the
    guard policy's effect (loopwarden.guard_policy, the one mapping every guard follows) in hook
    terms, at the hook's stage."""
    if verdict is None or request.stage in (Stage.USER_PROMPT, Stage.PERMISSION_DENIED):
        # A new prompt is never held up (an aborted run's next call is denied); a denial is only
        # reported.
        return Reply()
    if request.stage in (Stage.MODEL_OUTPUT, Stage.STOP, Stage.SUBAGENT_STOP, Stage.COMPACT):
        if request.event is None or request.event.kind is EventKind.RUN_END:
            return Reply()  # a sub-agent's end with no answer to judge
        # What the model wrote, or a compaction: shown, or the session ended; never context,
        # which a stop hook's host would continue the turn to deliver.
        output = decide_output(verdict)
        if output.effect == "end_run":
            return Reply(stop=output.text, note=f"loopwarden: {output.text}")
        if output.effect == "run_with_warning":
            return Reply(note=f"loopwarden: {output.text}")
        return Reply()
    if request.stage is Stage.SUBAGENT_START:
        # The child was refused (tree_too_deep, too_many_children): the sub-agent is told at once;
        # its calls are denied.
        return Reply(context=abort_text(verdict), note=f"loopwarden: {abort_text(verdict)}") \
            if action_of(verdict) == "abort" else Reply()
    if not request.before_tool:
        # After a tool: only an ABORT has something to say.
        return Reply(stop=abort_text(verdict)) if action_of(verdict) == "abort" else Reply()
    can_ask = request.event is not None and request.event.accepts_ask
    decision = decide(verdict, can_ask=can_ask)
    if decision.effect == "ask":
        return Reply(ask=decision.text)
    if decision.effect == "refuse":
        # A host that cannot ask tells the model to put the question to the person itself.
        return Reply(deny=decision.text if can_ask else f"{decision.text} {ASK_THE_USER}")
    if decision.effect == "end_run":
        return Reply(deny=decision.text, stop=decision.text, note=f"loopwarden: {decision.text}")
    if decision.effect == "run_with_warning":
        return Reply(context=decision.text, note=f"loopwarden: {decision.text}")
    return Reply()  # run (a REJECT never gets here: `answer` says it was not checked)


def answer(request: HookRequest, verdict: VerdictLike | None, *, fail_closed: bool = False) -> dict[str, Any]:
    """The hook's JSON output for the verdict on `request.event` (None: the hook had no event).

    A REJECT (the daemon refused the event: tool_input nested too deep, a NaN, an over-long id)
    judged nothing, so it is answered like a daemon that could not decide (`refused_answer`): the
    call runs with the reason shown, or is denied when `fail_closed`."""
    if verdict is not None and action_of(verdict) == "reject" and request.event is not None:
        return refused_answer(request.host, request.hook_event_name, refusal_reason(verdict), fail_closed=fail_closed)
    return request.host.render(reply_for(request, verdict), request.hook_event_name)


def refusal_reason(verdict: VerdictLike) -> str:
    """What the user (and, denied, the model) is told about a REJECT: the daemon's message and its
    code (the code names what to fix in the caller: `params_too_deep`, `run_id_too_long`, ...)."""
    message = verdict.message or verdict.error_code
    if verdict.error_code and verdict.error_code not in message:
        message = f"{message} ({verdict.error_code})"
    return f"the daemon refused this hook event: {message or 'no reason given'}"


# The hook's event name in a body that could not be parsed (hosts send it near the top).
_EVENT_NAME = re.compile(rb'"hook_event_name"\s*:\s*"([A-Za-z]{1,64})"')


def event_name_in(raw: bytes) -> str:
    """The hook's event name as read from raw input that could not be parsed ("" if absent)."""
    found = _EVENT_NAME.search(raw)
    return found.group(1).decode() if found else ""


def refused_answer(host: HookHost, hook_event_name: str, reason: str, *, fail_closed: bool) -> dict[str, Any]:
    """The answer to a hook event loopwarden could not judge although the daemon answered (it
    refused the event, or the input could not be read as the host's hook JSON): before a tool, the
    call is denied when fail-closed, else it runs with the reason shown to the user; any other
    event tells the user it was not checked. `hook_event_name` is the host's own name."""
    return unchecked_answer(host, hook_event_name, reason, fail_closed=fail_closed)


def unremembered_ask_answer(verdict: VerdictLike, reason: str, host: HookHost) -> dict[str, Any]:
    """The answer to an ASK whose call cannot be remembered for the person's answer (the command
    form's state dir is unusable): the call is denied, as it would be without ASK, since an
    approval that could not be reported would later count as a denial anyway."""
    return host.render(Reply(deny=f"{verdict.message} (loopwarden could not keep this question open for you: "
                                  f"{reason}; the call was denied instead)"), host.before_tool_events[0])


def unchecked_answer(host: HookHost, hook_event_name: str, reason: str, *, fail_closed: bool) -> dict[str, Any]:
    """The answer to a hook input the daemon will not read (over `--hooks-max-body-bytes`), of
    which only the event's name is known: a before-tool event gets the unavailable answer (the call
    runs with a note to the user, or is denied when fail-closed); any other event (its call has
    already run, or the name could not be read) tells the user that it was not checked."""
    if host.is_before_tool(hook_event_name):
        return unavailable_answer(HookRequest(host, hook_event_name, Stage.BEFORE_TOOL), reason,
                                  fail_closed=fail_closed)
    return host.render(Reply(note=f"loopwarden: {reason}; this hook event was not checked."), hook_event_name)


def is_before_tool(host: HookHost, hook_event_name: str) -> bool:
    """The host's name of its before-a-tool-runs event (the one a deny applies to)."""
    return host.is_before_tool(hook_event_name)


def unavailable_reply(reason: str, *, fail_closed: bool) -> Reply:
    """What a before-tool hook says when the daemon could not decide: the call runs (the user is
    told it was not checked) unless the operator chose fail-closed."""
    if fail_closed:
        return Reply(deny=f"loopwarden could not check this call ({reason}) and is set to fail closed, so it was "
                          "not run.")
    return Reply(note=f"loopwarden: {reason}; this call ran without a loop check.")


def unavailable_answer(request: HookRequest, reason: str, *, fail_closed: bool) -> dict[str, Any]:
    """The answer when the daemon could not decide (unreachable, busy, draining): `unavailable_reply`
    before a tool, nothing after one."""
    if not request.before_tool:
        return {}
    return request.host.render(unavailable_reply(reason, fail_closed=fail_closed), request.hook_event_name)
