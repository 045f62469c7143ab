"""python3 -m tables.gen [--check] [--root DIR]

Writes every generated copy of tables/loopwarden.toml (the settings, detectors, errors,
messages and input limits) and of proto/loopwarden/v1/loopwarden.proto's shapes (the event spelled out, as the
core's Python face and the clients carry it); with --check writes nothing and exits 1 naming
each stale copy. --root points at another checkout (the stale-copy test uses a temporary
copy of the repository).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import (docs_out, go_out, helm_out, hook_hosts_out, limits_out, node_out, proto_out, python_out, rust_out,
               settings_face_out, shapes_out, views_out)
from .proto_source import Proto
from .shapes_out import load as load_proto
from .regions import RegionError
from .source import SourceError, Tables, load


@dataclass(frozen=True)
class Copy:
    """One generated copy: a whole file (`render`) or regions of a hand-written one (`update`),
    of the tables (`of_limits`: of their input limits alone; `of_settings`: of the resolved settings'
    fields alone); the same of the proto's shapes
    (`shape_render`, `shape_update`); or built from the checkout's code (`build`). A file may hold
    regions of more than one source: one Copy each."""

    path: str
    render: Callable[[Tables], str] | None = None
    update: Callable[[Tables, str], str] | None = None
    build: Callable[[Path], str] | None = None  # from the checkout's code, not the tables
    shape_render: Callable[[Proto], str] | None = None
    shape_update: Callable[[Proto, str], str] | None = None
    of_limits: bool = False  # carries the input limits, no setting or detector
    of_settings: bool = False  # carries the resolved settings' fields alone (their crossing into the core)

    @property
    def of_shapes(self) -> bool:
        return self.shape_render is not None or self.shape_update is not None

    def expected(self, tables: Tables, root: Path, proto: Proto) -> str:
        if self.build is not None:
            return self.build(root)
        if self.render is not None:
            return self.render(tables)
        if self.shape_render is not None:
            return self.shape_render(proto)
        current = (root / self.path).read_text(encoding="utf-8")
        if self.shape_update is not None:
            return self.shape_update(proto, current)
        assert self.update is not None
        return self.update(tables, current)


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
    # The resolved settings as one typed object into the core: its class, its stub, what Python passes.
    Copy(settings_face_out.RUST_PATH, render=settings_face_out.render_rust, of_settings=True),
    Copy(settings_face_out.PYI_PATH, update=settings_face_out.update_pyi, of_settings=True),
    Copy(settings_face_out.CORE_PATH, update=settings_face_out.update_core, of_settings=True),
    # The shapes: after proto_out, whose regions are in the proto they are read from.
    Copy(shapes_out.WIRE_PATH, shape_render=shapes_out.render_wire),
    Copy(shapes_out.CORE_EVENT_PATH, shape_render=shapes_out.render_core_event),
    Copy(shapes_out.PYI_PATH, shape_update=lambda p, text: views_out.update_pyi(p, shapes_out.update_pyi(p, text))),
    Copy(shapes_out.EVENTFORMAT_PATH, shape_update=shapes_out.update_eventformat),
    Copy(shapes_out.PY_EXTRA_PATH, shape_render=shapes_out.render_python_extra),
    Copy(shapes_out.GO_EXTRA_PATH, shape_render=shapes_out.render_go_extra),
    Copy(shapes_out.NODE_EVENTS_PATH, shape_update=shapes_out.update_node_events),
    # The views InspectRun gives.
    Copy(views_out.INSPECTION_PATH,
         shape_update=lambda p, text: shapes_out.update_inspection_carried(p, views_out.update_inspection(p, text))),
    # What a record carries: the core's Carried and its stored form.
    Copy(shapes_out.CARRIED_PATH, shape_render=shapes_out.render_carried),
    Copy(shapes_out.STATE_PROTO_PATH, shape_update=shapes_out.update_state_proto),
    Copy(views_out.CONVERT_PATH, shape_update=views_out.update_convert),
    Copy(views_out.TYPES_PATH, shape_update=views_out.update_types),
    Copy(views_out.WIRE_PATH, shape_update=views_out.update_wire),
    Copy(views_out.GO_PATH, shape_update=views_out.update_go),
    Copy(views_out.NODE_TYPES_PATH,
         shape_update=lambda p, text: shapes_out.update_node_types_extra(p, views_out.update_node_types(p, text))),
    Copy(views_out.NODE_INSPECTION_PATH, shape_update=views_out.update_node_inspection),
    # The input limits ([[limit]]); docs/configuration.md's flag table is docs_out's. The chart's files
    # hold regions of both the settings (above) and the limits: one Copy each.
    Copy(limits_out.SERVICE_PATH, render=limits_out.render_service, of_limits=True),
    Copy(limits_out.PYTHON_CORE_PATH, render=limits_out.render_python_core, of_limits=True),
    Copy(limits_out.PYI_PATH, update=limits_out.update_pyi, of_limits=True),
    Copy(limits_out.SETTINGS_PATH, update=limits_out.update_settings, of_limits=True),
    Copy(limits_out.CORE_PATH, update=limits_out.update_core, of_limits=True),
    Copy(limits_out.CLIENT_PATH, render=limits_out.render_client, of_limits=True),
    Copy(helm_out.SCHEMA_PATH, update=helm_out.update_schema_limits, of_limits=True),
    Copy(helm_out.VALUES_PATH, update=helm_out.update_values_limits, of_limits=True),
    Copy(helm_out.HELPERS_PATH, update=helm_out.update_helpers_limits, of_limits=True),
    Copy(helm_out.README_PATH, update=helm_out.update_readme_limits, of_limits=True),
)


def stale(root: Path) -> list[str]:
    """The copies under `root` that differ from what the source under `root` generates."""
    tables, proto = load(root), load_proto(root)
    found = []
    for copy in COPIES:
        target = root / copy.path
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current != copy.expected(tables, root, proto):
            found.append(copy.path)
    return found


def write(root: Path) -> list[str]:
    tables, proto = load(root), load_proto(root)
    written = []
    for copy in COPIES:
        target = root / copy.path
        text = copy.expected(tables, root, proto)
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
                print(f"stale: {path} (generated from tables/loopwarden.toml or the proto: run `make tables`)",
                      file=sys.stderr)
            return 1 if found else 0
        for path in write(args.root):
            print(f"wrote {path}")
        return 0
    except (SourceError, RegionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
