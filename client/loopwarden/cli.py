"""The `loopwarden` command line."""
from __future__ import annotations

import argparse
import sys


def _check_config(args: argparse.Namespace) -> int:
    # Imported here so the client library does not load the daemon's modules unless asked to.
    from loopwarden_server.config import check

    return check.main(["--", args.file])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopwarden", description="Stop AI agents stuck repeating tool calls.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check_config = commands.add_parser(
        "check-config",
        help="validate a config file with the daemon's loader and exit (0 ok, 1 invalid, 2 unreadable)",
    )
    check_config.add_argument("file", metavar="FILE")
    check_config.set_defaults(handler=_check_config)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
