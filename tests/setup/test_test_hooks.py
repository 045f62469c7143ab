"""Test hooks are compiled only into test builds: the core's `testing` feature is on for the dev
venv (`make core`, `make test`: scripts/build-core.sh) and off for every release build (`make
wheel`: scripts/build-wheels.sh; the image: server/Dockerfile), which take pyproject.toml's
features alone. A cheap check of that wiring, builds nothing; tests/setup/test_wheels.py imports the
built release wheel and finds no hook in it, and `cargo test` compiles a check that the core has no
hook field without the feature (core/src/service/mod.rs).
"""
from __future__ import annotations

import pathlib
import re
import tomllib

import loopwarden_core

REPO = pathlib.Path(__file__).resolve().parents[2]
PYTHON_FACE = REPO / "core" / "src" / "python"


def _features(command: str) -> list[str]:
    """The --features of a maturin command line ([] when it names none)."""
    found = re.search(r"--features[ =](\S+)", command)
    return found.group(1).split(",") if found else []


def _maturin_lines(path: pathlib.Path) -> list[str]:
    return [line for line in path.read_text().splitlines()
            if re.search(r"\bmaturin\b.*\b(develop|build)\b", line) and not line.lstrip().startswith("#")]


def test_the_feature_exists_and_is_not_a_default():
    features = tomllib.loads((REPO / "core" / "Cargo.toml").read_text())["features"]
    assert [] == features["testing"]
    assert "testing" not in features["default"]


def test_the_dev_venv_build_turns_it_on():
    """`make core` (scripts/build-core.sh): maturin develop with `python` and `testing` (a --features
    replaces pyproject.toml's list, so `python` is named again)."""
    lines = _maturin_lines(REPO / "scripts" / "build-core.sh")
    assert 1 == len(lines), lines
    assert {"python", "testing"} == set(_features(lines[0]))


def test_release_builds_take_pyprojects_features_without_it():
    """The wheel and the image: maturin build with no --features, so pyproject.toml's, which
    are `python` alone."""
    assert ["python"] == tomllib.loads((REPO / "core" / "pyproject.toml").read_text())["tool"]["maturin"]["features"]
    for path in (REPO / "scripts" / "build-wheels.sh", REPO / "server" / "Dockerfile"):
        lines = _maturin_lines(path)
        assert lines, path
        assert all("testing" not in line and not _features(line) for line in lines), (path, lines)


def _gated_in_source() -> set[str]:
    """Every Python-visible item of the core's face under `#[cfg(feature = "testing")]`: functions
    by name, methods and setters as Class.name (the setter's Python name)."""
    gated = set()
    for path in PYTHON_FACE.glob("*.rs"):
        text = path.read_text()
        if path.name == "testing.rs":  # the whole module is gated: its #[pyfunction]s
            gated.update(re.findall(r"#\[pyfunction\][^\n]*\n(?:#\[[^\n]*\n)*fn (\w+)", text))
            continue
        for match in re.finditer(r'#\[cfg\(feature = "testing"\)\]\s*((?:#\[[^\n]*\]\s*)*)fn (\w+)', text):
            attributes, name = match.groups()
            setter = re.search(r"#\[setter\((\w+)\)\]", attributes)
            rust_class = re.findall(r"impl (\w+) \{", text[:match.start()])[-1]  # the #[pymethods] block
            python_class = {"PyCore": "Core"}.get(rust_class, rust_class)
            gated.add(f"{python_class}.{setter.group(1) if setter else name}")
    return gated


def test_every_gated_item_is_named_as_a_test_hook():
    """TEST_HOOKS (the dev venv's core) names exactly what the source compiles only with `testing`."""
    assert _gated_in_source() == set(loopwarden_core.TEST_HOOKS)


def test_the_dev_venv_core_carries_every_hook():
    """The tests that drive the hooks (the planted panic, the parity helpers) run in make test."""
    for hook in loopwarden_core.TEST_HOOKS:
        owner, _, name = hook.rpartition(".")
        where = getattr(loopwarden_core, owner) if owner else loopwarden_core
        assert hasattr(where, name), hook
