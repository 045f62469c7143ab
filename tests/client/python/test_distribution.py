"""The client distribution on its own: installed into a fresh venv with nothing else, it imports
without the daemon, depends only on grpcio and protobuf, and its CLI says where `serve` lives."""
from __future__ import annotations

import email.parser
import json
import pathlib
import subprocess
import sys
import venv
import zipfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
CLIENT = REPO / "client" / "python"
INSTALL_TIMEOUT_SECONDS = 600


def _run(args: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=INSTALL_TIMEOUT_SECONDS,
                          **kwargs)


@pytest.fixture(scope="module")
def client_wheel(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                  "--wheel-dir", out, CLIENT])
    assert built.returncode == 0, built.stderr
    (wheel,) = out.glob("loopwarden_client-*.whl")
    return wheel


@pytest.fixture(scope="module")
def client_only(tmp_path_factory, client_wheel) -> pathlib.Path:
    """A venv holding the client wheel and what pip resolves for it, nothing else."""
    env_dir = tmp_path_factory.mktemp("client-only")
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    installed = _run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", client_wheel])
    assert installed.returncode == 0, installed.stderr
    return python


class TestClientOnlyInstall:
    def test_imports_without_the_daemon(self, client_only):
        """`import loopwarden` and the client class load, and loopwarden_server is not imported."""
        code = ("import loopwarden, sys; from loopwarden import LoopwardenClient; "
                "assert 'loopwarden_server' not in sys.modules; print(LoopwardenClient.__module__)")

        result = _run([client_only, "-c", code])

        assert (0, "loopwarden.client") == (result.returncode, result.stdout.strip()), result.stderr

    def test_the_daemon_is_not_there(self, client_only):
        """`import loopwarden_server` fails in a client-only environment."""
        result = _run([client_only, "-c", "import loopwarden_server"])

        assert 1 == result.returncode
        assert "ModuleNotFoundError: No module named 'loopwarden_server'" in result.stderr

    def test_requirements_are_grpcio_and_protobuf_only(self, client_only):
        """`pip show` lists grpcio and protobuf as the only requirements: no json5, orjson or prometheus-client."""
        result = _run([client_only, "-m", "pip", "show", "loopwarden-client"])
        requires = next(line for line in result.stdout.splitlines() if line.startswith("Requires:"))

        assert {"grpcio", "protobuf"} == {name.strip() for name in requires.removeprefix("Requires:").split(",")}

    def test_installed_packages_are_the_client_and_its_two_dependencies(self, client_only):
        """Nothing of the daemon's dependencies was pulled in."""
        result = _run([client_only, "-m", "pip", "list", "--format", "json"])
        names = {package["name"].lower() for package in json.loads(result.stdout)}

        assert not names & {"json5", "orjson", "prometheus-client", "loopwarden", "grpcio-reflection"}
        assert {"loopwarden-client", "grpcio", "protobuf"} <= names

    def test_stub_import_loads_no_client(self, client_only):
        """`import loopwarden.v1.loopwarden_pb2` does not load the client library (lazy package init)."""
        code = ("import sys, loopwarden.v1.loopwarden_pb2; "
                "print(sorted(m for m in sys.modules if m.startswith('loopwarden')))")

        result = _run([client_only, "-c", code])

        assert ["loopwarden", "loopwarden.v1", "loopwarden.v1.loopwarden_pb2"] == eval(result.stdout)

    def test_serve_names_the_daemon_distribution(self, client_only):
        """`loopwarden serve` in a client-only install exits 2 saying which distribution has it."""
        result = _run([client_only.parent / "loopwarden", "serve", "--listen", "127.0.0.1:0"])

        assert 2 == result.returncode
        assert "`loopwarden serve` is part of the daemon: pip install loopwarden" in result.stderr

    def test_offline_replay_names_the_daemon_distribution(self, client_only, tmp_path):
        """`replay --offline` needs the engine: without the daemon it exits 2 and says so."""
        trace = tmp_path / "t.jsonl"
        trace.write_text('{"run_id": "r", "seq": 1, "kind": "tool_call", "tool_name": "read"}\n')

        result = _run([client_only.parent / "loopwarden", "replay", "--offline", trace])

        assert 2 == result.returncode
        assert "pip install loopwarden" in result.stderr


class TestWheelMetadata:
    def test_spdx_license_and_typed_marker(self, client_wheel):
        """The wheel carries an SPDX License-Expression, the LICENSE file and py.typed."""
        with zipfile.ZipFile(client_wheel) as archive:
            names = archive.namelist()
            metadata = email.parser.Parser().parsestr(
                archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())

        assert "Apache-2.0" == metadata["License-Expression"]
        assert "loopwarden/py.typed" in names
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
