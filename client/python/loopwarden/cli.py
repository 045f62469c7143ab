"""The `loopwarden` command line.

The client distribution ships the commands that talk to a daemon (`health`, `inspect`, `exemptions`, `check`,
`replay`; each in its module under `loopwarden.commands`, each taking the connection flags of
`loopwarden.connection`). Other installed distributions add theirs through the
`loopwarden.commands` entry-point group: the daemon (`loopwarden`) adds `serve`, `check-config`
and `evaluate`, and `replay --offline` asks the `loopwarden.offline_judges` group for the engine
in-process. Nothing here imports the daemon, so a client-only install simply lacks those commands
and says which distribution has them.
"""
from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, entry_points, version

from .commands import check, exemptions, health, inspect, install_hooks, replay

COMMAND_GROUP = "loopwarden.commands"
CLIENT_DISTRIBUTION = "loopwarden-client"
DAEMON_DISTRIBUTION = "loopwarden"
# Commands the daemon distribution adds, named here only to say where to get them.
DAEMON_COMMANDS = {
    "serve": "run the daemon",
    "check-config": "validate a config file with the daemon's loader",
    "evaluate": "replay a labelled set and report false blocks and missed loops",
    "mcp-proxy": "guard an MCP server: every tools/call is checked first",
}


def _distribution_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def version_text() -> str:
    """`loopwarden-client 0.1.0, loopwarden (daemon) 0.1.0`: what `--version` prints."""
    client = _distribution_version(CLIENT_DISTRIBUTION) or "unknown"
    daemon = _distribution_version(DAEMON_DISTRIBUTION)
    installed = f"{DAEMON_DISTRIBUTION} (daemon) {daemon}" if daemon else "daemon not installed"
    return f"{CLIENT_DISTRIBUTION} {client}, {installed}"


def _not_installed(command: str):
    def handler(_args: argparse.Namespace) -> int:
        print(f"error: `loopwarden {command}` is part of the daemon: pip install {DAEMON_DISTRIBUTION}",
              file=sys.stderr)
        return 2

    return handler


def _add_client_commands(commands) -> None:
    health.add(commands)
    inspect.add(commands)
    exemptions.add(commands)
    check.add(commands)
    replay.add(commands)
    install_hooks.add(commands)
    from .hooks.cli import add_hook_command
    add_hook_command(commands)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopwarden", description="Stop AI agents stuck repeating tool calls.")
    parser.add_argument("--version", action="version", version=version_text())
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
            placeholder = commands.add_parser(
                command, help=f"{summary} (not installed: pip install {DAEMON_DISTRIBUTION})")
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
