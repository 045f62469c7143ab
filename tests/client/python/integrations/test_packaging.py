"""The adapters as packaged: no framework is imported until its adapter is, each adapter imports
only its own framework, the extras pin the framework versions these tests ran against, and the
adapters reach the daemon through the client alone."""
from __future__ import annotations

import ast
import importlib.metadata
import pathlib
import subprocess
import sys
import tomllib

import pytest

CLIENT = pathlib.Path(__file__).resolve().parents[4] / "client" / "python"
INTEGRATIONS = CLIENT / "loopwarden" / "integrations"
FRAMEWORKS = {"langchain": ("langchain", "langchain_core", "langgraph"), "openai_agents": ("agents", "openai")}


def loaded_frameworks(code: str) -> list[str]:
    """The framework packages in sys.modules after running `code` in a fresh interpreter."""
    every = sorted({name for names in FRAMEWORKS.values() for name in names})
    probe = f"{code}; import sys; print(sorted(n for n in {every!r} if n in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert 0 == result.returncode, result.stderr
    return eval(result.stdout)


def extra(name: str) -> list[str]:
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    return project["optional-dependencies"][name]


class TestLazyImports:
    def test_the_client_and_the_integrations_package_import_no_framework(self):
        """`import loopwarden`, its client and `loopwarden.integrations` load neither LangChain nor the Agents SDK."""
        assert [] == loaded_frameworks("import loopwarden, loopwarden.integrations; loopwarden.LoopwardenClient")

    @pytest.mark.parametrize(("adapter", "framework"), [("langchain", "langchain"), ("openai_agents", "agents")])
    def test_each_adapter_imports_its_own_framework_only(self, adapter, framework):
        """Importing one adapter loads its framework and none of the other's packages."""
        others = {name for key, names in FRAMEWORKS.items() if key != adapter for name in names}

        loaded = loaded_frameworks(f"import loopwarden.integrations.{adapter}")

        assert framework in loaded
        assert set() == others & set(loaded)


class TestExtras:
    @pytest.mark.parametrize("name", ["langchain", "openai-agents"])
    def test_the_installed_frameworks_are_the_pinned_ones(self, name):
        """Every requirement of the extra is an exact pin, and the environment the tests ran in holds that version."""
        for requirement in extra(name):
            package, _, version = requirement.partition("==")
            assert version, f"{requirement} is not pinned"
            # make test installs both extras: a missing one fails here, it is not skipped.
            assert version == importlib.metadata.version(package), package


class TestLayering:
    @pytest.mark.parametrize("path", sorted(INTEGRATIONS.glob("*.py")), ids=lambda p: p.name)
    def test_adapters_never_touch_grpc_or_the_stubs(self, path):
        """The adapters go through the client's own verbs and types: no grpc, protobuf or generated stubs."""
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                imported.add(("." * node.level) + (node.module or ""))

        wire = {name for name in imported
                if name.split(".")[0] == "grpc" or name.startswith(("google.protobuf", "..v1", "loopwarden.v1"))}
        assert set() == wire
