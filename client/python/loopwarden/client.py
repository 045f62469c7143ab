"""Python clients for the loopwarden daemon: `LoopwardenClient` (blocking) and
`AsyncLoopwardenClient` (asyncio). A run keeps its state on the daemon across streams.

Two stream modes. `streams="shared"` (the default for one daemon) holds one Evaluate stream for
every run and reopens it after a failure. `streams="per_run"` (the mode for several replicas
behind a router) opens one stream per run with the routing header `x-loopwarden-run-id` set at
stream open, so a router hashing on it sends each run to the replica that holds it; a run's
stream closes after its run_end, the least recently used is closed past `max_run_streams`, and a
stream that failed (closed for idleness, its replica gone) is reopened and the request resent
once, transparently: events carry a seq, so a resend the daemon already saw gets its first verdict.
Check and InspectRun always carry the header.

Run trees: an event with `parent_run_id` is of a child run (a sub-agent), which the daemon keeps
with its tree, so the header names the tree's ROOT run: one stream per tree in the per-run mode.
The client learns each child's root from the events it sends (see loopwarden.trees); a child run
whose parent this client never saw passes `root_run_id`. `ToolGuard.child` does all of it.
"""
from __future__ import annotations

import asyncio
import itertools
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any, Unpack, cast

import grpc

from . import _wire
from ._event_extra import (ApprovalExtra, CompactionRetryExtra, ModelOutputExtra, RunEndExtra, ToolCallExtra,
                           ToolOutcomeExtra, UsageExtra, UserTurnExtra)
from ._wire import MISSING
from .tracing import GuardrailSpans
from .trees import RunTrees
from .types import (
    Exemption, ExemptionNotFound, LoopwardenError, LoopwardenUnavailable, RunInspection, RunNotFound, Verdict,
)
from .v1 import loopwarden_pb2 as pb
from .v1 import loopwarden_pb2_grpc as pb_grpc

DEFAULT_TARGET = "127.0.0.1:50051"
ROUTING_HEADER = "x-loopwarden-run-id"
STREAM_MODES = ("shared", "per_run")
_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 8 * 1024 * 1024),
                    ("grpc.max_send_message_length", 8 * 1024 * 1024)]


def _credentials(root_certificates: bytes | None, private_key: bytes | None,
                 certificate_chain: bytes | None) -> grpc.ChannelCredentials | None:
    if root_certificates is None and certificate_chain is None:
        return None
    return grpc.ssl_channel_credentials(root_certificates, private_key, certificate_chain)


def _auth_metadata(metadata: Sequence[tuple[str, str]], token: str | None) -> tuple[tuple[str, str], ...]:
    return tuple(metadata) + ((("authorization", f"Bearer {token}"),) if token else ())


def _routed(metadata: tuple[tuple[str, str], ...], run_id: str) -> tuple[tuple[str, str], ...]:
    run_id = run_id.strip()
    return metadata + ((ROUTING_HEADER, run_id),) if run_id else metadata


def _stream_mode(streams: str) -> str:
    if streams not in STREAM_MODES:
        raise ValueError(f"streams must be one of {STREAM_MODES}, got {streams!r}")
    return streams


def _by_root(events: Sequence[pb.Event], trees: RunTrees) -> dict[str, list[int]]:
    """Positions of the events of each run tree (by root), trees in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for index, event in enumerate(events):
        groups.setdefault(trees.learn(event.run_id, event.parent_run_id), []).append(index)
    return groups


def _ends(events: Sequence[pb.Event], root: str) -> bool:
    """The batch ends the tree's root run: its stream can close (a child's end cannot close it)."""
    return any(event.WhichOneof("kind") == "run_end" and event.run_id.strip() == root for event in events)


def _forget_ended(events: Sequence[pb.Event], trees: RunTrees) -> None:
    for event in events:
        if event.WhichOneof("kind") == "run_end":
            trees.forget(event.run_id)


class _Verbs:
    """The events by name. Subclasses implement `_send(event) -> Verdict` (or an awaitable)."""

    agent_id: str
    accepts_ask: bool
    _seq: itertools.count
    _trees: RunTrees
    _send: Callable[[pb.Event], Any]  # a Verdict, or an awaitable of one

    def _common(self, run_id: str, agent_id: str | None, session_id: str, seq: int | None, parent_run_id: str,
                root_run_id: str, accepts_ask: bool | None) -> dict:
        self._trees.learn(run_id, parent_run_id, root_run_id)
        return {"agent_id": self.agent_id if agent_id is None else agent_id, "session_id": session_id,
                "seq": next(self._seq) if seq is None else seq, "parent_run_id": parent_run_id,
                "accepts_ask": self.accepts_ask if accepts_ask is None else accepts_ask}

    # Every verb also takes, keyword-only: parent_run_id (this run is a child of that run, a
    # sub-agent: fixed by the run's first event), root_run_id (the tree's root, for routing, when
    # this client has not seen the chain), accepts_ask (None: the client's setting), and the
    # event's fields that have no argument of their own, as they are (`extra`: _event_extra.py).

    def tool_call(self, run_id: str, tool_name: str, params: Any = None, *, tool_call_id: str = "",
                  params_json: str | None = None, agent_id: str | None = None, session_id: str = "",
                  seq: int | None = None, tool_class: str = "", batch_id: str = "", parent_run_id: str = "",
                  root_run_id: str = "", accepts_ask: bool | None = None, **extra: Unpack[ToolCallExtra]):
        """Before a tool runs: may it run? Returns the Verdict (ALLOW/WARN: run it; ASK, only with
        accepts_ask: ask a human, then report the answer with `approval`). `tool_class`: what the
        caller knows the tool does ("readOnly", "mutating", "poll"; a config rule wins).
        `batch_id`: the calls of one model turn share one (loopwarden.parallelBatches)."""
        return self._send(_wire.tool_call_event(
            run_id, tool_name, params, params_json=params_json, tool_call_id=tool_call_id, tool_class=tool_class,
            batch_id=batch_id,
            **extra, **self._common(run_id, agent_id, session_id, seq, parent_run_id, root_run_id,
                                    accepts_ask)))

    def tool_outcome(self, run_id: str, tool_name: str, params: Any = None, *, result: Any = MISSING,
                     error: str | None = None, result_json: str | None = None, params_json: str | None = None,
                     tool_call_id: str = "", agent_id: str | None = None, session_id: str = "",
                     seq: int | None = None, duration_ms: int = 0, parent_run_id: str = "", root_run_id: str = "",
                     accepts_ask: bool | None = None, **extra: Unpack[ToolOutcomeExtra]):
        """After a tool ran: what it returned (`result`, any JSON-able value) or the `error` text;
        `duration_ms`: how long it ran (loopwarden.budgets.toolSecondsPerTree)."""
        return self._send(_wire.tool_outcome_event(
            run_id, tool_name, params, result=result, result_json=result_json, error=error,
            params_json=params_json, tool_call_id=tool_call_id, duration_ms=duration_ms,
            **extra, **self._common(run_id, agent_id, session_id, seq, parent_run_id, root_run_id,
                                    accepts_ask)))

    def compaction_retry(self, run_id: str, *, agent_id: str | None = None, session_id: str = "",
                         seq: int | None = None, parent_run_id: str = "", root_run_id: str = "",
                         accepts_ask: bool | None = None, **extra: Unpack[CompactionRetryExtra]):
        """The runner compacted its context after an overflow and retries: arms the guard."""
        return self._send(_wire.compaction_retry_event(
            run_id, **extra,
            **self._common(run_id, agent_id, session_id, seq, parent_run_id, root_run_id, accepts_ask)))

    def user_turn(self, run_id: str, *, prompt_id: str = "", agent_id: str | None = None, session_id: str = "",
                  seq: int | None = None, parent_run_id: str = "", root_run_id: str = "",
                  accepts_ask: bool | None = None, **extra: Unpack[UserTurnExtra]):
        """A person or an orchestrator sent the run a new instruction: the run starts fresh for
        loop detection (loopwarden.userTurnResets) and keeps its budgets; an aborted run stays aborted."""
        return self._send(_wire.user_turn_event(
            run_id, prompt_id=prompt_id,
            **extra, **self._common(run_id, agent_id, session_id, seq, parent_run_id, root_run_id,
                                    accepts_ask)))

    def usage(self, run_id: str, *, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0,
              model: str = "", agent_id: str | None = None, session_id: str = "", seq: int | None = None,
              parent_run_id: str = "", root_run_id: str = "", accepts_ask: bool | None = None,
              **extra: Unpack[UsageExtra]):
        """What one model response cost (tokens, US dollars), for the tree's token and cost
        budgets (loopwarden.budgets.tokensPerTree, costUsdPerTree). Counted once per event."""
        return self._send(_wire.usage_event(
            run_id, input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd, model=model,
            **extra, **self._common(run_id, agent_id, session_id, seq, parent_run_id, root_run_id,
                                    accepts_ask)))

    def model_output(self, run_id: str, text: str = "", *, text_digest: str = "", output_kind: str = "message",
                     stop_hook_active: bool = False, input_tokens: int = 0, output_tokens: int = 0,
                     cost_usd: float = 0.0, model: str = "", agent_id: str | None = None, session_id: str = "",
                     seq: int | None = None, parent_run_id: str = "", root_run_id: str = "",
                     accepts_ask: bool | None = None, **extra: Unpack[ModelOutputExtra]):
        """What the model said: `text` (or your own `text_digest` of it), its `output_kind`
        ("message", "thought", "final_answer"), `stop_hook_active` when a stop hook already kept
        the turn going. Judged by the detectors of loops without tool calls: ALLOW, WARN (show the
        message) or ABORT (end the run: for a stop hook, end the session). The response's cost,
        when given, feeds the budgets as `usage` does."""
        return self._send(_wire.model_output_event(
            run_id, text, text_digest=text_digest, output_kind=output_kind, stop_hook_active=stop_hook_active,
            input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd, model=model,
            **extra, **self._common(run_id, agent_id, session_id, seq, parent_run_id, root_run_id,
                                    accepts_ask)))

    def approval(self, run_id: str, *, approved: bool, tool_call_id: str = "", decision_id: str = "",
                 scope: str = "once", ttl_seconds: int = 0, agent_id: str | None = None, session_id: str = "",
                 seq: int | None = None, parent_run_id: str = "", root_run_id: str = "",
                 accepts_ask: bool | None = None, **extra: Unpack[ApprovalExtra]):
        """A human's answer to an ASK verdict, naming the asked call by its `tool_call_id` or the
        ASK's `decision_id`. `scope="once"`: this call only (the next critical asks again);
        `"always"`: a standing exemption for this agent, tool and arguments (for `ttl_seconds`, 0:
        the daemon's default); `approved=False`: the pattern's later criticals are blocked."""
        return self._send(_wire.approval_event(
            run_id, approved=approved, tool_call_id=tool_call_id, decision_id=decision_id, scope=scope,
            ttl_seconds=ttl_seconds,
            **extra, **self._common(run_id, agent_id, session_id, seq, parent_run_id, root_run_id,
                                    accepts_ask)))

    def run_end(self, run_id: str, *, agent_id: str | None = None, session_id: str = "", seq: int | None = None,
                parent_run_id: str = "", root_run_id: str = "", accepts_ask: bool | None = None,
                **extra: Unpack[RunEndExtra]):
        """The run is over: the daemon frees its state."""
        return self._send(_wire.run_end_event(
            run_id, **extra,
            **self._common(run_id, agent_id, session_id, seq, parent_run_id, root_run_id, accepts_ask)))

    def root_of(self, run_id: str) -> str:
        """The root of run_id's tree as far as this client knows: what its routing header names."""
        return self._trees.root(run_id)


class LoopwardenClient(_Verbs):
    """Blocking client. Thread-safe: requests on the shared stream are sent one at a time."""

    def __init__(self, target: str = DEFAULT_TARGET, *, agent_id: str = "",
                 metadata: Sequence[tuple[str, str]] = (), channel: grpc.Channel | None = None,
                 timeout: float = 10.0, token: str | None = None, root_certificates: bytes | None = None,
                 private_key: bytes | None = None, certificate_chain: bytes | None = None,
                 streams: str = "shared", max_run_streams: int = 1024, accepts_ask: bool = False,
                 tracer_provider: Any = None) -> None:
        """TLS when root_certificates (the daemon's CA) is given; mTLS adds private_key +
        certificate_chain; `token` is sent as `authorization: Bearer …` on every call;
        `streams="per_run"` for several replicas behind a router (see the module docstring);
        `accepts_ask`: every event says the caller can hold a call for a human (a verb's own
        accepts_ask wins), so criticals and budgets configured to ask are answered ASK;
        `tracer_provider`: the OpenTelemetry provider for the guardrail spans (default: the global
        one; spans only with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental, see
        loopwarden.tracing)."""
        self._mode = _stream_mode(streams)
        self._max_run_streams = max_run_streams
        self._run_streams: dict[str, tuple[queue.Queue, Any]] = {}
        credentials = _credentials(root_certificates, private_key, certificate_chain)
        channel_given = channel
        if channel is None:
            channel = (grpc.insecure_channel(target, options=_CHANNEL_OPTIONS) if credentials is None
                       else grpc.secure_channel(target, credentials, options=_CHANNEL_OPTIONS))
        self._channel = channel
        self._stub = pb_grpc.LoopDetectionServiceStub(self._channel)
        self._metadata = _auth_metadata(metadata, token)
        self._timeout = timeout
        self._lock = threading.Lock()
        self._requests: queue.Queue | None = None
        self._responses: Any = None  # the open Evaluate stream's response iterator (grpc is untyped)
        self.agent_id = agent_id
        self.accepts_ask = accepts_ask
        self._seq = itertools.count(1)
        self._trees = RunTrees()
        # None unless OTel is installed and the GenAI opt-in is set: then nothing else per request.
        self.tracing = GuardrailSpans.create(target if channel_given is None else None, tracer_provider)

    def __enter__(self) -> LoopwardenClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def evaluate(self, events: Sequence[pb.Event]) -> list[Verdict]:
        """Send one request carrying several events; one verdict per event, in order."""
        if self.tracing is None:
            return self._evaluate(events)
        with self.tracing.request(events) as request:
            return request.answered(self._evaluate(events))

    def _evaluate(self, events: Sequence[pb.Event]) -> list[Verdict]:
        if self._mode == "per_run":
            return self._evaluate_per_run(events)
        with self._lock:
            if self._responses is None:
                self._requests = queue.Queue()
                self._responses = self._stub.Evaluate(iter(self._requests.get, None), metadata=self._metadata)
            cast(queue.Queue, self._requests).put(pb.EvaluateRequest(events=list(events)))  # set with _responses
            try:
                response = next(self._responses)
            except (grpc.RpcError, StopIteration) as exc:
                self._reset_stream()
                raise LoopwardenUnavailable(_describe(exc)) from None
        return [_wire.verdict_from_message(v) for v in response.verdicts]

    def _evaluate_per_run(self, events: Sequence[pb.Event]) -> list[Verdict]:
        verdicts: list = [None] * len(events)
        with self._lock:
            for root, positions in _by_root(events, self._trees).items():
                batch = [events[i] for i in positions]
                response = self._run_request(root, batch)
                for position, message in zip(positions, response.verdicts):
                    verdicts[position] = _wire.verdict_from_message(message)
                if _ends(batch, root):
                    self._close_run_stream(root)
                _forget_ended(batch, self._trees)
        return verdicts

    def _run_request(self, run_id: str, batch: list[pb.Event]) -> pb.EvaluateResponse:
        """One request on the stream of a tree (run_id: its root); a failed stream is reopened and the
        request resent once."""
        for attempt in (1, 2):
            stream = self._run_streams.pop(run_id, None)
            if stream is None:
                if len(self._run_streams) >= self._max_run_streams:
                    self._close_run_stream(next(iter(self._run_streams)))
                requests: queue.Queue = queue.Queue()
                stream = (requests, self._stub.Evaluate(iter(requests.get, None),
                                                        metadata=_routed(self._metadata, run_id)))
            self._run_streams[run_id] = stream  # most recently used last
            stream[0].put(pb.EvaluateRequest(events=batch))
            try:
                return next(stream[1])
            except (grpc.RpcError, StopIteration) as exc:
                self._close_run_stream(run_id)
                if attempt == 2:
                    raise LoopwardenUnavailable(_describe(exc)) from None
        raise AssertionError("unreachable")

    def _close_run_stream(self, run_id: str) -> None:
        stream = self._run_streams.pop(run_id, None)
        if stream is not None:
            stream[0].put(None)
            stream[1].cancel()

    def _send(self, event: pb.Event) -> Verdict:
        return self.evaluate([event])[0]

    def check(self, event: pb.Event, *, routed: str = "") -> Verdict:
        """The unary Check RPC: the same decision without a stream. `routed`: the run id for the
        routing header, the run tree's root (default: the root this client learned for the run)."""
        if self.tracing is None:
            return self._check(event, routed, self._metadata)
        with self.tracing.request([event]) as request:
            return request.answered([self._check(event, routed, request.metadata(self._metadata))])[0]

    def _check(self, event: pb.Event, routed: str, metadata: tuple[tuple[str, str], ...]) -> Verdict:
        try:
            response = self._stub.Check(pb.CheckRequest(event=event), timeout=self._timeout,
                                        metadata=_routed(metadata, routed or self._trees.learn(
                                            event.run_id, event.parent_run_id)))
        except grpc.RpcError as exc:
            raise _rpc_error(exc) from None
        return _wire.verdict_from_message(response.verdict)

    def inspect(self, run_id: str) -> RunInspection:
        try:
            response = self._stub.InspectRun(pb.InspectRunRequest(run_id=run_id), timeout=self._timeout,
                                             metadata=_routed(self._metadata, self._trees.root(run_id)))
        except grpc.RpcError as exc:
            raise _rpc_error(exc) from None
        return _wire.inspection_from_message(response)

    def list_exemptions(self, *, agent_id: str = "", tool_name: str = "") -> list[Exemption]:
        """The caller's tenant's standing exemptions, newest first (filters: when not empty)."""
        try:
            response = self._stub.ListExemptions(pb.ListExemptionsRequest(agent_id=agent_id, tool_name=tool_name),
                                                 timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise _rpc_error(exc) from None
        return [_wire.exemption_from_message(e) for e in response.exemptions]

    def revoke_exemption(self, exemption_id: str) -> Exemption:
        """Withdraw one; ExemptionNotFound when the tenant holds no such id."""
        try:
            response = self._stub.RevokeExemption(pb.RevokeExemptionRequest(id=exemption_id),
                                                  timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise _rpc_error(exc, ExemptionNotFound) from None
        return _wire.exemption_from_message(response.revoked)

    def _reset_stream(self) -> None:
        if self._requests is not None:
            self._requests.put(None)
        if self._responses is not None:
            self._responses.cancel()
        self._requests = self._responses = None

    def close(self) -> None:
        with self._lock:
            self._reset_stream()
            for run_id in list(self._run_streams):
                self._close_run_stream(run_id)
        self._channel.close()


class AsyncLoopwardenClient(_Verbs):
    """asyncio client; every verb is a coroutine."""

    def __init__(self, target: str = DEFAULT_TARGET, *, agent_id: str = "",
                 metadata: Sequence[tuple[str, str]] = (), channel: grpc.aio.Channel | None = None,
                 timeout: float = 10.0, token: str | None = None, root_certificates: bytes | None = None,
                 private_key: bytes | None = None, certificate_chain: bytes | None = None,
                 streams: str = "shared", max_run_streams: int = 1024, accepts_ask: bool = False,
                 tracer_provider: Any = None) -> None:
        """TLS when root_certificates (the daemon's CA) is given; mTLS adds private_key +
        certificate_chain; `token` is sent as `authorization: Bearer …` on every call;
        `streams="per_run"` for several replicas behind a router (see the module docstring);
        `accepts_ask`: every event says the caller can hold a call for a human (a verb's own
        accepts_ask wins), so criticals and budgets configured to ask are answered ASK;
        `tracer_provider`: the OpenTelemetry provider for the guardrail spans (default: the global
        one; spans only with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental, see
        loopwarden.tracing)."""
        self._mode = _stream_mode(streams)
        self._max_run_streams = max_run_streams
        self._run_calls: dict[str, Any] = {}
        credentials = _credentials(root_certificates, private_key, certificate_chain)
        channel_given = channel
        if channel is None:
            channel = (grpc.aio.insecure_channel(target, options=_CHANNEL_OPTIONS) if credentials is None
                       else grpc.aio.secure_channel(target, credentials, options=_CHANNEL_OPTIONS))
        self._channel = channel
        self._stub = pb_grpc.LoopDetectionServiceStub(self._channel)
        self._metadata = _auth_metadata(metadata, token)
        self._timeout = timeout
        self._lock = asyncio.Lock()
        self._call: Any = None  # the open Evaluate stream-stream call (grpc is untyped)
        self.agent_id = agent_id
        self.accepts_ask = accepts_ask
        self._seq = itertools.count(1)
        self._trees = RunTrees()
        # None unless OTel is installed and the GenAI opt-in is set: then nothing else per request.
        self.tracing = GuardrailSpans.create(target if channel_given is None else None, tracer_provider)

    async def __aenter__(self) -> AsyncLoopwardenClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def evaluate(self, events: Sequence[pb.Event]) -> list[Verdict]:
        """Send one request carrying several events; one verdict per event, in order."""
        if self.tracing is None:
            return await self._evaluate(events)
        with self.tracing.request(events) as request:
            return request.answered(await self._evaluate(events))

    async def _evaluate(self, events: Sequence[pb.Event]) -> list[Verdict]:
        if self._mode == "per_run":
            return await self._evaluate_per_run(events)
        async with self._lock:
            if self._call is None or self._call.done():
                # NOTE: a stream that already ended (daemon gone while the loop ran) would make
                # write() raise InvalidStateError forever; nothing was sent on it, so open a new one.
                self._call = self._stub.Evaluate(metadata=self._metadata)
            try:
                await self._call.write(pb.EvaluateRequest(events=list(events)))
                response = await self._call.read()
            except (grpc.RpcError, asyncio.InvalidStateError) as exc:
                self._call.cancel()
                self._call = None
                raise LoopwardenUnavailable(_describe(exc)) from None
            if response is grpc.aio.EOF:
                self._call = None
                raise LoopwardenUnavailable("the daemon closed the stream")
        return [_wire.verdict_from_message(v) for v in response.verdicts]

    async def _evaluate_per_run(self, events: Sequence[pb.Event]) -> list[Verdict]:
        verdicts: list = [None] * len(events)
        async with self._lock:
            for root, positions in _by_root(events, self._trees).items():
                batch = [events[i] for i in positions]
                response = await self._run_request(root, batch)
                for position, message in zip(positions, response.verdicts):
                    verdicts[position] = _wire.verdict_from_message(message)
                if _ends(batch, root):
                    self._close_run_call(root)
                _forget_ended(batch, self._trees)
        return verdicts

    async def _run_request(self, run_id: str, batch: list[pb.Event]) -> pb.EvaluateResponse:
        for attempt in (1, 2):
            call = self._run_calls.pop(run_id, None)
            if call is None or call.done():
                if len(self._run_calls) >= self._max_run_streams:
                    self._close_run_call(next(iter(self._run_calls)))
                call = self._stub.Evaluate(metadata=_routed(self._metadata, run_id))
            self._run_calls[run_id] = call
            try:
                await call.write(pb.EvaluateRequest(events=batch))
                response = await call.read()
            except (grpc.RpcError, asyncio.InvalidStateError) as exc:
                self._close_run_call(run_id)
                if attempt == 2:
                    raise LoopwardenUnavailable(_describe(exc)) from None
                continue
            if response is grpc.aio.EOF:
                self._close_run_call(run_id)
                if attempt == 2:
                    raise LoopwardenUnavailable("the daemon closed the stream")
                continue
            return response
        raise AssertionError("unreachable")

    def _close_run_call(self, run_id: str) -> None:
        call = self._run_calls.pop(run_id, None)
        if call is not None:
            call.cancel()

    async def _send(self, event: pb.Event) -> Verdict:
        return (await self.evaluate([event]))[0]

    async def check(self, event: pb.Event, *, routed: str = "") -> Verdict:
        if self.tracing is None:
            return await self._check(event, routed, self._metadata)
        with self.tracing.request([event]) as request:
            return request.answered([await self._check(event, routed, request.metadata(self._metadata))])[0]

    async def _check(self, event: pb.Event, routed: str, metadata: tuple[tuple[str, str], ...]) -> Verdict:
        try:
            response = await self._stub.Check(pb.CheckRequest(event=event), timeout=self._timeout,
                                              metadata=_routed(metadata, routed or self._trees.learn(
                                            event.run_id, event.parent_run_id)))
        except grpc.RpcError as exc:
            raise _rpc_error(exc) from None
        return _wire.verdict_from_message(response.verdict)

    async def inspect(self, run_id: str) -> RunInspection:
        try:
            response = await self._stub.InspectRun(pb.InspectRunRequest(run_id=run_id), timeout=self._timeout,
                                                   metadata=_routed(self._metadata, self._trees.root(run_id)))
        except grpc.RpcError as exc:
            raise _rpc_error(exc) from None
        return _wire.inspection_from_message(response)

    async def list_exemptions(self, *, agent_id: str = "", tool_name: str = "") -> list[Exemption]:
        """The caller's tenant's standing exemptions, newest first (filters: when not empty)."""
        try:
            response = await self._stub.ListExemptions(
                pb.ListExemptionsRequest(agent_id=agent_id, tool_name=tool_name), timeout=self._timeout,
                metadata=self._metadata)
        except grpc.RpcError as exc:
            raise _rpc_error(exc) from None
        return [_wire.exemption_from_message(e) for e in response.exemptions]

    async def revoke_exemption(self, exemption_id: str) -> Exemption:
        """Withdraw one; ExemptionNotFound when the tenant holds no such id."""
        try:
            response = await self._stub.RevokeExemption(pb.RevokeExemptionRequest(id=exemption_id),
                                                        timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise _rpc_error(exc, ExemptionNotFound) from None
        return _wire.exemption_from_message(response.revoked)

    async def close(self) -> None:
        async with self._lock:
            if self._call is not None:
                self._call.cancel()
                self._call = None
            for run_id in list(self._run_calls):
                self._close_run_call(run_id)
        await self._channel.close()


def _rpc_error(exc: grpc.RpcError, not_found: type[LoopwardenError] = RunNotFound) -> LoopwardenError:
    """A unary RPC's failure as the client's own error (NOT_FOUND: the RPC's own `not_found`)."""
    if exc.code() == grpc.StatusCode.NOT_FOUND:
        return not_found(exc.details())
    return LoopwardenUnavailable(_describe(exc))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        return f"{exc.code().name}: {exc.details()}"
    return "the daemon closed the stream"
