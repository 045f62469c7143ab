"""`loopwarden exemptions list|revoke`: the standing approvals ("always" answers to an ASK) a
daemon holds for the caller's tenant, and withdrawing one.

`list` prints a table, newest first (`--json`: the list as JSON); exit 0, also when there is none.
`revoke ID` prints what was revoked (`--json`: it as JSON); exit 0, 1 when the daemon holds no
such id for this tenant. Exit 2 for an error, as every command.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time

from ..connection import add_connection_arguments
from ..types import Exemption
from .common import call_daemon

HASH_CHARS = 12
DEFAULT_AGENT = "default"  # how an exemption of the global config's agent (no agent id) is shown


def add(commands) -> None:
    exemptions = commands.add_parser(
        "exemptions", help="list or revoke standing approvals (\"always\" answers to an ASK) of your tenant")
    verbs = exemptions.add_subparsers(dest="verb", required=True, metavar="VERB")
    listing = verbs.add_parser("list", help="the standing exemptions, newest first")
    listing.add_argument("--agent", default="", metavar="AGENT_ID", help="only this agent's")
    listing.add_argument("--tool", default="", metavar="TOOL", help="only this tool's")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    add_connection_arguments(listing)
    listing.set_defaults(handler=run_list)
    revoke = verbs.add_parser("revoke", help="withdraw one: the next matching critical is asked (or blocked) again")
    revoke.add_argument("exemption_id", metavar="ID", help="an id from `loopwarden exemptions list`")
    revoke.add_argument("--json", action="store_true", help="print the revoked exemption as JSON")
    add_connection_arguments(revoke)
    revoke.set_defaults(handler=run_revoke)


def run_list(args: argparse.Namespace) -> int:
    found, failed = call_daemon(args, lambda client: client.list_exemptions(agent_id=args.agent, tool_name=args.tool))
    if failed is not None:
        return failed
    if args.json:
        print(json.dumps([dataclasses.asdict(e) for e in found], indent=2))
    else:
        print("\n".join(table(found)))
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    from ..types import ExemptionNotFound

    revoked, failed = call_daemon(args, lambda client: client.revoke_exemption(args.exemption_id),
                                  not_found=ExemptionNotFound)
    if failed is not None:
        return failed
    if args.json:
        print(json.dumps(dataclasses.asdict(revoked), indent=2))
    else:
        print(f"revoked {revoked.id} ({_agent(revoked)} · {revoked.tool_name} · args {_args(revoked)})")
    return 0


def _agent(e: Exemption) -> str:
    return e.agent_id or DEFAULT_AGENT


def _args(e: Exemption) -> str:
    return e.args_hash.rpartition(":")[2][:HASH_CHARS]


def _left(e: Exemption, now: float) -> str:
    seconds = max(0, int(e.expires_at - now))
    if seconds >= 86400:
        return f"{seconds // 86400}d{seconds % 86400 // 3600}h"
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60}m"
    return f"{seconds // 60}m{seconds % 60}s"


def table(found: list[Exemption], now: float | None = None) -> list[str]:
    """The exemptions as text lines (a header and one row each), or one line saying there is none."""
    if not found:
        return ["no standing exemptions"]
    now = time.time() if now is None else now
    rows = [("id", "agent", "tool", "args", "expires in", "granted in run")]
    rows += [(e.id, _agent(e), e.tool_name, _args(e), _left(e, now), e.run_id) for e in found]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
