"""python3 -m tables.gen [--check] [--root DIR]

Writes every generated copy of tables/loopwarden.toml; with --check writes nothing and exits 1
naming each stale copy. --root points at another checkout (the stale-copy test uses a temporary
copy of the repository).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import docs_out, go_out, helm_out, hook_hosts_out, node_out, proto_out, python_out, rust_out
from .regions import RegionError
from .source import SourceError, Tables, load


@dataclass(frozen=True)
class Copy:
    """One generated copy: a whole file (`render`) or regions of a hand-written one (`update`)."""

    path: str
    render: Callable[[Tables], str] | None = None
    update: Callable[[Tables, str], str] | None = None
    build: Callable[[Path], str] | None = None  # from the checkout's code, not the tables

    def expected(self, tables: Tables, root: Path) -> str:
        if self.build is not None:
            return self.build(root)
        if self.render is not None:
            return self.render(tables)
        assert self.update is not None
        return self.update(tables, (root / self.path).read_text(encoding="utf-8"))


COPIES = (
    Copy(rust_out.PATH, render=rust_out.render),
    Copy(python_out.PATH, render=python_out.render),
    Copy(proto_out.PATH, update=proto_out.update),
    Copy(go_out.PATH, render=go_out.render),
    Copy(node_out.PATH, render=node_out.render),
    Copy(helm_out.SCHEMA_PATH, update=helm_out.update_schema),
    Copy(helm_out.VALUES_PATH, update=helm_out.update_values),
    Copy(helm_out.README_PATH, update=helm_out.update_readme),
    Copy(docs_out.CONFIGURATION_PATH, update=docs_out.update_configuration),
    Copy(docs_out.DETECTORS_PATH, update=docs_out.update_detectors),
    Copy(hook_hosts_out.PATH, build=hook_hosts_out.render),
)


def stale(root: Path) -> list[str]:
    """The copies under `root` that differ from what the source under `root` generates."""
    tables = load(root)
    found = []
    for copy in COPIES:
        target = root / copy.path
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current != copy.expected(tables, root):
            found.append(copy.path)
    return found


def write(root: Path) -> list[str]:
    tables = load(root)
    written = []
    for copy in COPIES:
        target = root / copy.path
        text = copy.expected(tables, root)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            written.append(copy.path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tables.gen", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale copy")
    parser.add_argument("--root", type=Path, default=Path("."), help="the checkout to work on (default: .)")
    args = parser.parse_args(argv)
    try:
        if args.check:
            found = stale(args.root)
            for path in found:
                print(f"stale: {path} (generated from tables/loopwarden.toml: run `make tables`)", file=sys.stderr)
            return 1 if found else 0
        for path in write(args.root):
            print(f"wrote {path}")
        return 0
    except (SourceError, RegionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
