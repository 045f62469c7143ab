"""`loopwarden check`: ask about one event from the shell and print the verdict.

Without --result/--error it is a tool_call ("may this call run?"); with one it is that call's
tool_outcome. It uses the unary Check RPC with seq 0 (no retry dedup: every invocation is a new
event), so a run's history builds up across invocations and across clients of one tenant.

Exit status: 0 the call may run (ALLOW, WARN), 1 it may not (BLOCK, ABORT), 2 the event was
rejected or the daemon could not be asked.
"""
from __future__ import annotations

import argparse
import dataclasses
import json

from ..connection import add_connection_arguments
from ..types import Action, Verdict
from .common import EXIT_ERROR, connection_or_none, open_client, report_failure

EXIT_MAY_RUN = 0
EXIT_MAY_NOT_RUN = 1


def add(commands) -> None:
    check = commands.add_parser(
        "check", help="ask about one tool call (or, with --result/--error, report its outcome) and print the verdict; "
                      "exit 0 ALLOW/WARN, 1 BLOCK/ABORT, 2 REJECT or error")
    check.add_argument("--run", required=True, metavar="ID", help="run id")
    check.add_argument("--tool", required=True, metavar="NAME", help="tool name")
    check.add_argument("--params", default="", metavar="JSON", help="the call's arguments as JSON text (default {})")
    outcome = check.add_mutually_exclusive_group()
    outcome.add_argument("--result", metavar="JSON", help="report the call's outcome: what it returned, as JSON text")
    outcome.add_argument("--error", metavar="TEXT", help="report the call's outcome: it failed with this error text")
    check.add_argument("--tool-call-id", default="", metavar="ID",
                       help="the call's id (pairs an outcome with its call)")
    check.add_argument("--agent", default="", metavar="ID", help="agent id (selects the agent's settings)")
    check.add_argument("--session", default="", metavar="ID", help="session id (carried into logs)")
    check.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    check.add_argument("--json", action="store_true", help="print the verdict as JSON")
    add_connection_arguments(check)
    check.set_defaults(handler=run)


def event(args: argparse.Namespace):
    from .. import events

    common = {"tool_call_id": args.tool_call_id, "agent_id": args.agent, "session_id": args.session, "seq": 0}
    if args.result is None and args.error is None:
        return events.tool_call(args.run, args.tool, params_json=args.params, **common)
    return events.tool_outcome(args.run, args.tool, params_json=args.params, result_json=args.result,
                               error=args.error, **common)


def verdict_line(verdict: Verdict) -> str:
    """`BLOCK generic_repeat count=20 decision=…` (the message follows on its own line)."""
    parts = [verdict.action.value.upper()]
    if verdict.shadow_action is not None:
        parts.append(f"(shadow: {verdict.shadow_action.value.upper()})")
    if verdict.detector:
        parts.append(f"{verdict.detector} count={verdict.count}")
    if verdict.error_code:
        parts.append(f"[{verdict.error_code}]")
    if verdict.decision_id:
        parts.append(f"decision={verdict.decision_id}")
    return " ".join(parts)


def exit_status(verdict: Verdict) -> int:
    if verdict.action is Action.REJECT:
        return EXIT_ERROR
    return EXIT_MAY_RUN if verdict.may_run else EXIT_MAY_NOT_RUN


def run(args: argparse.Namespace) -> int:
    from ..types import LoopwardenError

    connection = connection_or_none(args)
    if connection is None:
        return EXIT_ERROR
    with open_client(connection, timeout=args.timeout) as client:
        try:
            verdict = client.check(event(args))
        except LoopwardenError as exc:
            return report_failure(exc, connection)
    if args.json:
        print(json.dumps(dataclasses.asdict(verdict), default=str))
    else:
        print(verdict_line(verdict))
        if verdict.message:
            print(verdict.message)
    return exit_status(verdict)
