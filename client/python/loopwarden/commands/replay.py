"""`loopwarden replay`: traces through a daemon (or, with --offline, the engine in-process), one
line per verdict, then a summary.

Exit status: 0 when every event was judged and none was rejected; 1 when any event was REJECTed
(the summary says how many); 2 when a trace, the config or the daemon could not be used.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, cast

from ..connection import Connection, add_connection_arguments
from .common import EXIT_ERROR, connection_or_none, open_client, report_failure

OFFLINE_JUDGE_GROUP = "loopwarden.offline_judges"
DAEMON_DISTRIBUTION = "loopwarden"
EXIT_REJECTED = 1


def add(commands) -> None:
    replay = commands.add_parser(
        "replay", help="replay traces through a daemon (or, with --offline, the engine in-process) and print verdicts; "
                       "exit 1 when an event was rejected")
    replay.add_argument("files", nargs="+", metavar="FILE",
                        help="trace files (.gz read transparently); several are replayed in order")
    replay.add_argument("--format", choices=("events", "openai"), default="events",
                        help="events: our JSONL event format (default); openai: chat conversations with "
                             "assistant tool_calls and tool messages (a JSON list, or JSONL one per line)")
    replay.add_argument("--offline", action="store_true",
                        help="no daemon: run the engine in-process (exactly the daemon's decisions; "
                             "needs the daemon distribution)")
    replay.add_argument("--config", metavar="FILE",
                        help="with --offline: JSON5 config (default: the embedded default config, detection on)")
    replay.add_argument("--run-prefix", default="",
                        help="prefix every run id (replay a trace twice without mixing runs)")
    replay.add_argument("--quiet", action="store_true",
                        help="print only verdicts other than ALLOW (and, in the run table, only runs that had one)")
    replay.add_argument("--runs", action="store_true",
                        help="after the verdicts, a table per run: counts by action, first warning/block/abort")
    replay.add_argument("--summary-only", action="store_true", help="print only the per-run table and the summary")
    add_connection_arguments(replay)
    replay.set_defaults(handler=run)


def load_offline_judge(config_path: str | None, run_prefix: str = ""):
    """The engine in-process, from the daemon distribution; LookupError when it is not installed.

    The entry point is called as `factory(config_path, run_prefix)` and raises ValueError or
    OSError (with a message for a person) when the config cannot be used.
    """
    for entry_point in entry_points(group=OFFLINE_JUDGE_GROUP):
        return entry_point.load()(config_path, run_prefix)
    raise LookupError(f"offline replay runs the engine in-process: pip install {DAEMON_DISTRIBUTION}")


def verdict_message(data: Mapping[str, Any], observed) -> str:
    """The verdict's message, except that a kind nobody knows is named rather than called missing
    (the wire cannot carry an unknown kind, so the judge only ever sees "no kind")."""
    from ..eventformat import EventFormatError, describe_kind_problem, parse_event

    if observed.error_code == "missing_event_kind":
        try:
            return describe_kind_problem(parse_event(data)) or observed.message
        except EventFormatError:
            return observed.message
    return observed.message


def verdict_line(data: Mapping[str, Any], observed) -> str:
    detail = f" {observed.detector} count={observed.count}" if observed.detector else ""
    code = f" [{observed.error_code}]" if observed.error_code else ""
    shadow = f" (shadow: {observed.shadow_action.upper()})" if observed.shadow_action else ""
    message = verdict_message(data, observed)
    return (f"{observed.run_id} seq={observed.seq} {data.get('kind', '?')} {data.get('tool_name', '')}"
            f" -> {observed.action.upper()}{shadow}{detail}{code}"
            f"{' ' + message if message else ''}")


def run(args: argparse.Namespace) -> int:
    from ..eventformat import EventFormatError
    from ..replay import ReplayTally, TraceError, read_trace, run_table, summary_line
    from ..replay.online import daemon_judge
    from ..types import LoopwardenError

    if args.config and not args.offline:
        print("error: --config needs --offline (a daemon replays on its own config)", file=sys.stderr)
        return EXIT_ERROR
    connection = None if args.offline else connection_or_none(args)
    if connection is None and not args.offline:
        return EXIT_ERROR
    tally = ReplayTally()
    with contextlib.ExitStack() as stack:
        try:
            if args.offline:
                judge = load_offline_judge(args.config, args.run_prefix)
            else:
                judge = daemon_judge(stack.enter_context(open_client(cast(Connection, connection))), args.run_prefix)
        except LookupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        except (ValueError, OSError) as exc:
            print(f"error: config: {exc}", file=sys.stderr)
            return EXIT_ERROR
        try:
            for path in args.files:
                for event in read_trace(path, args.format):
                    try:
                        observed = judge(event.data)
                    except LoopwardenError as exc:  # the daemon's judge: there is a connection
                        return report_failure(exc, cast(Connection, connection), what=f"at {event.origin}: ")
                    except EventFormatError as exc:
                        print(f"error at {event.origin}: malformed event: {exc}", file=sys.stderr)
                        return EXIT_ERROR
                    tally.add({**event.data, "run_id": observed.run_id}, observed)
                    if not args.summary_only and not (args.quiet and observed.enforced_action == "allow"):
                        print(verdict_line(event.data, observed))
        except TraceError as exc:
            print(str(exc), file=sys.stderr)
            return EXIT_ERROR
        except BrokenPipeError:
            # The reader went away (`| head`): stop quietly, as the Python docs recommend.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        except OSError as exc:
            print(f"error: cannot read trace: {exc}", file=sys.stderr)
            return EXIT_ERROR
    runs = [run for run in tally.runs.values() if run.flagged or not args.quiet]
    if (args.runs or args.summary_only) and runs:
        print("\n".join(run_table(runs)))
    print(summary_line(tally.totals))
    rejected = tally.totals.get("reject", 0)
    if rejected:
        print(f"error: {rejected} event{'s were' if rejected != 1 else ' was'} rejected as malformed (REJECT): "
              "their verdict lines say which field", file=sys.stderr)
        return EXIT_REJECTED
    return 0
