"""`loopwarden hook HOST` (claude-code, codex, gemini-cli, cursor, ...): the command form of the hook endpoints.

The host runs the command for each hook event with the hook's JSON on stdin. The command asks the
daemon over gRPC (Check, with `x-loopwarden-integration` naming the host) and prints the hook's
JSON answer on stdout, the same answer the HTTP endpoint gives. One process per hook cannot keep
asked calls in memory, so it keeps them as marker files (asked_calls); the flow around the hook
(approvals ahead of the event, the ask remembered, the blocked call's outcome) is the hook driver's
(driver), shared with the daemon's HTTP endpoint. Exit codes follow the hook
protocols: 0 with the answer on stdout (a deny is an answer, not an exit code); 1 for an input
that is not the host's hook JSON, a non-blocking error the host reports and goes on from (the call
runs). With --fail-closed, such an input of a before-tool event (its name still readable) is
answered with a deny instead, as is an event the daemon refused (a REJECT: it judged nothing).
"""
from __future__ import annotations

import argparse
import json
import sys

from ..connection import ConnectionSettingsError, add_connection_arguments, connection_from
from . import driver, hosts
from .asked_calls import AskedCallFiles, default_state_dir
from .host import HookHost, HookPayloadError
from .protocol import INTEGRATION_HEADER, action_of, event_name_in, parse, refused_answer, unavailable_answer
from ..daemon_limits import MAX_OUTPUT_TEXT_BYTES, MAX_PARAMS_BYTES, MAX_RESULT_BYTES

DEFAULT_TIMEOUT_SECONDS = 5.0


def add_hook_command(commands) -> None:
    hook = commands.add_parser(
        "hook",
        help="answer one agent hook event: hook JSON on stdin, the daemon's verdict as the hook's JSON on stdout")
    hook.add_argument("dialect", choices=hosts.names(), metavar="HOST",
                      help=f"whose hook protocol: {', '.join(hosts.names())}")
    hook.add_argument("--agent", default="", metavar="ID",
                      help="agent id for the daemon's per-agent config (default: the global config)")
    hook.add_argument("--fail-closed", action="store_true",
                      help="deny tool calls loopwarden cannot judge: the daemon cannot be asked, refuses the "
                           "event, or the input cannot be read (default: they run, unchecked)")
    hook.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS, metavar="SECONDS",
                      help=f"seconds to wait for the daemon (default {DEFAULT_TIMEOUT_SECONDS:g})")
    # The daemon's event limits (its --max-params-bytes / --max-result-bytes /
    # --max-output-text-bytes): a tool input or output over them is sent as its sha256, length and
    # prefix (reduction), a model's text as its sha256, never refused.
    hook.add_argument("--max-params-bytes", type=_positive, default=MAX_PARAMS_BYTES.default, metavar="N",
                      help=f"the daemon's {MAX_PARAMS_BYTES.flag}: a larger tool_input is judged by its sha256, "
                           f"length and prefix (default {MAX_PARAMS_BYTES.shown})")
    hook.add_argument("--max-result-bytes", type=_positive, default=MAX_RESULT_BYTES.default, metavar="N",
                      help=f"the daemon's {MAX_RESULT_BYTES.flag}: a larger tool_response or error is judged by "
                           f"its sha256, length and prefix (default {MAX_RESULT_BYTES.shown})")
    hook.add_argument("--max-output-text-bytes", type=_positive, default=MAX_OUTPUT_TEXT_BYTES.default, metavar="N",
                      help=f"the daemon's {MAX_OUTPUT_TEXT_BYTES.flag}: a longer model text (a Stop hook's final "
                           f"answer) is judged by its sha256 (default {MAX_OUTPUT_TEXT_BYTES.shown})")
    add_connection_arguments(hook)
    hook.set_defaults(handler=_hook)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of bytes, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def _fail(message: str) -> int:
    print(f"loopwarden hook: {message}", file=sys.stderr)
    return 1


def _unreadable(host: HookHost, raw: bytes, message: str, fail_closed: bool) -> int:
    """An input that is not the host's hook JSON: exit 1 (the host reports it; the call runs), or,
    fail closed, a deny when it is a before-tool event: an error exit would let the call run."""
    name = event_name_in(raw)
    if not (fail_closed and host.is_before_tool(name)):
        return _fail(message)
    print(f"loopwarden hook: {message}; the call is denied (--fail-closed)", file=sys.stderr)
    print(json.dumps(refused_answer(host, name, f"the hook input could not be read: {message}", fail_closed=True)))
    return 0


def _hook(args: argparse.Namespace) -> int:
    host = hosts.host(args.dialect)
    raw = sys.stdin.buffer.read()
    try:
        payload = json.loads(raw)
    except RecursionError:
        return _unreadable(host, raw, "the hook input on stdin is nested too deep to be read", args.fail_closed)
    except ValueError as exc:
        return _unreadable(host, raw, f"the hook input on stdin is not JSON: {exc}", args.fail_closed)
    try:
        request = parse(host, payload, agent_id=args.agent, max_params_bytes=args.max_params_bytes,
                        max_result_bytes=args.max_result_bytes, max_output_bytes=args.max_output_text_bytes)
    except HookPayloadError as exc:
        return _unreadable(host, raw, f"not a {host.name} hook input: {exc}", args.fail_closed)
    except RecursionError:
        return _unreadable(host, raw, "the hook input's tool input is nested too deep to be read",
                           args.fail_closed)
    for reduced in request.reduced:
        print(f"loopwarden hook: {reduced.field} of {reduced.size_bytes} bytes judged by its sha256 "
              f"{reduced.sha256}, length and prefix", file=sys.stderr)
    if request.event is None and request.settles_ask is None:
        print("{}")
        return 0
    try:
        connection = connection_from(args)
    except ConnectionSettingsError as exc:
        return _fail(str(exc))
    asks = AskedCallFiles(default_state_dir()).of(connection.address)
    approvals = driver.approvals(request, asks)
    if request.event is None and not approvals:
        print("{}")  # a denial of a call loopwarden did not ask about
        return 0

    from .._wire import event_from_record
    from ..client import LoopwardenClient
    from ..types import LoopwardenUnavailable

    routed = request.root_run_id  # the run tree's root: a sub-agent's events go where the session's go
    with LoopwardenClient(connection.address, metadata=((INTEGRATION_HEADER, host.integration),),
                          timeout=args.timeout, **connection.client_kwargs()) as client:
        try:
            for approval in approvals:  # ahead of the hook's own event: e.g. the outcome of an approved call
                taken = client.check(event_from_record(approval), routed=routed)
                if taken.error_code:
                    print(f"loopwarden hook: the daemon did not take the approval of {approval.tool_call_id}: "
                          f"{taken.error_code}", file=sys.stderr)
            verdict = client.check(event_from_record(request.event), routed=routed) if request.event else None
            for trailing in request.trailing:  # after the hook's own event: e.g. a sub-agent's run_end
                client.check(event_from_record(trailing), routed=routed)
        except LoopwardenUnavailable as exc:
            print(f"loopwarden hook: the daemon at {connection.address} did not answer: {exc}", file=sys.stderr)
            output = unavailable_answer(request, f"the daemon at {connection.address} did not answer",
                                        fail_closed=args.fail_closed)
        else:
            if verdict is not None and verdict.error_code and action_of(verdict) == "reject":
                print(f"loopwarden hook: the daemon refused this {request.hook_event_name} event "
                      f"({verdict.error_code}): not checked{'; denied (--fail-closed)' if args.fail_closed else ''}",
                      file=sys.stderr)
            result = driver.decided(request, verdict, asks, fail_closed=args.fail_closed,
                                    store=str(default_state_dir()))
            if result.unremembered is not None:
                print(f"loopwarden hook: cannot remember the asked call in {default_state_dir()}: "
                      f"{result.unremembered}", file=sys.stderr)
            output = result.answer
            if result.blocked is not None:
                try:
                    client.check(event_from_record(result.blocked), routed=routed)
                except LoopwardenUnavailable as exc:  # the call is denied either way
                    print(f"loopwarden hook: the blocked call's outcome was not recorded: {exc}", file=sys.stderr)
    print(json.dumps(output))
    return 0
