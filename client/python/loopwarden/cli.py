"""The `loopwarden` command line.

The client distribution ships the commands that talk to a daemon (`health`, `inspect`, `replay`).
Other installed distributions add theirs through the `loopwarden.commands` entry-point group: the
daemon (`loopwarden`) adds `serve`, `check-config` and `evaluate`, and `replay --offline` asks the
`loopwarden.offline_judges` group for the engine in-process. Nothing here imports the daemon, so a
client-only install simply lacks those commands and says which distribution has them.
"""
from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import entry_points

DEFAULT_ADDRESS = "127.0.0.1:50051"
COMMAND_GROUP = "loopwarden.commands"
OFFLINE_JUDGE_GROUP = "loopwarden.offline_judges"
DAEMON_DISTRIBUTION = "loopwarden"
# Commands the daemon distribution adds, named here only to say where to get them.
DAEMON_COMMANDS = {
    "serve": "run the daemon",
    "check-config": "validate a config file with the daemon's loader",
    "evaluate": "replay a labelled set and report false blocks and missed loops",
}


def _health(args: argparse.Namespace) -> int:
    import grpc
    try:
        from grpc_health.v1 import health_pb2, health_pb2_grpc
    except ImportError:
        print("error: `loopwarden health` needs grpcio-health-checking: pip install 'loopwarden-client[health]'",
              file=sys.stderr)
        return 2

    with grpc.insecure_channel(args.address) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout)
        except grpc.RpcError as exc:
            print(f"{args.address}: {exc.code().name}: {exc.details()}", file=sys.stderr)
            return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    print(f"{args.address} {args.service or '(server)'}: {status}")
    return 0 if response.status == health_pb2.HealthCheckResponse.SERVING else 1


def _inspect(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from .client import LoopwardenClient
    from .types import LoopwardenError, RunNotFound

    with LoopwardenClient(args.address) as client:
        try:
            inspection = client.inspect(args.run_id)
        except RunNotFound as exc:
            print(f"not found: {exc}", file=sys.stderr)
            return 1
        except LoopwardenError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    print(json.dumps(dataclasses.asdict(inspection), indent=2))
    return 0


def load_offline_judge(config_path: str | None, run_prefix: str = ""):
    """The engine in-process, from the daemon distribution; LookupError when it is not installed.

    The entry point is called as `factory(config_path, run_prefix)` and raises ValueError or
    OSError (with a message for a person) when the config cannot be used.
    """
    for entry_point in entry_points(group=OFFLINE_JUDGE_GROUP):
        return entry_point.load()(config_path, run_prefix)
    raise LookupError(f"offline replay runs the engine in-process: pip install {DAEMON_DISTRIBUTION}")


def _verdict_line(data: dict, observed) -> str:
    detail = f" {observed.detector} count={observed.count}" if observed.detector else ""
    code = f" [{observed.error_code}]" if observed.error_code else ""
    shadow = f" (shadow: {observed.shadow_action.upper()})" if observed.shadow_action else ""
    return (f"{observed.run_id} seq={observed.seq} {data.get('kind', '?')} {data.get('tool_name', '')}"
            f" -> {observed.action.upper()}{shadow}{detail}{code}"
            f"{' ' + observed.message if observed.message else ''}")


def _replay(args: argparse.Namespace) -> int:
    import contextlib

    from .client import LoopwardenClient
    from .eventformat import EventFormatError
    from .replay import ReplayTally, TraceError, read_trace, run_table, summary_line
    from .replay.online import daemon_judge
    from .types import LoopwardenError

    if args.config and not args.offline:
        print("error: --config needs --offline (a daemon replays on its own config)", file=sys.stderr)
        return 2
    tally = ReplayTally()
    with contextlib.ExitStack() as stack:
        try:
            if args.offline:
                judge = load_offline_judge(args.config, args.run_prefix)
            else:
                judge = daemon_judge(stack.enter_context(LoopwardenClient(args.address)), args.run_prefix)
        except LookupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except (ValueError, OSError) as exc:
            print(f"error: config: {exc}", file=sys.stderr)
            return 2
        try:
            for path in args.files:
                for event in read_trace(path, args.format):
                    try:
                        observed = judge(event.data)
                    except LoopwardenError as exc:
                        print(f"error at {event.origin}: {exc}", file=sys.stderr)
                        return 2
                    except EventFormatError as exc:
                        print(f"error at {event.origin}: malformed event: {exc}", file=sys.stderr)
                        return 2
                    tally.add({**event.data, "run_id": observed.run_id}, observed)
                    if not args.summary_only and not (args.quiet and observed.enforced_action == "allow"):
                        print(_verdict_line(event.data, observed))
        except TraceError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        except BrokenPipeError:
            # The reader went away (`| head`): stop quietly, as the Python docs recommend.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        except OSError as exc:
            print(f"error: cannot read trace: {exc}", file=sys.stderr)
            return 2
    runs = [run for run in tally.runs.values() if run.flagged or not args.quiet]
    if (args.runs or args.summary_only) and runs:
        print("\n".join(run_table(runs)))
    print(summary_line(tally.totals))
    return 0


def _not_installed(command: str):
    def handler(_args: argparse.Namespace) -> int:
        print(f"error: `loopwarden {command}` is part of the daemon: pip install {DAEMON_DISTRIBUTION}",
              file=sys.stderr)
        return 2

    return handler


def _add_client_commands(commands) -> None:
    health = commands.add_parser("health", help="ask a daemon's gRPC health service; exit 0 when SERVING")
    health.add_argument("--address", default=DEFAULT_ADDRESS, help=f"HOST:PORT (default {DEFAULT_ADDRESS})")
    health.add_argument("--service", default="", help='service name ("" = the whole server)')
    health.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")
    health.set_defaults(handler=_health)

    inspect = commands.add_parser("inspect", help="show a run's records, guard state, blocks and effective config")
    inspect.add_argument("run_id", metavar="RUN_ID")
    inspect.add_argument("--address", default=DEFAULT_ADDRESS, help=f"daemon HOST:PORT (default {DEFAULT_ADDRESS})")
    inspect.set_defaults(handler=_inspect)

    replay = commands.add_parser(
        "replay", help="replay traces through a daemon (or, with --offline, the engine in-process) and print verdicts")
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
    replay.add_argument("--address", default=DEFAULT_ADDRESS, help=f"daemon HOST:PORT (default {DEFAULT_ADDRESS})")
    replay.add_argument("--run-prefix", default="", help="prefix every run id (replay a trace twice without mixing runs)")
    replay.add_argument("--quiet", action="store_true",
                        help="print only verdicts other than ALLOW (and, in the run table, only runs that had one)")
    replay.add_argument("--runs", action="store_true",
                        help="after the verdicts, a table per run: counts by action, first warning/block/abort")
    replay.add_argument("--summary-only", action="store_true", help="print only the per-run table and the summary")
    replay.set_defaults(handler=_replay)
    from .hooks.cli import add_hook_command
    add_hook_command(commands)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopwarden", description="Stop AI agents stuck repeating tool calls.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_client_commands(commands)
    added = set(commands.choices)
    for entry_point in sorted(entry_points(group=COMMAND_GROUP), key=lambda ep: ep.name):
        if entry_point.name in added:
            continue  # two distributions claiming one name: the first (alphabetical) wins
        entry_point.load()(commands)
        added.add(entry_point.name)
    for command, summary in DAEMON_COMMANDS.items():
        if command not in added:
            placeholder = commands.add_parser(command, help=f"{summary} (not installed: pip install {DAEMON_DISTRIBUTION})")
            placeholder.set_defaults(handler=_not_installed(command), takes_any_arguments=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "takes_any_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
