"""The daemon's subcommands of `loopwarden` (entry-point group `loopwarden.commands`) and the
in-process judge behind `loopwarden replay --offline` (group `loopwarden.offline_judges`).

Each `add_*` receives the client CLI's subparsers and adds one command. Heavy modules are
imported inside the handlers, so listing commands (`loopwarden --help`) stays fast.
"""
from __future__ import annotations

import argparse
import os
import sys


def add_serve(commands) -> None:
    from .settings import add_serve_arguments

    serve = commands.add_parser("serve", help="run the daemon (embedded default config unless --config)")
    add_serve_arguments(serve)
    serve.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from . import app
    from .settings import SettingsError, settings_from

    try:
        settings = settings_from(args, os.environ)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return app.main(settings)


def add_check_config(commands) -> None:
    check_config = commands.add_parser(
        "check-config",
        help="validate a config file with the daemon's loader and exit (0 ok, 1 invalid, 2 unreadable)",
    )
    check_config.add_argument("file", metavar="FILE")
    check_config.set_defaults(handler=_check_config)


def _check_config(args: argparse.Namespace) -> int:
    from .config import check

    return check.main(["--", args.file])


def add_evaluate(commands) -> None:
    evaluate = commands.add_parser(
        "evaluate", help="replay a labelled set (good vs looping runs) and report false blocks, missed loops, "
                         "calls until detection; exit 1 when a good run was blocked or a loop missed")
    evaluate.add_argument("manifest", metavar="MANIFEST",
                          help="labelled-set manifest, e.g. tests/replay/labelled/manifest.json")
    evaluate.add_argument("--config", metavar="FILE",
                          help="JSON5 config for the in-process engine (default: the embedded default config)")
    evaluate.add_argument("--address", metavar="HOST:PORT",
                          help="evaluate through a running daemon (on its config) instead of in-process")
    evaluate.add_argument("--run-prefix", default="", help="with --address: prefix every run id sent to the daemon")
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON")
    evaluate.add_argument("--fail-on-warn", action="store_true", help="also exit 1 when a good run was warned")
    evaluate.set_defaults(handler=_evaluate)


def _evaluate(args: argparse.Namespace) -> int:
    import json

    from loopwarden import LoopwardenClient, LoopwardenError
    from loopwarden.replay import TraceError
    from loopwarden.replay.online import daemon_judge

    from .config import ConfigError, load_config_file, load_default_config
    from .replay import LabelledSetError, evaluate_offline, format_report, load_labelled_set, replay_labelled_set, score

    if args.config and args.address:
        print("error: --config is for offline evaluation; a daemon (--address) evaluates on its own config",
              file=sys.stderr)
        return 2
    try:
        labelled_set = load_labelled_set(args.manifest)
        if args.address:
            with LoopwardenClient(args.address) as client:
                tally = replay_labelled_set(labelled_set, daemon_judge(client, args.run_prefix))
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


def offline_judge(config_path: str | None, run_prefix: str = ""):
    """`replay --offline`: the engine in-process on `config_path` or the embedded default config.

    Raises ConfigError (a ValueError) or OSError when the config cannot be used. The service's
    decision log lines are silenced: a replay prints its own report.
    """
    from loopwarden.replay.online import with_run_prefix

    from .config import load_config_file, load_default_config
    from .replay import OfflineEngine, silence_decision_logs

    config = load_config_file(config_path) if config_path else load_default_config()
    silence_decision_logs()
    judge = OfflineEngine(config).judge
    if not run_prefix:
        return judge
    return lambda data: judge(with_run_prefix(data, run_prefix))
