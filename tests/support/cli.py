"""Running the installed `loopwarden` console script the way a shell would."""
from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys


def loopwarden(*args: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the console script installed next to this interpreter, without the caller's LOOPWARDEN_* variables
    (plus `env`)."""
    script = pathlib.Path(sys.executable).parent / "loopwarden"
    assert script.exists(), f"console script not installed at {script}"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWARDEN_")}
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=timeout,
                          env={**clean, **(env or {})})


def dead_address() -> str:
    """A loopback address nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"
