"""The engine stays pure: nothing from transport, metrics, clocks, I/O or the rest of the daemon."""
from __future__ import annotations

import ast
import pathlib

import loopwarden_server.engine as engine

FORBIDDEN = {"grpc", "google", "prometheus_client", "time", "asyncio", "socket", "os", "io",
             "pathlib", "random", "datetime", "threading", "logging", "subprocess", "loopwarden"}


def _imports(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module or "")
    return names


def test_engine_imports_nothing_impure():
    """No engine module imports grpc, protobuf, prometheus, time, asyncio or any I/O module."""
    engine_dir = pathlib.Path(engine.__file__).parent
    offenders = {
        f"{path.name}: {name}"
        for path in sorted(engine_dir.glob("*.py"))
        for name in _imports(path)
        if name.split(".")[0] in FORBIDDEN or (name.startswith("loopwarden_server") and not name.startswith("loopwarden_server.engine"))
    }
    assert set() == offenders


def test_the_check_sees_imports():
    """The import scanner finds real imports (so the test above can fail)."""
    assert {"hashlib", "json", "math"} <= _imports(pathlib.Path(engine.__file__).parent / "jsonvalues.py")
