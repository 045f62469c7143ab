"""Imports point one way: only the transport and the composition root see grpc and protobuf; the engine sees no daemon layer."""
from __future__ import annotations

import ast
import pathlib

import pytest

import loopwarden_server

PACKAGE_DIR = pathlib.Path(loopwarden_server.__file__).resolve().parent
PACKAGE = "loopwarden_server"

# grpc itself and its add-ons, the generated loopwarden.v1 stubs, and protobuf.
WIRE_PREFIXES = ("grpc", "grpc_health", "grpc_reflection", "grpc_status", "google.protobuf", "loopwarden.v1")
WIRE_ALLOWED = ("transport/", "app.py")
MUST_BE_WIRE_FREE = ("service.py", "store.py", "metrics.py", "config/", "engine/")


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module a source file imports, relative imports resolved against `module`, at any depth of the file."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            # `from pkg import name` may import the submodule pkg.name.
            found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def file_imports(path: pathlib.Path) -> set[str]:
    return imported_modules(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")


def relative(path: pathlib.Path) -> str:
    return path.relative_to(PACKAGE_DIR).as_posix()


def is_under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def wire_imports(path: pathlib.Path) -> set[str]:
    return {name for name in file_imports(path) if any(is_under(name, prefix) for prefix in WIRE_PREFIXES)}


SERVER_FILES = sorted(PACKAGE_DIR.rglob("*.py"))
WIRE_FREE_FILES = [p for p in SERVER_FILES if not relative(p).startswith(WIRE_ALLOWED)]
ENGINE_FILES = [p for p in SERVER_FILES if relative(p).startswith("engine/")]


class TestWireStaysAtTheEdge:
    @pytest.mark.parametrize("path", WIRE_FREE_FILES, ids=relative)
    def test_module_outside_transport_and_app_imports_no_grpc_or_protobuf(self, path):
        """Server modules other than transport/* and app.py import neither grpc, protobuf nor the loopwarden.v1 stubs."""
        assert set() == wire_imports(path)

    @pytest.mark.parametrize("prefix", MUST_BE_WIRE_FREE)
    def test_core_layers_are_checked(self, prefix):
        """service, store, metrics, config and engine all exist and fall under the wire-free check."""
        checked = [relative(p) for p in WIRE_FREE_FILES if relative(p).startswith(prefix)]

        assert checked, f"no module matches {prefix}: the layering check would silently pass"

    def test_transport_and_app_are_where_the_wire_is(self):
        """The transport and app.py do import grpc and the stubs (the allowed list is not stale)."""
        edge = {relative(p): wire_imports(p) for p in SERVER_FILES if relative(p).startswith(WIRE_ALLOWED)}

        assert {"grpc", "loopwarden.v1"} <= edge["transport/servicer.py"]
        assert {"grpc", "loopwarden.v1"} <= edge["app.py"]


class TestDirectionOfImports:
    @pytest.mark.parametrize("path", ENGINE_FILES, ids=relative)
    def test_engine_imports_no_other_daemon_layer(self, path):
        """An engine module imports from loopwarden_server only inside loopwarden_server.engine."""
        outside = {name for name in file_imports(path)
                   if is_under(name, PACKAGE) and not is_under(name, f"{PACKAGE}.engine")}

        assert set() == outside

    @pytest.mark.parametrize("path", ENGINE_FILES, ids=relative)
    def test_engine_imports_no_service_store_or_transport(self, path):
        """No engine module reaches the service, the store or the transport, relatively or absolutely."""
        forbidden = [f"{PACKAGE}.{layer}" for layer in ("service", "store", "transport", "app", "metrics")]

        assert set() == {name for name in file_imports(path) if any(is_under(name, f) for f in forbidden)}

    @pytest.mark.parametrize("name", ["service.py", "store.py"])
    def test_service_and_store_do_not_reach_up(self, name):
        """service.py and store.py import neither the transport nor the composition root."""
        upward = {n for n in file_imports(PACKAGE_DIR / name)
                  if is_under(n, f"{PACKAGE}.transport") or is_under(n, f"{PACKAGE}.app")}

        assert set() == upward


class TestScanner:
    def test_finds_absolute_imports_anywhere_in_a_file(self):
        """The scanner sees top-level, nested and TYPE_CHECKING imports of grpc and protobuf."""
        source = (
            "import grpc\n"
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from google.protobuf import json_format\n"
            "def later():\n"
            "    from loopwarden.v1 import loopwarden_pb2 as pb\n"
        )

        found = imported_modules(source, "loopwarden_server.service")

        assert {"grpc", "google.protobuf", "loopwarden.v1", "loopwarden.v1.loopwarden_pb2"} <= found

    def test_resolves_relative_imports(self):
        """`from ..transport import convert` in the engine resolves to loopwarden_server.transport."""
        found = imported_modules("from ..transport import convert\nfrom . import state\n",
                                 "loopwarden_server.engine.detectors")

        assert {"loopwarden_server.transport", "loopwarden_server.transport.convert",
                "loopwarden_server.engine", "loopwarden_server.engine.state"} <= found

    def test_resolves_relative_imports_in_a_package_init(self):
        """In a package's __init__, `from .evaluate import x` resolves inside that package."""
        found = imported_modules("from .evaluate import evaluate\n", "loopwarden_server.engine", is_package=True)

        assert "loopwarden_server.engine.evaluate" in found

    def test_a_forbidden_import_would_fail_the_check(self):
        """service.py with one added `import grpc.aio` is reported, so the layering check can fail."""
        service = PACKAGE_DIR / "service.py"
        source = service.read_text(encoding="utf-8") + "\nimport grpc.aio\n"

        found = imported_modules(source, module_name(service))

        assert {"grpc.aio"} == {n for n in found if any(is_under(n, p) for p in WIRE_PREFIXES)}

    def test_prefix_match_is_by_module_not_by_text(self):
        """A module merely starting with the letters "grpc" (grpcx) is not taken for grpc."""
        assert (False, True, True) == (is_under("grpcx", "grpc"), is_under("grpc", "grpc"), is_under("grpc.aio", "grpc"))

    def test_real_transport_file_is_seen_importing_grpc(self):
        """Scanning the real transport/servicer.py finds its grpc import and its relative import of the service."""
        found = file_imports(PACKAGE_DIR / "transport" / "servicer.py")

        assert {"grpc", "loopwarden_server.service"} <= found
