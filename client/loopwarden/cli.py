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


def _replay(args: argparse.Namespace) -> int:
    import json

    from loopwarden import LoopwardenClient, LoopwardenError
    from loopwarden._wire import event_from_dict

    counts: dict[str, int] = {}
    with open(args.file, encoding="utf-8") as trace, LoopwardenClient(args.address) as client:
        for line_number, line in enumerate(trace, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                print(f"{args.file}:{line_number}: not JSON: {exc}", file=sys.stderr)
                return 2
            if args.run_prefix and data.get("run_id"):
                data["run_id"] = args.run_prefix + data["run_id"]
            try:
                verdict = client.evaluate([event_from_dict(data)])[0]
            except LoopwardenError as exc:
                print(f"error at {args.file}:{line_number}: {exc}", file=sys.stderr)
                return 2
            counts[verdict.action.value] = counts.get(verdict.action.value, 0) + 1
            if args.quiet and verdict.action.value == "allow":
                continue
            detail = f" {verdict.detector} count={verdict.count}" if verdict.detector else ""
            code = f" [{verdict.error_code}]" if verdict.error_code else ""
            print(f"{verdict.run_id} seq={verdict.seq} {data.get('kind', '?')} {data.get('tool_name', '')}"
                  f" -> {verdict.action.value.upper()}{detail}{code}"
                  f"{' ' + verdict.message if verdict.message else ''}")
    print("summary: " + ", ".join(f"{action}={n}" for action, n in sorted(counts.items())))
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

    replay = commands.add_parser("replay", help="send a JSONL trace of events to a daemon and print each verdict")
    replay.add_argument("file", metavar="FILE.jsonl")
    replay.add_argument("--address", default="127.0.0.1:50051", help="daemon HOST:PORT (default 127.0.0.1:50051)")
    replay.add_argument("--run-prefix", default="", help="prefix every run id (replay a trace twice without mixing runs)")
    replay.add_argument("--quiet", action="store_true", help="print only verdicts other than ALLOW")
    replay.set_defaults(handler=_replay)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
