"""`python -m loopwarden_server.config check-config FILE` (same as `loopwarden check-config FILE`)."""
from __future__ import annotations

import argparse
import sys

from loopwarden_server.config import check


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loopwarden_server.config")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check_config = commands.add_parser("check-config", help="validate a config file and exit")
    check_config.add_argument("file", metavar="FILE")
    args = parser.parse_args(argv)
    return check.main(["--", args.file])


if __name__ == "__main__":
    sys.exit(main())
