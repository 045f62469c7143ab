"""Every config `loopwarden install-hooks` writes, and the Claude Code plugin's hooks.json, checked
against each host's own published types, schema or loader:

- Claude Code: compiled with `tsc --strict` as the Claude Agent SDK's `Settings` (0.3.332, the SDK of
  Claude Code 2.1.332), and each `hooks` object also as a record keyed by the SDK's `HookEvent`
  (Settings itself takes any event name, so a misspelled event would pass it);
- Gemini CLI: loaded by Gemini CLI 0.61.0's own settings loader (`loadSettings` in its bundle,
  which validates settings.json against its settings schema), with every event one the schema names
  and every hook of a type and shape its hook registry runs;
- Cursor: the hooks.json v1 shape of Cursor's hooks reference (https://cursor.com/docs/agent/hooks;
  no Cursor build or schema is on a registry), written here as a JSON Schema;
- Codex: the hooks.json types of Codex's source (codex-rs/config: `HooksFile` with
  deny_unknown_fields, the events of `HookEventsToml`, the `command` handler's fields), as a JSON
  Schema, and each matcher a regex.

Each check also fails a broken config, so a check that passes everything would show.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import tomllib

import jsonschema
import pytest

from loopwarden.hookinstall.hosts import HOSTS
from loopwarden.hooks import host as hook_host
from tests.client.python.hooks.test_claude_code_types import PREFIX as SDK_PREFIX
from tests.client.python.hooks.test_claude_code_types import tsc  # noqa: F401 - the SDK and tsc, installed

pytestmark = pytest.mark.node

REPO = pathlib.Path(__file__).resolve().parents[2]
PLUGIN_HOOKS = REPO / "integrations" / "claude-code" / "hooks" / "hooks.json"
GEMINI_PREFIX = REPO / ".cache" / "gemini-cli"
GEMINI_BUNDLE = GEMINI_PREFIX / "node_modules" / "@google" / "gemini-cli" / "bundle"

# The variants of each host's config: the compiled command with and without flags, the Python
# fallback, and merged into a file that already has a person's settings and hooks.
VARIANTS = {
    "compiled": ("--bin-dir", "{compiled}"),
    "flags": ("--bin-dir", "{compiled}", "--agent", "coder", "--url", "http://127.0.0.1:50052", "--fail-closed"),
    "fallback": ("--bin-dir", "{fallback}", "--address", "127.0.0.1:50051", "--fail-closed"),
}
PERSONAL = {
    "claude-code": {"model": "opus", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "/usr/local/bin/audit", "timeout": 5}]}]}},
    "codex": {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "/usr/local/bin/notify"}]}]}},
    "gemini-cli": {"ui": {"theme": "GitHub"}, "hooks": {"AfterAgent": [{"hooks": [
        {"type": "command", "command": "/usr/local/bin/notify", "timeout": 5000}]}]}},
    "cursor": {"version": 1, "hooks": {"afterFileEdit": [{"command": "/usr/local/bin/format"}]}},
}


def bin_dirs(root: pathlib.Path) -> dict[str, str]:
    dirs = {}
    for name, files in (("compiled", ("loopwarden-hook", "loopwarden")), ("fallback", ("loopwarden",))):
        directory = root / name
        directory.mkdir()
        for file in files:
            (directory / file).write_text("#!/bin/sh\n")
            (directory / file).chmod(0o755)
        dirs[name] = str(directory)
    return dirs


def written_configs(host: str, root: pathlib.Path) -> dict[str, dict]:
    """The file install-hooks writes for `host` in each variant (and merged into a person's file)."""
    root.mkdir(parents=True, exist_ok=True)
    dirs = bin_dirs(root)
    script = pathlib.Path(sys.executable).parent / "loopwarden"
    configs = {}
    for variant, template in [*VARIANTS.items(), ("merged", VARIANTS["compiled"])]:
        project = root / f"project-{variant}"
        project.mkdir()
        path = project / HOSTS[host].project_file
        if variant == "merged":
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps(PERSONAL[host], indent=2))
        args = [arg.format(**dirs) for arg in template]
        done = subprocess.run([str(script), "install-hooks", host, "--yes", "--no-check", *args], cwd=project,
                              capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(root)})
        assert 0 == done.returncode, done.stderr
        configs[variant] = json.loads(path.read_text())
    return configs


# -- Claude Code ---------------------------------------------------------------------------------

def claude_source(settings: dict[str, dict], hooks_files: dict[str, dict]) -> str:
    """TypeScript assigning each settings file to `Settings` (and its hooks to the events of
    `HookEvent`), and each plugin hooks file to {description?, hooks}."""
    lines = ['import type { HookEvent, Settings } from "@anthropic-ai/claude-agent-sdk";',
             'type Hooks = NonNullable<Settings["hooks"]>;',
             "type EventHooks = { [Event in HookEvent]?: Hooks[string] };",
             "type PluginHooksFile = { description?: string; hooks: EventHooks };"]
    for index, (name, value) in enumerate(settings.items()):
        lines.append(f"// {name}")
        lines.append(f"export const settings{index}: Settings = {json.dumps(value, indent=1)};")
        lines.append(f"export const events{index}: EventHooks = {json.dumps(value.get('hooks', {}), indent=1)};")
    for index, (name, value) in enumerate(hooks_files.items()):
        lines.append(f"// {name}")
        lines.append(f"export const plugin{index}: PluginHooksFile = {json.dumps(value, indent=1)};")
        lines.append(f"export const pluginSettings{index}: Settings = {{hooks: plugin{index}.hooks}};")
    return "\n".join(lines) + "\n"


def compile_ts(tsc: pathlib.Path, source: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(dir=SDK_PREFIX) as tmp:  # inside the SDK's prefix: node_modules resolves
        path = pathlib.Path(tmp) / "configs.ts"
        path.write_text(source)
        return subprocess.run([str(tsc), "--strict", "--noEmit", "--skipLibCheck", "--module", "nodenext",
                               "--moduleResolution", "nodenext", "--target", "es2022", str(path)],
                              capture_output=True, text=True, timeout=180)


class TestClaudeCode:
    def test_install_hooks_output_and_the_plugin_are_the_sdks_settings(self, tsc, tmp_path):
        configs = written_configs("claude-code", tmp_path)

        result = compile_ts(tsc, claude_source(configs, {"plugin hooks.json": json.loads(PLUGIN_HOOKS.read_text())}))

        assert 0 == result.returncode, result.stdout + result.stderr
        assert configs["flags"]["hooks"]["PreToolUse"][0]["hooks"][0]["onFailure"] == "block"

    def test_the_check_catches_a_misspelled_event_and_a_wrong_field(self, tsc):
        misspelled = {"hooks": {"PreToolUsed": [{"hooks": [{"type": "command", "command": "x"}]}]}}
        wrong = {"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "x", "onFailure": "deny"}]}]}}

        result = compile_ts(tsc, claude_source({"misspelled": misspelled}, {"wrong": wrong}))

        assert 0 != result.returncode
        assert "PreToolUsed" in result.stdout and '"deny"' in result.stdout


# -- Gemini CLI ----------------------------------------------------------------------------------

# Gemini CLI's own loader, imported from the bundle chunk that exports it (chunk names are hashed per
# build); prints the loader's errors and the hook events its settings schema names.
GEMINI_CHECK = """
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
const [bundle, workspace] = process.argv.slice(2);
const chunk = fs.readdirSync(bundle).filter((name) => name.endsWith(".js")).map((name) => path.join(bundle, name))
  .find((file) => /export \\{[^}]*\\bgetSettingsSchema\\b[^}]*\\bloadSettings\\b/s.test(fs.readFileSync(file, "utf8")));
if (!chunk) throw new Error("no chunk of the Gemini CLI bundle exports loadSettings");
const cli = await import(pathToFileURL(chunk).href);
const loaded = cli.loadSettings(workspace);
console.log(JSON.stringify({
  errors: loaded.errors.map((error) => error.message),
  events: Object.keys(cli.getSettingsSchema().hooks.properties),
}));
"""


@pytest.fixture(scope="module")
def gemini_cli() -> pathlib.Path:
    subprocess.run(["bash", str(REPO / "scripts" / "install-gemini-cli.sh")], check=True, timeout=900)
    return GEMINI_BUNDLE


def gemini_load(bundle: pathlib.Path, settings: dict, root: pathlib.Path) -> dict:
    workspace, home = root / "workspace", root / "home"
    (workspace / ".gemini").mkdir(parents=True)
    home.mkdir()
    (workspace / ".gemini" / "settings.json").write_text(json.dumps(settings))
    script = root / "check.mjs"
    script.write_text(GEMINI_CHECK)
    done = subprocess.run(["node", str(script), str(bundle), str(workspace)], capture_output=True, text=True,
                          timeout=120, cwd=workspace, env={**os.environ, "HOME": str(home)})
    assert 0 == done.returncode, done.stderr
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "hooks": settings.get("hooks", {})}


def gemini_problems(report: dict) -> list[str]:
    problems = list(report["errors"])
    for event, definitions in report["hooks"].items():
        if event not in report["events"]:
            problems.append(f"unknown event {event}")
        for definition in definitions:
            for hook in definition.get("hooks", []):
                # Gemini CLI's hook registry skips a hook of another type, or a command hook without a command.
                if hook.get("type") != "command" or not isinstance(hook.get("command"), str) or not hook["command"]:
                    problems.append(f"{event}: a hook Gemini CLI would skip: {hook}")
    return problems


class TestGeminiCli:
    def test_install_hooks_output_loads_in_gemini_clis_own_loader(self, gemini_cli, tmp_path):
        configs = written_configs("gemini-cli", tmp_path / "configs")

        for variant, settings in configs.items():
            report = gemini_load(gemini_cli, settings, tmp_path / variant)

            assert [] == gemini_problems(report), variant
            assert set(report["hooks"]) >= {"BeforeTool", "AfterTool", "BeforeAgent", "SessionEnd", "AfterModel",
                                            "AfterAgent"}

    def test_the_check_catches_a_misspelled_event_and_a_wrong_type(self, gemini_cli, tmp_path):
        bad = {"hooks": {"BeforeTools": [{"hooks": [{"type": "command", "command": "x"}]}],
                         "AfterTool": [{"hooks": [{"type": "command", "command": "x", "timeout": "10s"}]}]}}

        problems = gemini_problems(gemini_load(gemini_cli, bad, tmp_path))

        assert any("unknown event BeforeTools" in problem for problem in problems)
        assert any("hooks.AfterTool[0].hooks[0].timeout" in problem for problem in problems)


# -- Cursor --------------------------------------------------------------------------------------

CURSOR_EVENTS = ["sessionStart", "sessionEnd", "preToolUse", "postToolUse", "postToolUseFailure", "subagentStart",
                 "subagentStop", "beforeShellExecution", "afterShellExecution", "beforeMCPExecution",
                 "afterMCPExecution", "beforeReadFile", "afterFileEdit", "beforeSubmitPrompt", "preCompact", "stop",
                 "afterAgentResponse", "afterAgentThought", "beforeTabFileRead", "afterTabFileEdit"]
CURSOR_SCHEMA = {
    "type": "object",
    "required": ["version", "hooks"],
    "properties": {
        "version": {"const": 1},
        "hooks": {
            "type": "object",
            "propertyNames": {"enum": CURSOR_EVENTS},
            "additionalProperties": {"type": "array", "items": {
                "type": "object",
                "required": ["command"],
                "properties": {"command": {"type": "string", "minLength": 1}, "type": {"const": "command"},
                               "timeout": {"type": "number"}, "matcher": {"type": "string"},
                               "failClosed": {"type": "boolean"}},
                "additionalProperties": False,
            }},
        },
    },
}


class TestCursor:
    def test_install_hooks_output_is_cursors_hooks_json_v1(self, tmp_path):
        for variant, config in written_configs("cursor", tmp_path).items():
            jsonschema.validate(config, CURSOR_SCHEMA)
            assert config["hooks"]["preToolUse"], variant

    @pytest.mark.parametrize("bad", [
        {"hooks": {"preToolUse": [{"command": "x"}]}},
        {"version": 1, "hooks": {"preToolUsed": [{"command": "x"}]}},
        {"version": 1, "hooks": {"preToolUse": [{"type": "command", "command": "x", "hooks": []}]}},
    ])
    def test_the_check_catches_a_missing_version_a_misspelled_event_and_a_claude_shape(self, bad):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, CURSOR_SCHEMA)


# -- Codex ---------------------------------------------------------------------------------------

CODEX_EVENTS = ["PreToolUse", "PermissionRequest", "PostToolUse", "PreCompact", "PostCompact", "SessionStart",
                "UserPromptSubmit", "SubagentStart", "SubagentStop", "Stop"]
CODEX_SCHEMA = {
    "type": "object",
    "properties": {"hooks": {
        "type": "object",
        "propertyNames": {"enum": CODEX_EVENTS},
        "additionalProperties": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "matcher": {"type": "string"},
                "hooks": {"type": "array", "items": {
                    "type": "object",
                    "required": ["type", "command"],
                    "properties": {"type": {"const": "command"}, "command": {"type": "string", "minLength": 1},
                                   "commandWindows": {"type": "string"},
                                   "timeout": {"type": "integer", "minimum": 0}, "async": {"type": "boolean"},
                                   "statusMessage": {"type": "string"}},
                    "additionalProperties": False,
                }},
            },
            "additionalProperties": False,
        }},
    }},
    "additionalProperties": False,  # HooksFile is deny_unknown_fields
}


def codex_matchers(config: dict) -> list[str]:
    return [group["matcher"] for groups in config["hooks"].values() for group in groups if "matcher" in group]


class TestCodex:
    def test_install_hooks_output_is_codexs_hooks_json(self, tmp_path):
        for variant, config in written_configs("codex", tmp_path).items():
            jsonschema.validate(config, CODEX_SCHEMA)
            for matcher in codex_matchers(config):
                re.compile(matcher)
            assert "Bash|apply_patch|mcp__.*" in codex_matchers(config), variant

    def test_the_check_catches_an_unknown_key_and_a_claude_only_field(self):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"version": 1, "hooks": {}}, CODEX_SCHEMA)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"hooks": {"PreToolUse": [{"hooks": [
                {"type": "command", "command": "x", "onFailure": "block"}]}]}}, CODEX_SCHEMA)

    def test_the_guides_hooks_json_and_requirements_toml_are_codexs_shapes(self):
        """The Codex guide's hooks.json blocks, its config.toml [features] and its requirements.toml:
        the managed [hooks] table is the hooks.json shape plus managed_dir, the features pinned on."""
        guide = (REPO / "docs" / "integrations" / "codex.md").read_text(encoding="utf-8")
        blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", guide, re.S)]
        features, requirements = [tomllib.loads(block) for block in re.findall(r"```toml\n(.*?)```", guide, re.S)]

        assert 2 == len(blocks)
        for block in blocks:
            jsonschema.validate(block, CODEX_SCHEMA)
        managed = dict(requirements["hooks"])
        assert managed.pop("managed_dir").startswith("/")
        jsonschema.validate({"hooks": managed}, CODEX_SCHEMA)
        assert set(managed) == {event.name for event in hook_host("codex").install.events}
        assert features == {"features": {"hooks": True}} and requirements["features"] == {"hooks": True}
        assert requirements["allow_managed_hooks_only"] is True
        commands = [hook["command"] for groups in managed.values() for group in groups for hook in group["hooks"]]
        assert all(command.startswith("/") and " codex " in command for command in commands)
