"""`make test` checks what it cannot install before anything else, one line per missing tool."""
from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

# What `make test` needs of this machine (node, go, apt-get, root): make test, not make test-fast.
pytestmark = pytest.mark.system

REPO = pathlib.Path(__file__).resolve().parents[2]
EXTRA_DIRS = ("/usr/local/go/bin",)


def path_without(tmp_path: pathlib.Path, *missing: str) -> str:
    """A PATH with every command of this machine's PATH except `missing` (a directory of symlinks)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for directory in [*os.environ["PATH"].split(os.pathsep), *EXTRA_DIRS]:
        folder = pathlib.Path(directory)
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            link = bin_dir / entry.name
            if entry.name in missing or link.exists() or link.is_symlink():
                continue
            link.symlink_to(entry.resolve() if entry.is_symlink() else entry)
    return str(bin_dir)


def run(args: list[str], path: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("MAKEFLAGS", "MFLAGS")}
    env["PATH"] = path
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_make_test_without_npm_stops_first_naming_npm(tmp_path):
    """On a PATH without npm, `make test` exits non-zero from the prerequisite check, before any
    install, with one line naming npm and how to get it."""
    result = run(["make", "--no-print-directory", "test"], path_without(tmp_path, "npm"))

    missing = [line for line in result.stderr.splitlines() if line.startswith("make test: missing")]
    assert 0 != result.returncode
    assert ["make test: missing npm: install npm with Node.js (Debian: apt-get install npm)"] == missing
    assert "==>" not in result.stdout  # no phase (install, tools, pytest) started


def test_every_missing_tool_gets_its_own_line(tmp_path):
    """Without node and npm, the check names both, each with how to install it."""
    result = run(["bash", "scripts/check-prereqs.sh"], path_without(tmp_path, "node", "npm"))

    names = [line.split(":")[1].strip() for line in result.stderr.splitlines()]
    assert 1 == result.returncode
    assert ["missing node (>= 20)", "missing npm"] == names
    assert all("install" in line for line in result.stderr.splitlines())


def test_this_machine_has_every_prerequisite():
    """Here (and in CI) the check passes silently, so the failures above are about the PATH."""
    result = run(["bash", "scripts/check-prereqs.sh"], os.environ["PATH"])

    assert (0, "") == (result.returncode, result.stderr)
