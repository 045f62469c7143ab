"""`loopwarden hook claude-code|codex|gemini-cli|cursor`: the command-hook form of the daemon's hook endpoints.

The host runs the command for each hook event with the hook's JSON on stdin. The command asks the
daemon over gRPC (Check, with `x-loopwarden-integration` naming the host) and prints the hook's
JSON answer on stdout, the same answer the HTTP endpoint gives. One process per hook cannot keep
Claude Code's asked calls in memory, so it keeps them as marker files (asked_calls): the process of
a later PostToolUse or PermissionDenied of an asked call sends the person's answer as an `approval`
ahead of its own event. Exit codes follow the hook
protocols: 0 with the answer on stdout (a deny is an answer, not an exit code); 1 for an input
that is not the host's hook JSON, a non-blocking error the host reports and goes on from.
"""
from __future__ import annotations

import argparse
import json
import sys

from ..connection import ConnectionSettingsError, add_connection_arguments, connection_from
from .asked_calls import AskedCallFiles, default_state_dir
from .reduction import DEFAULT_LIMIT_BYTES
from .protocol import (
    INTEGRATION_HEADER, Dialect, HookPayloadError, answer, parse, unavailable_answer, unremembered_ask_answer,
)

DEFAULT_TIMEOUT_SECONDS = 5.0


def add_hook_command(commands) -> None:
    hook = commands.add_parser(
        "hook", help="answer one agent hook event: hook JSON on stdin, the daemon's verdict as the hook's JSON on stdout")
    hook.add_argument("dialect", choices=[dialect.value for dialect in Dialect], metavar="HOST",
                      help="whose hook protocol: claude-code, codex, gemini-cli or cursor")
    hook.add_argument("--agent", default="", metavar="ID",
                      help="agent id for the daemon's per-agent config (default: the global config)")
    hook.add_argument("--fail-closed", action="store_true",
                      help="deny tool calls while the daemon cannot be asked (default: they run, unchecked)")
    hook.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS, metavar="SECONDS",
                      help=f"seconds to wait for the daemon (default {DEFAULT_TIMEOUT_SECONDS:g})")
    # The daemon's event limits (its --max-params-bytes / --max-result-bytes): a tool input or
    # output over them is sent as its sha256, length and prefix (reduction), never refused.
    hook.add_argument("--max-params-bytes", type=_positive, default=DEFAULT_LIMIT_BYTES, metavar="N",
                      help="the daemon's --max-params-bytes: a larger tool_input is judged by its sha256, length "
                           "and prefix (default 1 MiB)")
    hook.add_argument("--max-result-bytes", type=_positive, default=DEFAULT_LIMIT_BYTES, metavar="N",
                      help="the daemon's --max-result-bytes: a larger tool_response or error is judged by its "
                           "sha256, length and prefix (default 1 MiB)")
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


def _hook(args: argparse.Namespace) -> int:
    dialect = Dialect(args.dialect)
    try:
        payload = json.loads(sys.stdin.buffer.read())
    except ValueError as exc:
        return _fail(f"the hook input on stdin is not JSON: {exc}")
    try:
        request = parse(dialect, payload, agent_id=args.agent, max_params_bytes=args.max_params_bytes,
                        max_result_bytes=args.max_result_bytes)
    except HookPayloadError as exc:
        return _fail(f"not a {dialect.value} hook input: {exc}")
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
    asks = AskedCallFiles(default_state_dir())
    approval = None
    if request.settles_ask is not None and request.run is not None and asks.settle(
            connection.address, request.run.run_id, request.tool_call_id):
        approval = request.approval(request.settles_ask)
    if request.event is None and approval is None:
        print("{}")  # a denial of a call loopwarden did not ask about
        return 0

    from .._wire import event_from_record
    from ..client import LoopwardenClient
    from ..types import LoopwardenUnavailable

    routed = request.root_run_id  # the run tree's root: a sub-agent's events go where the session's go
    with LoopwardenClient(connection.address, metadata=((INTEGRATION_HEADER, dialect.integration),),
                          timeout=args.timeout, **connection.client_kwargs()) as client:
        try:
            if approval is not None:  # ahead of the hook's own event: the outcome of an approved call
                taken = client.check(event_from_record(approval), routed=routed)
                if taken.error_code:
                    print(f"loopwarden hook: the daemon did not take the approval of {request.tool_call_id}: "
                          f"{taken.error_code}", file=sys.stderr)
            verdict = client.check(event_from_record(request.event), routed=routed) if request.event else None
        except LoopwardenUnavailable as exc:
            print(f"loopwarden hook: the daemon at {connection.address} did not answer: {exc}", file=sys.stderr)
            output = unavailable_answer(request, f"the daemon at {connection.address} did not answer",
                                        fail_closed=args.fail_closed)
        else:
            output = answer(request, verdict)
            if verdict is not None and request.asked(verdict) and request.run is not None:
                try:
                    asks.asked(connection.address, request.run.run_id, request.tool_call_id)
                except OSError as exc:
                    print(f"loopwarden hook: cannot remember the asked call in {default_state_dir()}: {exc}",
                          file=sys.stderr)
                    output = unremembered_ask_answer(verdict, f"{default_state_dir()} is not writable", dialect)
            blocked = request.blocked_outcome(verdict) if verdict is not None else None
            if blocked is not None:
                try:
                    client.check(event_from_record(blocked), routed=routed)
                except LoopwardenUnavailable as exc:  # the call is denied either way
                    print(f"loopwarden hook: the blocked call's outcome was not recorded: {exc}", file=sys.stderr)
    print(json.dumps(output))
    return 0
