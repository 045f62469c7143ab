"""The compiled `loopwarden-hook` command (core/hook), built from this checkout by cargo: the tests
and the benchmark run the binary of the sources they sit beside, not whatever a venv holds."""
from __future__ import annotations

import functools
import os
import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=1)
def hook_binary() -> pathlib.Path:
    """The release build of loopwarden-hook (cargo rebuilds only what changed)."""
    subprocess.run(["cargo", "build", "--locked", "--release", "-q", "--manifest-path", str(REPO / "core" / "Cargo.toml"),
                    "-p", "loopwarden-hook"], check=True, timeout=600)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "core" / "target")
    if not target.is_absolute():
        target = REPO / "core" / target
    return target / "release" / "loopwarden-hook"
