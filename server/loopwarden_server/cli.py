"""The daemon's subcommands of `loopwarden` (entry-point group `loopwarden.commands`) and the
in-process judge behind `loopwarden replay --offline` (group `loopwarden.offline_judges`).

Each `add_*` receives the client CLI's subparsers and adds one command. Heavy modules are
imported inside the handlers, so listing commands (`loopwarden --help`) stays fast.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import cast


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
    from loopwarden.connection import add_connection_arguments

    evaluate = commands.add_parser(
        "evaluate", help="replay a labelled set (good vs looping runs) and report false blocks, missed loops, "
                         "calls until detection; exit 1 when a good run was blocked or a loop missed",
        description="Offline (the engine in-process) unless --address or LOOPWARDEN_ADDRESS names a daemon to "
                    "evaluate through, on its own config.")
    evaluate.add_argument("manifest", metavar="MANIFEST",
                          help="labelled-set manifest, e.g. tests/replay/labelled/manifest.json")
    evaluate.add_argument("--config", metavar="FILE",
                          help="JSON5 config for the in-process engine (default: the embedded default config)")
    evaluate.add_argument("--run-prefix", default="", help="with --address: prefix every run id sent to the daemon")
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON")
    evaluate.add_argument("--html", metavar="FILE",
                          help="also write the report as one self-contained HTML page with plots (offline: with "
                               "a threshold sweep, W from 3 to 20, which replays the set once per W)")
    evaluate.add_argument("--fail-on-warn", action="store_true", help="also exit 1 when a good run was warned")
    # --address (or LOOPWARDEN_ADDRESS) evaluates through a running daemon, on its config; without
    # it the engine runs in-process.
    add_connection_arguments(evaluate)
    evaluate.set_defaults(handler=_evaluate)


def _daemon_address(args: argparse.Namespace) -> str | None:
    """The daemon to evaluate through: --address, else LOOPWARDEN_ADDRESS; None: in-process."""
    return args.address or os.environ.get("LOOPWARDEN_ADDRESS", "").strip() or None


def _evaluate(args: argparse.Namespace) -> int:
    import json

    from loopwarden import LoopwardenError
    from loopwarden.commands.common import connection_or_none, open_client, report_failure
    from loopwarden.connection import Connection
    from loopwarden.replay import TraceError
    from loopwarden.replay.online import daemon_judge

    from .config import ConfigError, load_config_bytes, load_default_config
    from .replay import LabelledSetError, evaluate_offline, format_report, load_labelled_set, replay_labelled_set, score

    online = _daemon_address(args) is not None
    if args.config and online:
        print("error: --config is for offline evaluation; a daemon (--address) evaluates on its own config",
              file=sys.stderr)
        return 2
    connection = connection_or_none(args) if online else None
    if online and connection is None:
        return 2
    settings = config_text = None
    try:
        labelled_set = load_labelled_set(args.manifest)
        if online:
            daemon = cast(Connection, connection)  # online: checked above
            with open_client(daemon) as client:
                tally = replay_labelled_set(labelled_set, daemon_judge(client, args.run_prefix))
            report = score(labelled_set, tally)
            source = f"through the daemon at {daemon.address}"
        else:
            if args.config:
                with open(args.config, "rb") as handle:
                    raw = handle.read()
                config = load_config_bytes(raw, args.config)
                config_text = raw.decode("utf-8-sig")  # valid: load_config_bytes decoded it
            else:
                config = load_default_config()
            report = evaluate_offline(labelled_set, config)
            settings = config.settings_for("")
            source = f"offline on {args.config or 'the embedded default config'}"
    except (LabelledSetError, TraceError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except LoopwardenError as exc:  # the daemon's: online, with a connection
        return report_failure(exc, cast(Connection, connection))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print("\n".join(format_report(report)))
    if args.html:
        from .replay.report import build_html_report, write_html

        try:
            page = build_html_report(labelled_set, report, source=source, settings=settings,
                                     sweep_base_text=config_text)
            write_html(args.html, page)
        except OSError as exc:
            print(f"error: cannot write {args.html}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"html report: {args.html}", file=sys.stderr)
    if not report.ok or (args.fail_on_warn and report.good_warned):
        return 1
    return 0


def add_mcp_proxy(commands) -> None:
    from .mcp_proxy.cli import add_arguments, main

    proxy = commands.add_parser(
        "mcp-proxy", help="stand between an MCP client and an MCP server: every tools/call is checked for loops "
                          "(needs pip install 'loopwarden[mcp]')")
    add_arguments(proxy)
    proxy.set_defaults(handler=main)


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
