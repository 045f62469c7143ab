"""The container image recipe agrees with the daemon's flags and the chart's values.

There is no Docker engine here, so the Dockerfile is parsed, its build context (as .dockerignore
filters it) is built into a wheel with pip, and its flags are checked against the real CLI.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.deploy.tooling import (
    ALL_OPTIONAL_VALUES,
    DOCKERFILE,
    DOCKERIGNORE,
    REPO,
    daemon_container,
    find,
    flag_values,
    render,
    run,
    values,
    venv_script,
)


@dataclass(frozen=True)
class Instruction:
    stage: int
    keyword: str
    argument: str

    def exec_form(self) -> list[str]:
        parsed = json.loads(self.argument)
        assert isinstance(parsed, list) and all(isinstance(a, str) for a in parsed), self
        return parsed


def parse_dockerfile(path: Path = DOCKERFILE) -> list[Instruction]:
    """Instructions with line continuations joined and comments dropped; stage counts FROMs."""
    instructions: list[Instruction] = []
    stage = -1
    pending = ""
    for raw in path.read_text().splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        line = pending + stripped
        pending = ""
        keyword, _, argument = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        instructions.append(Instruction(stage, keyword, argument.strip()))
    assert not pending, "dangling line continuation"
    return instructions


def final_stage(instructions: list[Instruction]) -> list[Instruction]:
    last = max(i.stage for i in instructions)
    return [i for i in instructions if i.stage == last]


def one(instructions: list[Instruction], keyword: str) -> Instruction:
    found = [i for i in instructions if i.keyword == keyword]
    assert len(found) == 1, f"expected one {keyword} in the final stage, got {found}"
    return found[0]


def build_args(instructions: list[Instruction]) -> dict[str, str]:
    return dict(i.argument.split("=", 1) for i in instructions if i.keyword == "ARG" and "=" in i.argument)


def help_flags(*command: str) -> set[str]:
    """Long flags the real CLI documents for a sub-command."""
    result = run([venv_script("loopwarden"), *command, "--help"])
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", result.stdout)) - {"--help"}


# ---------------------------------------------------------------------------------------------
# .dockerignore, with Docker's semantics: patterns in order, the last match wins, a pattern that
# matches a parent directory matches everything below it.


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    index = 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            out += "(?:.*/)?"
            index += 3
        elif pattern.startswith("**", index):
            out += ".*"
            index += 2
        elif pattern[index] == "*":
            out += "[^/]*"
            index += 1
        elif pattern[index] == "?":
            out += "[^/]"
            index += 1
        else:
            out += re.escape(pattern[index])
            index += 1
    return re.compile(out + r"\Z")


def dockerignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    rules = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        include = line.startswith("!")
        pattern = line[1:] if include else line
        rules.append((include, _pattern_regex(pattern.strip("/"))))
    return rules


def in_build_context(relative: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    parts = relative.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    included = True
    for include, regex in rules:
        if any(regex.match(prefix) for prefix in prefixes):
            included = include
    return included


def build_context_files() -> list[str]:
    rules = dockerignore_rules()
    files = []
    for path in REPO.rglob("*"):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith((".git/", ".venv/", ".cache/")) or not path.is_file():
            continue
        if in_build_context(relative, rules):
            files.append(relative)
    return sorted(files)


# ---------------------------------------------------------------------------------------------


class TestImageShape:
    def test_small_python_base_in_every_stage(self) -> None:
        instructions = parse_dockerfile()
        arguments = build_args(instructions)
        bases = [i.argument.split()[0] for i in instructions if i.keyword == "FROM"]
        resolved = [re.sub(r"\$\{(\w+)\}", lambda m: arguments[m.group(1)], base) for base in bases]
        assert resolved and all(base == "python:3.11-slim" for base in resolved), resolved

    def test_runs_as_the_non_root_user_the_chart_expects(self) -> None:
        """USER is numeric (so runAsNonRoot can verify it) and equals the chart's runAsUser/runAsGroup."""
        final = final_stage(parse_dockerfile())
        user, _, group = one(final, "USER").argument.partition(":")
        assert user.isdigit() and int(user) != 0
        assert int(user) == values()["securityContext"]["runAsUser"] == values()["podSecurityContext"]["runAsUser"]
        assert int(group) == values()["securityContext"]["runAsGroup"] == values()["podSecurityContext"]["runAsGroup"]
        created = " ".join(i.argument for i in final if i.keyword == "RUN")
        assert f"--uid {user}" in created and f"--gid {group}" in created

    def test_exposes_the_ports_of_the_chart(self) -> None:
        exposed = {int(p.split("/")[0]) for p in one(final_stage(parse_dockerfile()), "EXPOSE").argument.split()}
        assert exposed == {values()["daemon"]["grpcPort"], values()["daemon"]["metricsPort"]}
        assert exposed == {values()["service"]["grpcPort"], values()["service"]["metricsPort"]}

    def test_entrypoint_is_the_daemon(self) -> None:
        """ENTRYPOINT runs the project's own console script's serve command (exec form: PID 1 gets SIGTERM)."""
        final = final_stage(parse_dockerfile())
        entrypoint = one(final, "ENTRYPOINT").exec_form()
        assert entrypoint == ["loopwarden", "serve"]
        # `loopwarden` is the client distribution's console script; `serve` is the daemon's subcommand.
        scripts = tomllib.loads((REPO / "client" / "python" / "pyproject.toml").read_text())["project"]["scripts"]
        commands = tomllib.loads((REPO / "server" / "pyproject.toml").read_text())["project"]["entry-points"]
        assert entrypoint[0] in scripts
        assert entrypoint[1] in commands["loopwarden.commands"]
        assert one(final, "STOPSIGNAL").argument == "SIGTERM"


class TestImageFlags:
    def test_default_command_listens_everywhere_on_the_chart_ports_and_reads_the_mounted_config(self) -> None:
        """CMD's flags match the chart: 0.0.0.0 on daemon.grpcPort/metricsPort, config in the mounted directory."""
        cmd = flag_values(one(final_stage(parse_dockerfile()), "CMD").exec_form())
        assert cmd["--listen"] == f"0.0.0.0:{values()['daemon']['grpcPort']}"
        assert cmd["--metrics-listen"] == f"0.0.0.0:{values()['daemon']['metricsPort']}"
        chart_args = flag_values(daemon_container(render())["args"])
        for flag in ("--listen", "--metrics-listen", "--config"):
            assert cmd[flag] == chart_args[flag], flag

    def test_every_flag_exists_in_the_daemon(self) -> None:
        """Flags of CMD, of the chart's container args (all options on) and of the helm test pod
        are all flags the real `loopwarden` CLI documents."""
        serve_flags = help_flags("serve")
        cmd_flags = set(flag_values(one(final_stage(parse_dockerfile()), "CMD").exec_form()))
        assert cmd_flags <= serve_flags, cmd_flags - serve_flags
        for objects in (render(), render(ALL_OPTIONAL_VALUES)):
            chart_flags = set(flag_values(daemon_container(objects)["args"]))
            assert chart_flags <= serve_flags, chart_flags - serve_flags
        health = find(render(), "Pod")["spec"]["containers"][0]["command"]
        assert health[:2] == ["loopwarden", "health"]
        health_flags = set(flag_values(health[2:]))
        assert health_flags <= help_flags("health"), health_flags - help_flags("health")

    def test_image_default_config_is_valid(self, tmp_path: Path) -> None:
        """The config file baked into the image (used without a mounted ConfigMap) passes check-config."""
        final = final_stage(parse_dockerfile())
        (writer,) = [i.argument for i in final if i.keyword == "RUN" and "/etc/loopwarden/loopwarden.json5" in i.argument]
        words = shlex.split(writer)
        start = words.index("printf") + 2  # printf '%s\n' LINE...
        end = words.index(">")
        assert words[end + 1] == one(final, "CMD").exec_form()[-1]
        path = tmp_path / "loopwarden.json5"
        path.write_text("\n".join(words[start:end]) + "\n")
        result = run([venv_script("loopwarden"), "check-config", str(path)], check=False)
        assert result.returncode == 0, result.stdout + result.stderr


class TestBuildContext:
    def test_context_holds_only_what_the_package_needs(self) -> None:
        files = build_context_files()
        tops = {f.split("/")[0] for f in files}
        assert tops <= {"LICENSE", "client", "server", "core"}, tops
        assert not [f for f in files if f.startswith("core/target/")]
        assert {f.split("/")[1] for f in files if f.startswith("client/")} == {"python"}
        assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc")]

    def test_copy_sources_exist_and_are_in_the_context(self) -> None:
        rules = dockerignore_rules()
        for instruction in parse_dockerfile():
            if instruction.keyword != "COPY" or instruction.argument.startswith("--from"):
                continue
            *sources, _destination = instruction.argument.split()
            for source in sources:
                path = REPO / source
                assert path.exists(), f"COPY {source}: missing from the repository"
                assert in_build_context(source.rstrip("/"), rules), f"COPY {source}: excluded by .dockerignore"

    def test_context_builds_both_distributions(self, tmp_path: Path) -> None:
        """`pip wheel` on exactly the files Docker would send builds the client wheel (the client,
        the stubs and the `loopwarden` console script, no daemon) and the daemon wheel (the daemon,
        its subcommands as entry points, no client code)."""
        context = tmp_path / "context"
        for relative in build_context_files():
            target = context / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / relative, target, follow_symlinks=True)
        out = tmp_path / "wheels"
        for distribution in ("client/python", "server"):
            run([venv_script("pip"), "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(out),
                 str(context / distribution)], timeout=300)
        (client_wheel,) = out.glob("loopwarden_client-*.whl")
        (daemon_wheel,) = out.glob("loopwarden-*.whl")
        with zipfile.ZipFile(client_wheel) as archive:
            names = set(archive.namelist())
            entry_points = next(archive.read(n).decode() for n in names if n.endswith("entry_points.txt"))
        assert {"loopwarden/cli.py", "loopwarden/v1/loopwarden_pb2.py", "loopwarden/py.typed"} <= names
        assert not any(n.startswith("loopwarden_server/") for n in names)
        assert any(n.endswith("/licenses/LICENSE") for n in names)
        assert re.search(r"^loopwarden = loopwarden\.cli:main$", entry_points, re.MULTILINE)
        with zipfile.ZipFile(daemon_wheel) as archive:
            names = set(archive.namelist())
            entry_points = next(archive.read(n).decode() for n in names if n.endswith("entry_points.txt"))
        assert {"loopwarden_server/app.py", "loopwarden_server/config/default.json5"} <= names
        assert not any(n.startswith("loopwarden/") for n in names)
        assert re.search(r"^serve = loopwarden_server\.cli:add_serve$", entry_points, re.MULTILINE)


    def test_context_builds_the_core(self, tmp_path: Path) -> None:
        """The core's sources in the context compile with the committed lock file and nothing else
        (no protoc, no path outside it): `cargo check --locked --offline` of the copy, its Python
        module included. The image's core stage builds the same crate with maturin."""
        context = tmp_path / "context"
        for relative in build_context_files():
            if relative.startswith("core/"):
                target = context / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / relative, target, follow_symlinks=True)
        instructions = parse_dockerfile()
        assert any(i.keyword == "RUN" and "maturin build --release --locked" in i.argument for i in instructions)
        copied = [i for i in instructions if i.keyword == "COPY" and i.argument.startswith("--from=core ")]
        installs = [i for i in instructions if i.keyword == "RUN" and "/wheels/loopwarden_core-" in i.argument]
        assert copied and installs and copied[0].stage == installs[0].stage  # the wheel goes into the venv
        result = run(["cargo", "check", "--locked", "--offline", "--quiet", "--features", "python",
                      "--manifest-path", str(context / "core" / "Cargo.toml")],
                     env={**os.environ, "CARGO_TARGET_DIR": str(REPO / "core" / "target")}, timeout=600, check=False)
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("relative", ["server/loopwarden_server/__init__.py", "server/pyproject.toml",
                                      "core/Cargo.toml", "core/Cargo.lock", "core/src/stored.rs", "core/pyproject.toml",
                                      "client/python/loopwarden/cli.py", "client/python/pyproject.toml", "LICENSE"])
def test_dockerignore_keeps_sources(relative: str) -> None:
    assert in_build_context(relative, dockerignore_rules())


@pytest.mark.parametrize("relative", [".venv/bin/python", "tests/deploy/test_dockerfile.py", "helm/loopwarden/Chart.yaml",
                                      "client/node/src/index.js", "client/go/go.mod",
                                      "server/loopwarden_server/__pycache__/app.cpython-311.pyc", ".git/HEAD",
                                      "core/target/release/libloopwarden_core.so"])
def test_dockerignore_drops_the_rest(relative: str) -> None:
    assert not in_build_context(relative, dockerignore_rules())
