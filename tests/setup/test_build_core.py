"""Without a Rust toolchain, the core build (and so `make serve`) stops with one line saying how to
get the engine the daemon cannot run without."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_no_cargo_stops_the_build_with_one_line_naming_the_ways_out(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname"):  # all the script needs before it looks for cargo
        os.symlink(shutil.which(tool), bin_dir / tool)

    done = subprocess.run([str(bin_dir / "bash"), str(REPO / "scripts" / "build-core.sh")], cwd=tmp_path,
                          env={"PATH": str(bin_dir), "VENV": str(tmp_path / "no-venv")},
                          capture_output=True, text=True, timeout=30)

    assert 1 == done.returncode
    (line,) = done.stderr.splitlines()
    assert "no Rust toolchain (cargo)" in line and "https://rustup.rs" in line and "make wheel" in line
