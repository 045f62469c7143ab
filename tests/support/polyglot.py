"""Shared helpers of the polyglot tests: finding node/npm/go/buf, running them, npm ci with a cache.

node, npm and go come with the machine; buf is the PyPI buf-bin of the test extras. A missing
tool fails the test that needs it: a cross-language check that silently skips checks nothing.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NODE_CLIENT = REPO / "client" / "node"
GO_CLIENT = REPO / "client" / "go"
PROTO = REPO / "proto"
BASELINE_IMAGE = PROTO / "baseline" / "loopwarden-v1.binpb"
# Beside the usual places, where the Go tarball and a venv's console scripts live.
_EXTRA_DIRS = ("/usr/local/go/bin", str(Path(sys.executable).parent))
RUN_TIMEOUT_SECONDS = 600


def tool(name: str) -> str:
    """Path of a tool on PATH (or the Go/venv bin dirs); fails the test when it is missing."""
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(_EXTRA_DIRS))
    if found is None:
        pytest.fail(f"{name} is not installed; the polyglot tests need node, npm, go and buf "
                    "(`make test` installs buf; node and go come with the machine)", pytrace=False)
    return found


def runner_env() -> dict[str, str]:
    """The environment of a Node or Go run: the daemon is started with pytest's own interpreter."""
    env = dict(os.environ)
    env["LOOPWARDEN_SERVE_CMD"] = json.dumps([sys.executable, "-m", "loopwarden"])
    # The Go toolchain must not try to fetch another one because go.mod asks for a newer Go.
    env.setdefault("GOTOOLCHAIN", "local")
    return env


@dataclass(frozen=True)
class Completed:
    args: list[str]
    returncode: int
    output: str
    seconds: float

    def tail(self, lines: int = 80) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None,
        timeout: float = RUN_TIMEOUT_SECONDS) -> Completed:
    """Run a command, stdout and stderr merged; never raises on a non-zero exit."""
    started = time.monotonic()
    proc = subprocess.run(args, cwd=cwd, env=env or runner_env(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return Completed(args, proc.returncode, proc.stdout, time.monotonic() - started)


def ensure_node_modules() -> None:
    """`npm ci` in client/node unless node_modules already matches package-lock.json (and node)."""
    node, npm = tool("node"), tool("npm")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    lock = (NODE_CLIENT / "package-lock.json").read_bytes()
    key = hashlib.sha256(lock + version.encode()).hexdigest()
    stamp = NODE_CLIENT / "node_modules" / ".loopwarden-npm-ci"
    if stamp.exists() and stamp.read_text() == key:
        return
    result = run([npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"], NODE_CLIENT)
    if result.returncode != 0:
        pytest.fail(f"npm ci failed ({result.returncode}):\n{result.tail()}", pytrace=False)
    stamp.write_text(key)
