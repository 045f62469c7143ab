"""The `loopwarden` command line."""
from __future__ import annotations

import argparse
import sys


def _check_config(args: argparse.Namespace) -> int:
    # Imported here so the client library does not load the daemon's modules unless asked to.
    from loopwarden_server.config import check

    return check.main(["--", args.file])


def _serve(args: argparse.Namespace) -> int:
    import os

    from loopwarden_server import app
    from loopwarden_server.settings import SettingsError, settings_from

    try:
        settings = settings_from(args, os.environ)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return app.main(settings)


def _health(args: argparse.Namespace) -> int:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

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

    from loopwarden import LoopwardenClient, LoopwardenError, RunNotFound

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


def _online_judge(client, run_prefix: str = ""):
    """A replay judge backed by a daemon: event dict -> the daemon's verdict as an Observed."""
    from loopwarden._wire import event_from_dict
    from loopwarden_server.replay import Observed

    def judge(data: dict) -> Observed:
        if run_prefix and data.get("run_id"):
            data = {**data, "run_id": run_prefix + data["run_id"]}
        verdict = client.evaluate([event_from_dict(data)])[0]
        shadow = getattr(verdict, "shadow_action", None)
        return Observed(verdict.seq, verdict.run_id, verdict.action.value, verdict.detector, verdict.level,
                        verdict.count, verdict.message, verdict.error_code, verdict.tool_name,
                        str(getattr(shadow, "value", shadow) or ""))

    return judge


def _offline_judge(args: argparse.Namespace, run_prefix: str = ""):
    """A replay judge backed by the engine in-process, on --config or the embedded default config."""
    from loopwarden_server.config import load_config_file, load_default_config
    from loopwarden_server.replay import OfflineEngine

    config = load_config_file(args.config) if args.config else load_default_config()
    judge = OfflineEngine(config).judge
    if not run_prefix:
        return judge
    return lambda data: judge({**data, "run_id": run_prefix + data["run_id"]} if data.get("run_id") else data)


def _verdict_line(data: dict, observed) -> str:
    detail = f" {observed.detector} count={observed.count}" if observed.detector else ""
    code = f" [{observed.error_code}]" if observed.error_code else ""
    shadow = f" (shadow: {observed.shadow_action.upper()})" if observed.shadow_action else ""
    return (f"{observed.run_id} seq={observed.seq} {data.get('kind', '?')} {data.get('tool_name', '')}"
            f" -> {observed.action.upper()}{shadow}{detail}{code}"
            f"{' ' + observed.message if observed.message else ''}")


def _replay(args: argparse.Namespace) -> int:
    import contextlib
    import os

    from loopwarden import LoopwardenClient, LoopwardenError
    from loopwarden_server.config import ConfigError
    from loopwarden_server.replay import ReplayTally, TraceError, quiet_daemon_logs, read_trace, run_table, summary_line

    if args.config and not args.offline:
        print("error: --config needs --offline (a daemon replays on its own config)", file=sys.stderr)
        return 2
    tally = ReplayTally()
    with contextlib.ExitStack() as stack:
        try:
            if args.offline:
                stack.enter_context(quiet_daemon_logs())
                judge = _offline_judge(args, args.run_prefix)
            else:
                judge = _online_judge(stack.enter_context(LoopwardenClient(args.address)), args.run_prefix)
        except (ConfigError, OSError) as exc:
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
                    except (TypeError, ValueError, AttributeError) as exc:
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


def _evaluate(args: argparse.Namespace) -> int:
    import json

    from loopwarden import LoopwardenClient, LoopwardenError
    from loopwarden_server.config import ConfigError, load_config_file, load_default_config
    from loopwarden_server.replay import (
        LabelledSetError, TraceError, evaluate_offline, format_report, load_labelled_set, replay_labelled_set, score,
    )

    if args.config and args.address:
        print("error: --config is for offline evaluation; a daemon (--address) evaluates on its own config",
              file=sys.stderr)
        return 2
    try:
        labelled_set = load_labelled_set(args.manifest)
        if args.address:
            with LoopwardenClient(args.address) as client:
                tally = replay_labelled_set(labelled_set, _online_judge(client, args.run_prefix))
            report = score(labelled_set, tally)
        else:
            config = load_config_file(args.config) if args.config else load_default_config()
            report = evaluate_offline(labelled_set, config)
    except (LabelledSetError, TraceError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except LoopwardenError as exc:
        print(f"error: daemon at {args.address}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print("\n".join(format_report(report)))
    if not report.ok or (args.fail_on_warn and report.good_warned):
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopwarden", description="Stop AI agents stuck repeating tool calls.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check_config = commands.add_parser(
        "check-config",
        help="validate a config file with the daemon's loader and exit (0 ok, 1 invalid, 2 unreadable)",
    )
    check_config.add_argument("file", metavar="FILE")
    check_config.set_defaults(handler=_check_config)

    from loopwarden_server.settings import add_serve_arguments

    serve = commands.add_parser("serve", help="run the daemon (embedded default config unless --config)")
    add_serve_arguments(serve)
    serve.set_defaults(handler=_serve)

    health = commands.add_parser("health", help="ask a daemon's gRPC health service; exit 0 when SERVING")
    health.add_argument("--address", default="127.0.0.1:50051", help="HOST:PORT (default 127.0.0.1:50051)")
    health.add_argument("--service", default="", help='service name ("" = the whole server)')
    health.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")
    health.set_defaults(handler=_health)

    inspect = commands.add_parser("inspect", help="show a run's records, guard state, blocks and effective config")
    inspect.add_argument("run_id", metavar="RUN_ID")
    inspect.add_argument("--address", default="127.0.0.1:50051", help="daemon HOST:PORT (default 127.0.0.1:50051)")
    inspect.set_defaults(handler=_inspect)

    replay = commands.add_parser(
        "replay", help="replay traces through a daemon (or, with --offline, the engine in-process) and print verdicts")
    replay.add_argument("files", nargs="+", metavar="FILE",
                        help="trace files (.gz read transparently); several are replayed in order")
    replay.add_argument("--format", choices=("events", "openai"), default="events",
                        help="events: our JSONL event format (default); openai: chat conversations with "
                             "assistant tool_calls and tool messages (a JSON list, or JSONL one per line)")
    replay.add_argument("--offline", action="store_true",
                        help="no daemon: run the engine in-process (exactly the daemon's decisions)")
    replay.add_argument("--config", metavar="FILE",
                        help="with --offline: JSON5 config (default: the embedded default config, detection on)")
    replay.add_argument("--address", default="127.0.0.1:50051", help="daemon HOST:PORT (default 127.0.0.1:50051)")
    replay.add_argument("--run-prefix", default="", help="prefix every run id (replay a trace twice without mixing runs)")
    replay.add_argument("--quiet", action="store_true",
                        help="print only verdicts other than ALLOW (and, in the run table, only runs that had one)")
    replay.add_argument("--runs", action="store_true",
                        help="after the verdicts, a table per run: counts by action, first warning/block/abort")
    replay.add_argument("--summary-only", action="store_true", help="print only the per-run table and the summary")
    replay.set_defaults(handler=_replay)

    evaluate = commands.add_parser(
        "evaluate", help="replay a labelled set (good vs looping runs) and report false blocks, missed loops, "
                         "calls until detection; exit 1 when a good run was blocked or a loop missed")
    evaluate.add_argument("manifest", metavar="MANIFEST",
                          help="labelled-set manifest, e.g. tests/evaluation/labelled/manifest.json")
    evaluate.add_argument("--config", metavar="FILE",
                          help="JSON5 config for the in-process engine (default: the embedded default config)")
    evaluate.add_argument("--address", metavar="HOST:PORT",
                          help="evaluate through a running daemon (on its config) instead of in-process")
    evaluate.add_argument("--run-prefix", default="", help="with --address: prefix every run id sent to the daemon")
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON")
    evaluate.add_argument("--fail-on-warn", action="store_true", help="also exit 1 when a good run was warned")
    evaluate.set_defaults(handler=_evaluate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
