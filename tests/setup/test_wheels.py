"""`make wheel`: the core's abi3 wheel, the compiled hook command's wheel and the client's and daemon's
pure-Python wheels, built into dist/, install into a fresh venv on a machine without Rust, the
installed daemon answers a Check and the installed `loopwarden-hook` a Claude Code hook event.

The install runs on a PATH with every command of this machine except the Rust toolchain, from a
temporary directory (so nothing of the source tree is importable), with binary wheels only: no
distribution is compiled where the wheels are installed.
"""
from __future__ import annotations

import email.parser
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.support.daemon import started

# The installed daemon and hook command run; the wheel build every test here shares is a release
# build of the core (minutes cold): make test only.
pytestmark = pytest.mark.daemon

REPO = pathlib.Path(__file__).resolve().parents[2]
DIST = REPO / "dist"
VERSION = "0.1.0"
RUST_TOOLS = ("clippy-driver", "maturin")  # besides cargo*, rust* (rustc, rustup, rustdoc, ...)
BUILD_TIMEOUT_SECONDS = 900  # a cold release build of the core on two cores, plus the two pure wheels
INSTALL_TIMEOUT_SECONDS = 600
STARTUP_TIMEOUT_SECONDS = 60.0


def _is_rust_tool(name: str) -> bool:
    return name in RUST_TOOLS or name.startswith(("cargo", "rust"))


def path_without_rust(bin_dir: pathlib.Path) -> str:
    """A PATH holding every command of this machine's PATH except the Rust toolchain (a directory
    of symlinks), so a tool that looks for cargo or rustc finds neither."""
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        folder = pathlib.Path(directory)
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            link = bin_dir / entry.name
            if _is_rust_tool(entry.name) or link.exists() or link.is_symlink():
                continue
            link.symlink_to(entry.resolve() if entry.is_symlink() else entry)
    return str(bin_dir)


def make_environment() -> dict[str, str]:
    """This process's environment without the flags of an enclosing make (make test-fast)."""
    return {key: value for key, value in os.environ.items() if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}


def environment(path: str) -> dict[str, str]:
    """`make_environment()` with `path` as PATH and nothing pointing at a venv, the source tree, a
    Rust toolchain or a daemon setting."""
    dropped = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    env = {key: value for key, value in make_environment().items()
           if key not in dropped and not key.startswith(("CARGO", "RUSTUP", "LOOPWARDEN_"))}
    env["PATH"] = path
    return env


def system_python() -> str:
    """The machine's own Python 3.11+ (Debian's /usr/bin/python3.11), else the interpreter this
    run's venv was made from."""
    return shutil.which("python3.11", path="/usr/bin:/bin") or str(pathlib.Path(sys.base_prefix, "bin", "python3"))


def _run(args: list, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(arg) for arg in args], capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.fixture(scope="module")
def wheels() -> dict[str, pathlib.Path]:
    """`make wheel` (the core wheel is rebuilt only when a core source changed): the four wheels by
    distribution."""
    built = _run(["make", "--no-print-directory", "wheel"], BUILD_TIMEOUT_SECONDS, cwd=REPO, env=make_environment())
    assert 0 == built.returncode, built.stdout + built.stderr
    found = {}
    for distribution in ("loopwarden_core", "loopwarden_hook", "loopwarden_client", "loopwarden"):
        (found[distribution],) = DIST.glob(f"{distribution}-{VERSION}-*.whl")
    return found


def _names(wheel: pathlib.Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def _metadata(wheel: pathlib.Path, member: str = "METADATA"):
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(f".dist-info/{member}")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def _package_files(package: pathlib.Path) -> set[str]:
    """Every file of a source package as a wheel names it (bytecode caches aside)."""
    return {path.relative_to(package.parent).as_posix() for path in package.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts}


class TestWheelContents:
    def test_the_core_wheel_is_abi3_for_python_3_11_and_up(self, wheels):
        """One compiled wheel serves every CPython >= 3.11: tagged cp311-abi3 in its name and WHEEL."""
        wheel = wheels["loopwarden_core"]
        python_tag, abi_tag, platform_tag = wheel.stem.split("-")[2:]
        tags = _metadata(wheel, "WHEEL").get_all("Tag")

        assert ("cp311", "abi3") == (python_tag, abi_tag)
        assert [f"cp311-abi3-{platform_tag}"] == tags
        assert ">=3.11" == _metadata(wheel)["Requires-Python"]

    def test_the_hook_wheel_holds_the_program_as_an_executable_script_for_the_core_wheels_platform(self, wheels):
        """pip installs a wheel's .data/scripts into the environment's bin/, executable when the
        archive says so; the program links against what the core does, so it carries its platform tag."""
        wheel = wheels["loopwarden_hook"]
        with zipfile.ZipFile(wheel) as archive:
            script = archive.getinfo(f"loopwarden_hook-{VERSION}.data/scripts/loopwarden-hook")
            assert archive.read(script).startswith(b"\x7fELF")
        core_platform = wheels["loopwarden_core"].stem.split("-")[-1]

        assert 0o755 == (script.external_attr >> 16) & 0o777
        assert [f"py3-none-{core_platform}"] == _metadata(wheel, "WHEEL").get_all("Tag")
        assert ("loopwarden-hook", VERSION) == (_metadata(wheel)["Name"], _metadata(wheel)["Version"])
        assert f"loopwarden_hook-{VERSION}.dist-info/licenses/LICENSE" in _names(wheel)

    def test_the_core_wheel_holds_the_extension_its_stub_and_typed_marker(self, wheels):
        names = _names(wheels["loopwarden_core"])

        assert {"loopwarden_core/__init__.py", "loopwarden_core/loopwarden_core.abi3.so",
                "loopwarden_core/__init__.pyi", "loopwarden_core/py.typed"} <= names

    @pytest.mark.parametrize(("distribution", "package"), [
        ("loopwarden_client", REPO / "client" / "python" / "loopwarden"),
        ("loopwarden", REPO / "server" / "loopwarden_server"),
    ])
    def test_a_pure_wheel_holds_every_file_of_its_package(self, wheels, distribution, package):
        """Modules, the generated protobuf stubs and their .pyi, py.typed, the embedded default config:
        the wheel's package is the source package, file for file."""
        in_wheel = {name for name in _names(wheels[distribution]) if name.startswith(package.name + "/")}

        assert _package_files(package) == in_wheel

    @pytest.mark.parametrize("distribution", ["loopwarden_client", "loopwarden"])
    def test_a_pure_wheel_carries_the_license_text_and_its_readme(self, wheels, distribution):
        """The SPDX expression, the LICENSE file (a symlink in the source tree) and the README as description."""
        names = _names(wheels[distribution])
        metadata = _metadata(wheels[distribution])

        assert "Apache-2.0" == metadata["License-Expression"]
        assert f"{distribution}-{VERSION}.dist-info/licenses/LICENSE" in names
        assert metadata.get_payload().startswith("# loopwarden")

    def test_the_daemon_pins_the_client_and_core_wheels_built_beside_it(self, wheels):
        """The daemon's wheel requires exactly the versions of the other two, so the three resolve together."""
        requires = _metadata(wheels["loopwarden"]).get_all("Requires-Dist")
        built = {name.replace("_", "-"): _metadata(wheels[name])["Version"]
                 for name in ("loopwarden_core", "loopwarden_client")}

        assert {f"{name}=={version}" for name, version in built.items()} <= set(requires)


@pytest.fixture(scope="module")
def no_rust_env(tmp_path_factory) -> dict[str, str]:
    tools = path_without_rust(tmp_path_factory.mktemp("no-rust") / "bin")
    return environment(tools)


@pytest.fixture(scope="module")
def installed(wheels, no_rust_env, tmp_path_factory) -> tuple[pathlib.Path, dict[str, str], pathlib.Path]:
    """A fresh venv of the machine's Python with the four wheels (and their registry dependencies)
    installed on a PATH without cargo: (venv, its environment, a working directory outside the repo)."""
    venv_dir = tmp_path_factory.mktemp("wheel-venv")
    work = tmp_path_factory.mktemp("elsewhere")
    env = dict(no_rust_env, PATH=f"{venv_dir / 'bin'}{os.pathsep}{no_rust_env['PATH']}")
    assert (None, None) == (shutil.which("cargo", path=env["PATH"]), shutil.which("rustc", path=env["PATH"]))

    created = _run([system_python(), "-m", "venv", venv_dir], INSTALL_TIMEOUT_SECONDS, cwd=work, env=env)
    assert 0 == created.returncode, created.stderr
    # Binary wheels only: pip would rather fail than build anything (orjson's sdist needs cargo).
    pip = _run([venv_dir / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check",
                "--progress-bar", "off", "--only-binary", ":all:", "--find-links", DIST, *wheels.values()],
               INSTALL_TIMEOUT_SECONDS, cwd=work, env=env)
    assert 0 == pip.returncode, pip.stdout + pip.stderr
    return venv_dir, env, work


# Run by the fresh venv's Python: where the packages come from, the standard health check, then the
# unary Check RPC: a first call, and the 21st of 20 identical calls with identical results.
CHECK_SCRIPT = """
import json, sys, time
import grpc, loopwarden, loopwarden_core, loopwarden_server
from grpc_health.v1 import health_pb2, health_pb2_grpc
from loopwarden import LoopwardenClient, events

target = sys.argv[1]
with grpc.insecure_channel(target) as channel:
    stub = health_pb2_grpc.HealthStub(channel)
    deadline = time.monotonic() + 30
    while True:
        try:
            status = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status
        except grpc.RpcError:
            status = None
        if status == health_pb2.HealthCheckResponse.SERVING or time.monotonic() > deadline:
            break
        time.sleep(0.1)

read = {"path": "/x"}
same = {"content": [{"type": "text", "text": "same"}]}
with LoopwardenClient(target) as client:
    first = client.check(events.tool_call("wheels/first", "read", read, seq=1))
    for index in range(20):
        client.check(events.tool_call("wheels/loop", "read", read, seq=2 * index + 1))
        client.check(events.tool_outcome("wheels/loop", "read", read, result=same, seq=2 * index + 2))
    looping = client.check(events.tool_call("wheels/loop", "read", read, seq=41))

print(json.dumps({
    "files": {m.__name__: m.__file__ for m in (loopwarden, loopwarden_core, loopwarden_server)},
    "health": health_pb2.HealthCheckResponse.ServingStatus.Name(status) if status is not None else None,
    "first": [first.action.name, first.detector],
    "looping": [looping.action.name, looping.detector, looping.count],
}))
"""


class TestInstalledDaemon:
    def test_pip_installed_the_four_distributions_from_the_built_wheels(self, installed, wheels):
        """Each loopwarden distribution in the venv is the wheel file from dist/ (pip's direct_url.json)."""
        venv_dir, env, work = installed
        code = ("import importlib.metadata as m, json; print(json.dumps({d: [m.version(d), json.loads("
                "m.distribution(d).read_text('direct_url.json'))['url']] for d in "
                "('loopwarden', 'loopwarden-client', 'loopwarden-core', 'loopwarden-hook')}))")

        result = _run([venv_dir / "bin" / "python", "-c", code], 60, cwd=work, env=env)

        assert 0 == result.returncode, result.stderr
        assert {distribution.replace("_", "-"): [VERSION, wheel.as_uri()] for distribution, wheel in wheels.items()
                } == json.loads(result.stdout)

    def test_loopwarden_serve_from_the_wheels_answers_a_check(self, installed):
        """`loopwarden serve` from the venv on free loopback ports: healthy, its compiled core loaded from
        the venv, a first call ALLOWed through Check and the 21st identical call BLOCKed; SIGTERM
        stops it with exit 0."""
        venv_dir, env, work = installed
        site_packages = next((venv_dir / "lib").glob("python3.*/site-packages")).resolve()
        command = [str(venv_dir / "bin" / "loopwarden"), "serve", "--listen", "127.0.0.1:0",
                   "--metrics-listen", "127.0.0.1:0"]
        with started(command, env, cwd=work, startup_timeout=STARTUP_TIMEOUT_SECONDS, stop_timeout=30) as daemon:
            mapped = pathlib.Path(f"/proc/{daemon.process.pid}/maps").read_text()

            checked = _run([venv_dir / "bin" / "python", "-c", CHECK_SCRIPT, daemon.listening["grpc_address"]], 120,
                           cwd=work, env=env)

            assert 0 == checked.returncode, checked.stderr
            report = json.loads(checked.stdout)
            assert "SERVING" == report["health"]
            assert ["ALLOW", ""] == report["first"]
            assert ["BLOCK", "generic_repeat", 20] == report["looping"]
            for module, file in report["files"].items():
                assert pathlib.Path(file).resolve().is_relative_to(site_packages), (module, file)
            # The daemon process itself runs the compiled engine from the venv's wheel.
            assert f"{site_packages}/loopwarden_core/loopwarden_core.abi3.so" in mapped
        assert 0 == daemon.process.returncode

    def test_the_installed_core_carries_no_test_hook(self, installed):
        """The release core (built without the `testing` feature) exposes none of the dev build's
        test hooks: no planted panic, no parity helper, no test-only method."""
        venv_dir, env, work = installed
        code = ("import json, loopwarden_core as c; print(json.dumps([c.TEST_HOOKS, [n for n in ("
                "'canonical_json', 'args_digest') if hasattr(c, n)], hasattr(c.Core, '_panic_tool'), "
                "hasattr(c.Persistence, 'encode_run'), hasattr(c.Inspection, 'tenant_runs')]))")

        result = _run([venv_dir / "bin" / "python", "-c", code], 60, cwd=work, env=env)

        assert 0 == result.returncode, result.stderr
        assert [[], [], False, False, False] == json.loads(result.stdout)

    def test_the_installed_hook_command_is_on_path_and_answers_a_claude_code_event(self, installed):
        """`loopwarden-hook`, found on the venv's PATH, posts a Claude Code PreToolUse payload to the
        daemon's hook endpoint (the daemon from the same wheels) and prints its JSON answer."""
        venv_dir, env, work = installed
        hook = shutil.which("loopwarden-hook", path=env["PATH"])
        assert str(venv_dir / "bin" / "loopwarden-hook") == hook
        command = [str(venv_dir / "bin" / "loopwarden"), "serve", "--listen", "127.0.0.1:0",
                   "--metrics-listen", "127.0.0.1:0", "--hooks-listen", "127.0.0.1:0"]
        event = {"session_id": "wheels-hook", "transcript_path": "/tmp/t.jsonl", "cwd": str(work),
                 "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "toolu_1",
                 "tool_input": {"command": "ls", "description": "List the files"}}
        with started(command, env, cwd=work, startup_timeout=STARTUP_TIMEOUT_SECONDS, stop_timeout=30) as daemon:
            answered = _run([hook, "claude-code", "--url", f"http://{daemon.listening['hooks_address']}"], 60,
                            cwd=work, env=env, input=json.dumps(event))

        assert 0 == answered.returncode, answered.stderr
        assert isinstance(json.loads(answered.stdout), dict)
        assert "" == answered.stderr


def test_make_wheel_without_cargo_stops_with_one_line(tmp_path, no_rust_env):
    """On a PATH without cargo, `make wheel` fails, builds nothing, and says in one line why and how to get Rust."""
    out = tmp_path / "dist"

    done = _run(["make", "--no-print-directory", "wheel", f"WHEEL_DIR={out}"], 60, cwd=REPO, env=no_rust_env)

    own = [line for line in done.stderr.splitlines() if not line.startswith("make:")]
    assert 0 != done.returncode
    assert 1 == len(own), done.stderr
    assert "no Rust toolchain (cargo)" in own[0] and "https://rustup.rs" in own[0]
    assert not out.exists()  # stopped before making the output directory, let alone a wheel
