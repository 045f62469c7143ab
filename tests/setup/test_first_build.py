"""The first `make serve`'s builds: the core and the hook command are built with the `quick` cargo
profile and say what they build and for how long (a line every few seconds while cargo is silent),
and a machine without cargo runs on a core already installed in the venv (a wheel from `make wheel`)
instead of stopping on the line that told it to install one.

Cheap: the make rules run in a scratch copy of the Makefile, the scripts and the core's sources,
with stand-ins for cargo and maturin, or on a PATH without the Rust toolchain."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

from tests.setup.test_wheels import environment, make_environment, path_without_rust

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def scratch(tmp_path) -> pathlib.Path:
    """The Makefile, scripts/ and the core's sources (no target/) the core's make rule reads."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(REPO / "Makefile", root)
    shutil.copytree(REPO / "scripts", root / "scripts")
    shutil.copytree(REPO / "core", root / "core", ignore=shutil.ignore_patterns("target"))
    for project in ("client/python", "server"):
        (root / project).mkdir(parents=True)
        shutil.copy(REPO / project / "pyproject.toml", root / project)
    return root


def _executable(path: pathlib.Path, text: str) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _venv(root: pathlib.Path, python: str) -> pathlib.Path:
    """A stand-in venv whose python is `python` (this test run's venv: its loopwarden_core imports)
    and whose pip does nothing."""
    venv = root / "venv"
    _executable(venv / "bin" / "python", f'#!/bin/sh\nexec {python} "$@"\n')
    _executable(venv / "bin" / "pip", "#!/bin/sh\nexit 0\n")
    return venv


def _make(root: pathlib.Path, env: dict[str, str], *goals: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", *goals], cwd=root, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def no_cargo_path(tmp_path_factory) -> str:
    return path_without_rust(tmp_path_factory.mktemp("no-rust") / "bin")


def test_without_cargo_an_installed_core_of_the_right_version_is_used(scratch, no_cargo_path):
    venv = _venv(scratch, sys.executable)

    done = _make(scratch, environment(no_cargo_path), "core", f"VENV={venv}")

    assert 0 == done.returncode, done.stdout + done.stderr
    assert "no Rust toolchain (cargo): using the loopwarden-core already installed" in done.stdout
    assert "==> building" not in done.stdout
    assert (venv / ".installed-core").exists()


def test_without_cargo_or_an_installed_core_one_line_names_the_wheel_path(scratch, no_cargo_path):
    # The machine's Python without site-packages: no loopwarden_core to import.
    venv = _venv(scratch, f"{pathlib.Path(sys.base_prefix, 'bin', 'python3')} -S")

    done = _make(scratch, environment(no_cargo_path), "core", f"VENV={venv}")

    own = [line for line in done.stderr.splitlines() if not line.startswith("make")]
    assert 0 != done.returncode
    assert 1 == len(own), done.stderr
    assert "no Rust toolchain (cargo)" in own[0] and "https://rustup.rs" in own[0]
    assert "make wheel" in own[0] and f"{venv}/bin/pip install dist/*.whl" in own[0]
    assert not (venv / ".installed-core").exists()


def test_without_cargo_an_installed_hook_command_is_used(scratch, no_cargo_path):
    venv = _venv(scratch, sys.executable)
    hook = _executable(venv / "bin" / "loopwarden-hook", "#!/bin/sh\nexit 0\n")
    os.utime(hook, (0, 0))  # older than its sources: make runs the rule

    done = _make(scratch, environment(no_cargo_path), str(hook), f"VENV={venv}")

    assert 0 == done.returncode, done.stderr
    assert f"using the hook command already installed: {hook}" in done.stdout


def _fake_rust(root: pathlib.Path, venv: pathlib.Path, seconds: float) -> tuple[pathlib.Path, pathlib.Path]:
    """cargo and maturin stand-ins that log their arguments; maturin takes `seconds`, printing one
    line first, as cargo does before a long compile."""
    log = root / "calls.log"
    bin_dir = root / "fake-bin"
    _executable(bin_dir / "cargo", f"""#!/bin/sh
echo "cargo $*" >> {log}
for profile in quick release; do mkdir -p core/target/$profile; printf '#!/bin/sh\\n' > core/target/$profile/loopwarden-hook; done
""")
    _executable(venv / "bin" / "maturin", f"""#!/bin/sh
echo "maturin $*" >> {log}
echo "   Compiling loopwarden-core v0.1.0" >&2
sleep {seconds}
""")
    return bin_dir, log


def test_the_core_build_announces_itself_and_prints_a_line_while_cargo_is_silent(scratch):
    venv = _venv(scratch, sys.executable)
    bin_dir, log = _fake_rust(scratch, venv, seconds=3.5)
    env = dict(make_environment(), PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", BUILD_TICK_SECONDS="1")

    started = time.monotonic()
    done = _make(scratch, env, "core", f"VENV={venv}")
    elapsed = time.monotonic() - started

    assert 0 == done.returncode, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("==> building loopwarden-core (Rust, cargo profile quick: about ")
    ticks = [line for line in lines if line.startswith("    ... still building loopwarden-core: ")]
    assert len(ticks) >= 2, done.stdout
    assert lines[-1].startswith("==> loopwarden-core ") and " built into the venv in " in lines[-1]
    # maturin's (and so cargo's) own lines are shown, not silenced with -q; the quick profile by default.
    assert "Compiling loopwarden-core" in done.stderr
    (call,) = log.read_text().splitlines()
    assert call.startswith("maturin develop --profile quick --locked") and " -q" not in call
    # The ticker stops with the build: nothing waits for its last sleep.
    assert elapsed < 3.5 + 3


def test_the_profile_is_a_make_variable_for_the_core_and_the_hook(scratch):
    venv = _venv(scratch, sys.executable)
    bin_dir, log = _fake_rust(scratch, venv, seconds=0)
    env = dict(make_environment(), PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    done = _make(scratch, env, "core", str(venv / "bin" / "loopwarden-hook"), f"VENV={venv}", "CORE_PROFILE=release")

    assert 0 == done.returncode, done.stderr
    maturin, cargo = log.read_text().splitlines()
    assert maturin.startswith("maturin develop --profile release ")
    assert "--profile release" in cargo and "-p loopwarden-hook" in cargo
    assert "==> building loopwarden-hook (Rust, cargo profile release" in done.stdout


def test_the_quick_profile_is_release_without_whole_program_optimisation():
    import tomllib

    profiles = tomllib.loads((REPO / "core" / "Cargo.toml").read_text())["profile"]

    assert {"lto": "fat", "codegen-units": 1} == profiles["release"]  # what a wheel and the image ship
    assert "release" == profiles["quick"]["inherits"]
    assert profiles["quick"]["lto"] in (False, "thin", "off") and profiles["quick"]["codegen-units"] > 1
