"""Imports point one way, checked on the source of both distributions (the one layering test).

- The client (`client/python/loopwarden`) never imports the daemon (`loopwarden_server`).
- In the daemon, only the transport imports the generated stubs; grpc itself is seen only by the
  transport, the lifecycle (servers, health) and the composition root (app.py).
- The daemon has no Python engine: every event is decided by the compiled core (loopwarden_core);
  no shipped module imports the reference engine, which lives in tests/reference as the oracle.
- The reference engine is pure: no grpc, protobuf, prometheus, clock, I/O or logging.
- The daemon's modules import one another without a circle (the graph of their imports, built
  from the source, is acyclic), and the state store knows nothing of the servicer or of the
  core's per-request face (core.py). `python -m tests.test_layering` prints the graph.
"""
from __future__ import annotations

import ast
import pathlib
import re
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
SERVER_DIR = REPO / "server" / "loopwarden_server"
CLIENT_DIR = REPO / "client" / "python" / "loopwarden"
REFERENCE_DIR = REPO / "tests" / "reference"
SERVER = "loopwarden_server"
STUBS = "loopwarden.v1"

# grpc itself and its add-ons, the generated loopwarden.v1 stubs, and protobuf.
WIRE_PREFIXES = ("grpc", "grpc_health", "grpc_reflection", "grpc_status", "google.protobuf", STUBS)
WIRE_ALLOWED = ("transport/", "app.py", "lifecycle.py")
STUBS_ALLOWED = ("transport/",)
MUST_BE_WIRE_FREE = ("core.py", "hooks_http.py", "metrics.py", "snapshot.py", "config/", "statestore/", "replay/")
# Top-level modules the engine may not import: impure, or another layer.
ENGINE_FORBIDDEN = {"grpc", "google", "prometheus_client", "time", "asyncio", "socket", "os", "io", "pathlib",
                    "random", "datetime", "threading", "logging", "subprocess", "json5", "loopwarden",
                    "loopwarden_core"}


def module_name(path: pathlib.Path, package_dir: pathlib.Path) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
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


def file_imports(path: pathlib.Path, package_dir: pathlib.Path = SERVER_DIR) -> set[str]:
    return imported_modules(path.read_text(encoding="utf-8"), module_name(path, package_dir), path.name == "__init__.py")


def relative(path: pathlib.Path) -> str:
    for base in (SERVER_DIR, CLIENT_DIR, REFERENCE_DIR):
        if path.is_relative_to(base):
            return path.relative_to(base).as_posix()
    raise ValueError(path)


def is_under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def wire_imports(path: pathlib.Path) -> set[str]:
    return {name for name in file_imports(path) if any(is_under(name, prefix) for prefix in WIRE_PREFIXES)}


SERVER_FILES = sorted(SERVER_DIR.rglob("*.py"))
CLIENT_FILES = sorted(CLIENT_DIR.rglob("*.py"))
WIRE_FREE_FILES = [p for p in SERVER_FILES if not relative(p).startswith(WIRE_ALLOWED)]
NON_TRANSPORT_FILES = [p for p in SERVER_FILES if not relative(p).startswith(STUBS_ALLOWED)]
ENGINE_FILES = sorted((REFERENCE_DIR / "engine").rglob("*.py"))


def server_imports_in(path: pathlib.Path, package_dir: pathlib.Path = CLIENT_DIR) -> set[str]:
    return {name for name in file_imports(path, package_dir) if is_under(name, SERVER)}


class TestClientNeverImportsTheDaemon:
    @pytest.mark.parametrize("path", CLIENT_FILES, ids=relative)
    def test_client_module_imports_nothing_of_the_daemon(self, path):
        """No module of the client distribution imports loopwarden_server, at any depth of the file."""
        assert set() == server_imports_in(path)

    def test_the_client_is_scanned(self):
        """The scan sees the client's modules (cli, client, stubs), so the check above cannot pass empty."""
        assert {"cli.py", "client.py", "v1/loopwarden_pb2.py"} <= {relative(p) for p in CLIENT_FILES}

    def test_an_added_daemon_import_fails_the_check(self):
        """cli.py with one added `from loopwarden_server import app` is reported."""
        cli = CLIENT_DIR / "cli.py"
        source = cli.read_text(encoding="utf-8") + "\ndef later():\n    from loopwarden_server import app\n"

        found = imported_modules(source, module_name(cli, CLIENT_DIR))

        assert {"loopwarden_server", "loopwarden_server.app"} == {n for n in found if is_under(n, SERVER)}


class TestWireStaysAtTheEdge:
    @pytest.mark.parametrize("path", WIRE_FREE_FILES, ids=relative)
    def test_module_outside_the_edge_imports_no_grpc_or_protobuf(self, path):
        """Server modules other than transport/*, lifecycle.py and app.py import neither grpc, protobuf nor the stubs."""
        assert set() == wire_imports(path)

    @pytest.mark.parametrize("path", NON_TRANSPORT_FILES, ids=relative)
    def test_only_the_transport_imports_the_stubs(self, path):
        """The generated loopwarden.v1 stubs are imported by transport/* and nothing else of the daemon."""
        assert set() == {name for name in file_imports(path) if is_under(name, STUBS)}

    @pytest.mark.parametrize("prefix", MUST_BE_WIRE_FREE)
    def test_core_layers_are_checked(self, prefix):
        """service, store, metrics, snapshot, config, engine and replay all exist and fall under the check."""
        checked = [relative(p) for p in WIRE_FREE_FILES if relative(p).startswith(prefix)]

        assert checked, f"no module matches {prefix}: the layering check would silently pass"

    def test_the_edge_is_where_the_wire_is(self):
        """The transport, the lifecycle and app.py do import grpc (the allowed list is not stale)."""
        edge = {relative(p): wire_imports(p) for p in SERVER_FILES if relative(p).startswith(WIRE_ALLOWED)}

        assert {"grpc", STUBS} <= edge["transport/servicer.py"]
        assert "grpc" in edge["lifecycle.py"]
        assert "grpc" in edge["app.py"]


class TestOneEngine:
    def test_the_daemon_has_no_python_engine(self):
        """No engine package, service, run store or retry window in the daemon: the core decides."""
        per_event = {relative(p) for p in SERVER_FILES
                     if relative(p).startswith("engine/") or relative(p) in ("service.py", "store.py", "retries.py")}

        assert set() == per_event

    @pytest.mark.parametrize("path", SERVER_FILES + CLIENT_FILES, ids=str)
    def test_no_shipped_module_imports_the_reference(self, path):
        """The reference engine is the tests' oracle: nothing shipped imports it."""
        package_dir = CLIENT_DIR if path.is_relative_to(CLIENT_DIR) else SERVER_DIR
        assert set() == {name for name in file_imports(path, package_dir) if is_under(name, "tests")}

    def test_the_core_decides(self):
        """The daemon's per-event face imports the compiled core."""
        assert "loopwarden_core" in file_imports(SERVER_DIR / "core.py")


class TestReferenceIsPure:
    @pytest.mark.parametrize("path", ENGINE_FILES, ids=relative)
    def test_engine_imports_nothing_impure_or_outside_itself(self, path):
        """No reference engine module imports grpc, protobuf, prometheus, a clock, I/O, logging, the
        core, or a daemon layer other than its config types."""
        offenders = {name for name in file_imports(path, REFERENCE_DIR)
                     if name.split(".")[0] in ENGINE_FORBIDDEN
                     or (is_under(name, SERVER) and not is_under(name, f"{SERVER}.config.detection"))}

        assert set() == offenders

    def test_engine_files_are_found(self):
        """The reference engine's modules, detectors included, are scanned."""
        names = {relative(p) for p in ENGINE_FILES}

        assert {"engine/evaluate.py", "engine/compaction_guard.py", "engine/detectors/ping_pong.py"} <= names


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
                                 "loopwarden_server.engine.evaluate")

        assert {"loopwarden_server.transport", "loopwarden_server.transport.convert",
                "loopwarden_server.engine", "loopwarden_server.engine.state"} <= found

    def test_resolves_relative_imports_in_a_package_init(self):
        """In a package's __init__, `from .evaluate import x` resolves inside that package."""
        found = imported_modules("from .evaluate import evaluate\n", "loopwarden_server.engine", is_package=True)

        assert "loopwarden_server.engine.evaluate" in found

    def test_a_forbidden_import_would_fail_the_check(self):
        """core.py with one added `import grpc.aio` is reported, so the layering check can fail."""
        service = SERVER_DIR / "core.py"
        source = service.read_text(encoding="utf-8") + "\nimport grpc.aio\n"

        found = imported_modules(source, module_name(service, SERVER_DIR))

        assert {"grpc.aio"} == {n for n in found if any(is_under(n, p) for p in WIRE_PREFIXES)}

    def test_prefix_match_is_by_module_not_by_text(self):
        """A module merely starting with the letters "grpc" (grpcx) is not taken for grpc."""
        assert (False, True, True) == (is_under("grpcx", "grpc"), is_under("grpc", "grpc"), is_under("grpc.aio", "grpc"))

    def test_real_transport_file_is_seen_importing_grpc(self):
        """Scanning the real transport/servicer.py finds its grpc import and its relative import of the core."""
        found = file_imports(SERVER_DIR / "transport" / "servicer.py")

        assert {"grpc", "loopwarden_server.core"} <= found


# ------------------------------------------------------------------ the module graph


def server_modules() -> dict[str, pathlib.Path]:
    """Every module of the daemon by its dotted name (a package by its own)."""
    return {module_name(path, SERVER_DIR): path for path in SERVER_FILES}


def module_edges(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The daemon's modules a source file imports, at any depth of the file (TYPE_CHECKING too: a
    circle there is a circle in the design). `from pkg import name` is an edge to the module
    pkg.name when there is one, else to pkg."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    found.add(f"{base}.{alias.name}")
                elif base in known:
                    found.add(base)
    found.discard(module)
    return found


def module_graph() -> dict[str, set[str]]:
    modules = server_modules()
    known = set(modules)
    return {module: module_edges(path.read_text(encoding="utf-8"), module, path.name == "__init__.py", known)
            for module, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def graph_listing(graph: dict[str, set[str]]) -> str:
    """One line per module: the daemon's modules it imports (names relative to the package)."""
    def short(name: str) -> str:
        return name.removeprefix(SERVER + ".") if name != SERVER else "(package)"
    return "\n".join(f"{short(module)} -> {', '.join(sorted(short(d) for d in graph[module])) or '-'}"
                     for module in sorted(graph))


class TestNoImportCircle:
    def test_the_daemons_modules_import_one_another_without_a_circle(self):
        graph = module_graph()
        print(graph_listing(graph))  # pytest -s shows the graph

        assert [] == circles(graph)

    def test_the_state_store_imports_nothing_of_the_servicer_or_the_per_request_face(self):
        """statestore/* reads the core through its roles (loopwarden_core), not through core.py, and
        never sees the transport."""
        graph = module_graph()
        offenders = {module: {d for d in deps if is_under(d, f"{SERVER}.core") or is_under(d, f"{SERVER}.transport")}
                     for module, deps in graph.items() if is_under(module, f"{SERVER}.statestore")}

        assert {module: set() for module in offenders} == offenders
        assert {f"{SERVER}.statestore.keeper", f"{SERVER}.statestore.loader", f"{SERVER}.statestore.flusher",
                f"{SERVER}.statestore.runs"} <= set(offenders)

    def test_the_graph_sees_relative_type_checking_and_package_imports(self):
        """Edges as the scanner reads them: a TYPE_CHECKING import counts, `from . import x`
        names the module x, a name that is not a module names its package."""
        known = {"p", "p.a", "p.b", "p.c", "p.sub", "p.sub.d"}
        source = ("from typing import TYPE_CHECKING\nfrom . import b\nfrom .sub import thing\n"
                  "if TYPE_CHECKING:\n    from .c import C\nimport os\n")

        assert {"p.b", "p.sub", "p.c"} == module_edges(source, "p.a", False, known)

    def test_a_circle_is_found(self):
        """The circle this test once had (core.py -> statestore/keeper.py -> statestore/runs.py ->
        core.py), planted back, is reported; a chain is not."""
        core, keeper, runs = f"{SERVER}.core", f"{SERVER}.statestore.keeper", f"{SERVER}.statestore.runs"

        assert [sorted([core, keeper, runs])] == circles({core: {keeper}, keeper: {runs}, runs: {core}})
        assert [] == circles({core: {keeper}, keeper: {runs}, runs: set()})

    def test_the_graph_covers_every_module(self):
        graph = module_graph()

        assert set(graph) == set(server_modules()) and len(graph) > 50
        assert f"{SERVER}.statestore.runs" in graph[f"{SERVER}.statestore.loader"]


# ------------------------------------------------------------------ the core's module graph

CORE_SRC = REPO / "core" / "src"
# A path a Rust file names a module by: crate::a::b, super::x, self::y (in a `use` or inline).
_RUST_PATH = re.compile(r"\b((?:crate|super|self)(?:::(?:super|\w+))+)")
# Test modules may reach anywhere (a test of the engine reads a stored run back): not the design.
_RUST_TESTS = re.compile(r"#\[cfg\(test\)\]\s*mod \w+\s*\{")
_RUST_COMMENT = re.compile(r"//[^\n]*")


def rust_modules(root: pathlib.Path = CORE_SRC) -> dict[str, pathlib.Path]:
    """Every module of the core by its path (`service::store`; `crate` for lib.rs)."""
    found = {}
    for path in sorted(root.rglob("*.rs")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] in ("mod", "lib"):
            parts.pop()
        found["::".join(parts) or "crate"] = path
    return found


def rust_edges(source: str, module: str, known: set[str]) -> set[str]:
    """The core's modules one file names outside its test modules: the longest known prefix of each
    crate::/super::/self:: path. A module's own ancestors and descendants are not edges (a parent
    declares its children; a child reads its parent's items)."""
    match = _RUST_TESTS.search(source)
    source = _RUST_COMMENT.sub("", source[:match.start()] if match else source)
    own = [] if module == "crate" else module.split("::")
    found: set[str] = set()
    for path in _RUST_PATH.findall(source):
        steps = path.split("::")
        base = [] if steps[0] == "crate" else own[:-1] if steps[0] == "super" else own
        steps = steps[1:]
        while steps and steps[0] == "super":
            base, steps = base[:-1], steps[1:]
        target = None
        for length in range(len(steps) + 1):
            candidate = "::".join(base + steps[:length]) or "crate"
            if candidate in known:
                target = candidate
        related = target is not None and (target == "crate" or module.startswith(target + "::")
                                           or target.startswith(module + "::") or target == module)
        if target is not None and not related:
            found.add(target)
    return found


def rust_graph(root: pathlib.Path = CORE_SRC) -> dict[str, set[str]]:
    modules = rust_modules(root)
    known = set(modules)
    return {module: rust_edges(path.read_text(encoding="utf-8"), module, known) for module, path in modules.items()}


def top_level(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph of the crate's own modules (engine, service, stored, ...), each with its files."""
    def top(module: str) -> str:
        return module.split("::")[0]
    found: dict[str, set[str]] = {}
    for module, deps in graph.items():
        found.setdefault(top(module), set()).update(top(d) for d in deps if top(d) != top(module))
    return found


def rust_listing(graph: dict[str, set[str]]) -> str:
    return "\n".join(f"{module} -> {', '.join(sorted(graph[module])) or '-'}" for module in sorted(graph))


class TestTheCoreHasNoModuleCircle:
    def test_the_cores_modules_name_one_another_without_a_circle(self):
        graph = rust_graph()
        print(rust_listing(graph))  # pytest -s shows the graph

        assert [] == circles(graph)
        assert [] == circles(top_level(graph))

    def test_the_stored_format_knows_nothing_of_the_service(self):
        graph = rust_graph()

        for module in ("stored", "stored_json", "decoded", "tree_link"):
            assert not {d for d in graph[module] if d == "service" or d.startswith("service::")}, module

    def test_the_graph_reads_crate_super_and_inline_paths_and_skips_tests(self):
        known = {"crate", "service", "service::store", "service::trees", "engine", "stored"}
        source = ("use super::trees::TreeLink;\nuse crate::engine::{Run};\nfn f() { crate::stored::encode(); }\n"
                  "/// as `crate::service` does\n#[cfg(test)]\nmod tests {\n    use crate::service::trees;\n}\n")

        assert {"service::trees", "engine", "stored"} == rust_edges(source, "service::store", known)

    def test_a_circle_in_the_core_is_found(self):
        """The circle the stored format once made (stored_json.rs reading stored.rs's types while
        stored.rs dispatched to it) is reported; the layering that replaced it is not."""
        assert [["stored", "stored_json"]] == circles({"stored": {"stored_json"}, "stored_json": {"stored"}})
        assert [] == circles({"stored": {"stored_json", "decoded"}, "stored_json": {"decoded"}, "decoded": set()})

    def test_the_core_graph_covers_every_file(self):
        graph = rust_graph()

        assert len(graph) == len(list(CORE_SRC.rglob("*.rs"))) > 40
        assert "decoded" in graph["stored_json"] and "stored_json" in graph["stored"]


if __name__ == "__main__":
    print(graph_listing(module_graph()))
    print()
    print(rust_listing(rust_graph()))
    print()
    print(rust_listing(top_level(rust_graph())))
    sys.exit(1 if circles(module_graph()) or circles(rust_graph()) or circles(top_level(rust_graph())) else 0)
