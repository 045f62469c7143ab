"""`loopwarden install-hooks`: loopwarden's entries merged into each host's config file, and taken out.

The merge itself (hookinstall.merge) is checked on configs in memory; the command is run as a shell
would run it, on config files in temporary project and home directories: the diff it shows, the
confirmation, idempotence, --remove, the .bak, a file that is not JSON, and a written command that
really runs (the compiled loopwarden-hook, answering for a daemon that is down).
"""
from __future__ import annotations

import json
import os
import pathlib
import shlex
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from loopwarden.hookinstall.hosts import HOSTS, HookCommand, is_loopwarden_command, plan
from loopwarden.hookinstall.merge import ConfigShapeError, install, remove
from loopwarden.hookinstall.target import choose

from ...support.cli import loopwarden
from ...support.hook_binary import hook_binary

COMPILED = HookCommand(("/opt/lw/.venv/bin/loopwarden-hook",), compiled=True)
FALLBACK = HookCommand(("/opt/lw/.venv/bin/loopwarden", "hook"), compiled=False)

# A person's Claude Code settings: a model, an audit hook on Bash, and a PreCompact hook of their own.
PERSONAL_CLAUDE = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/local/bin/audit"}]}],
        "PreCompact": [{"hooks": [{"type": "command", "command": "notify-send compacting"}]}],
    },
}


def entries(host_name: str, command: HookCommand = COMPILED, flags=(), fail_closed: bool = False):
    return plan(HOSTS[host_name], command, list(flags), fail_closed=fail_closed)


def ours_by_event(config: dict) -> dict[str, list[dict]]:
    """loopwarden's handlers per event (grouped or flat)."""
    found: dict[str, list[dict]] = {}
    for event, items in config.get("hooks", {}).items():
        for item in items:
            for handler in item.get("hooks", [item]) if "command" not in item else [item]:
                if is_loopwarden_command(handler.get("command")):
                    found.setdefault(event, []).append(handler)
    return found


class TestMerge:
    @pytest.mark.parametrize("host_name", list(HOSTS))
    def test_an_empty_config_gets_one_entry_per_event_the_host_guide_wires(self, host_name):
        host = HOSTS[host_name]

        config = install(host, {}, entries(host_name))

        assert sorted(ours_by_event(config)) == sorted(event.name for event in host.events)
        assert all(len(handlers) == 1 for handlers in ours_by_event(config).values())
        command = ours_by_event(config)[host.events[0].name][0]["command"]
        assert command == f"/opt/lw/.venv/bin/loopwarden-hook {host_name}"
        if host_name == "cursor":
            assert config["version"] == 1 and config["hooks"]["preToolUse"] == [{"command": command}]

    def test_a_persons_settings_and_hooks_stay_as_they_were_and_first(self):
        config = install(HOSTS["claude-code"], PERSONAL_CLAUDE, entries("claude-code"))

        assert config["model"] == "opus" and config["permissions"] == PERSONAL_CLAUDE["permissions"]
        assert config["hooks"]["PreToolUse"][0] == PERSONAL_CLAUDE["hooks"]["PreToolUse"][0]
        assert config["hooks"]["PreToolUse"][1]["matcher"] == "*"
        assert config["hooks"]["PreCompact"][0] == PERSONAL_CLAUDE["hooks"]["PreCompact"][0]
        assert list(config["hooks"])[:2] == ["PreToolUse", "PreCompact"]  # their order kept, ours appended
        assert PERSONAL_CLAUDE["hooks"]["PreToolUse"] == [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/local/bin/audit"}]}]  # input untouched

    @pytest.mark.parametrize("host_name", list(HOSTS))
    def test_installing_twice_is_installing_once(self, host_name):
        host = HOSTS[host_name]
        once = install(host, PERSONAL_CLAUDE if host.grouped else {}, entries(host_name, flags=["--agent", "a"]))

        assert install(host, once, entries(host_name, flags=["--agent", "a"])) == once

    @pytest.mark.parametrize("host_name", list(HOSTS))
    def test_remove_gives_back_the_config_as_it_was(self, host_name):
        host = HOSTS[host_name]
        before = PERSONAL_CLAUDE if host.grouped else {"version": 1, "hooks": {"afterFileEdit": [{"command": "fmt"}]}}

        after = remove(host, install(host, before, entries(host_name)))

        assert after == before

    def test_remove_takes_out_only_loopwaldens_handler_of_a_shared_group(self):
        shared = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "/usr/local/bin/audit"},
            {"type": "command", "command": "'/home/a b/.venv/bin/loopwarden' hook claude-code"}]}]}}

        after = remove(HOSTS["claude-code"], shared)

        assert after == {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "/usr/local/bin/audit"}]}]}}

    def test_new_flags_replace_the_entry_in_place_keeping_what_a_person_added(self):
        host = HOSTS["claude-code"]
        first = install(host, PERSONAL_CLAUDE, entries("claude-code", flags=["--agent", "a"]))
        first["hooks"]["PreToolUse"][1]["hooks"][0]["statusMessage"] = "checking for loops"

        second = install(host, first, entries("claude-code", flags=["--agent", "b"], fail_closed=True))
        third = install(host, second, entries("claude-code", flags=["--agent", "b"]))

        handler = second["hooks"]["PreToolUse"][1]["hooks"][0]
        assert handler["command"] == "/opt/lw/.venv/bin/loopwarden-hook claude-code --agent b"
        assert handler["statusMessage"] == "checking for loops" and handler["onFailure"] == "block"
        assert "onFailure" not in second["hooks"]["PostToolUse"][0]["hooks"][0]  # only the before-tool hook
        assert "onFailure" not in third["hooks"]["PreToolUse"][1]["hooks"][0]  # --fail-closed's to clear
        assert len(second["hooks"]["PreToolUse"]) == 2

    def test_cursor_fail_closed_sets_failclosed_on_pretooluse_only(self):
        config = install(HOSTS["cursor"], {}, entries("cursor", fail_closed=True))

        assert config["hooks"]["preToolUse"][0]["failClosed"] is True
        assert "failClosed" not in config["hooks"]["postToolUse"][0]

    def test_the_python_fallback_gets_no_posttoolbatch_and_replaces_the_compiled_entries(self):
        host = HOSTS["claude-code"]
        compiled = install(host, {}, entries("claude-code"))

        fallback = install(host, compiled, entries("claude-code", FALLBACK))

        assert "PostToolBatch" not in fallback["hooks"]
        assert ours_by_event(fallback)["PreToolUse"][0]["command"] == "/opt/lw/.venv/bin/loopwarden hook claude-code"
        assert len(ours_by_event(fallback)) == len(host.events) - 1

    def test_codex_tool_hooks_match_its_shell_patch_and_mcp_tools(self):
        config = install(HOSTS["codex"], {}, entries("codex"))

        assert config["hooks"]["PreToolUse"][0]["matcher"] == "Bash|apply_patch|mcp__.*"
        assert config["hooks"]["PostToolUse"][0]["matcher"] == "Bash|apply_patch|mcp__.*"
        assert "matcher" not in config["hooks"]["PreCompact"][0]

    @pytest.mark.parametrize("config, field", [
        ([], "list, not an object"),
        ({"hooks": []}, "`hooks` is a JSON list"),
        ({"hooks": {"PreToolUse": {"matcher": "*"}}}, "`hooks.PreToolUse` is a JSON dict"),
        ({"hooks": {"PreToolUse": ["audit"]}}, "`hooks.PreToolUse[0]` is a JSON str"),
        ({"hooks": {"PreToolUse": [{"hooks": {"type": "command"}}]}}, "`hooks.PreToolUse[0].hooks` is a JSON dict"),
    ])
    def test_a_config_of_the_wrong_shape_is_refused_naming_the_field(self, config, field):
        with pytest.raises(ConfigShapeError, match=field.replace("[", r"\[").replace("]", r"\]")):
            install(HOSTS["claude-code"], config, entries("claude-code"))
        with pytest.raises(ConfigShapeError):
            remove(HOSTS["claude-code"], config)

    @pytest.mark.parametrize("command, ours", [
        ("/x/.venv/bin/loopwarden-hook claude-code --agent a", True),
        ("'/home/a b/bin/loopwarden' hook codex", True),
        ("/usr/bin/python3 -m loopwarden hook cursor", True),
        ('"${CLAUDE_PLUGIN_ROOT}/scripts/run-loopwarden-hook" claude-code', True),
        ("/x/bin/loopwarden inspect", False),
        ("/usr/local/bin/audit loopwarden-hook", False),
        ("echo 'unbalanced", False),
        (None, False),
    ])
    def test_which_commands_are_loopwardens(self, command, ours):
        assert is_loopwarden_command(command) is ours


@pytest.fixture
def places(tmp_path):
    """A project directory (the command's working directory) and a home directory."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    return project, home


def install_hooks(places, *args: str, stdin: str = "", env: dict | None = None,
                  check: bool = False) -> subprocess.CompletedProcess:
    """The command as a shell runs it; without `check`, with --no-check (no daemon runs in these tests
    unless one is given: TestHookUrl checks the probe itself)."""
    project, home = places
    script = pathlib.Path(sys.executable).parent / "loopwarden"
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("LOOPWARDEN_") and k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "HOOKS_PORT")}
    flags = () if check else ("--no-check",)
    return subprocess.run([str(script), "install-hooks", *args, *flags], cwd=project, input=stdin,
                          capture_output=True, text=True, timeout=60, env={**clean, "HOME": str(home), **(env or {})})


def fake_bin(tmp_path: pathlib.Path, *, compiled: bool) -> pathlib.Path:
    """A bin directory holding loopwarden (a stand-in: only its path is written) and, if `compiled`,
    the real loopwarden-hook."""
    bin_dir = tmp_path / "venv bin"  # a space: the written command must quote it
    bin_dir.mkdir()
    (bin_dir / "loopwarden").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "loopwarden").chmod(0o755)
    if compiled:
        (bin_dir / "loopwarden-hook").symlink_to(hook_binary())
    return bin_dir


class TestCommand:
    def test_writes_merges_and_a_second_run_changes_nothing(self, places, tmp_path):
        settings = places[0] / ".claude" / "settings.json"
        settings.parent.mkdir()
        settings.write_text(json.dumps(PERSONAL_CLAUDE, indent=4) + "\n")
        original = settings.read_text()
        bin_dir = fake_bin(tmp_path, compiled=True)

        first = install_hooks(places, "claude-code", "--yes", "--agent", "coder", "--bin-dir", str(bin_dir))
        written = settings.read_text()
        second = install_hooks(places, "claude-code", "--yes", "--agent", "coder", "--bin-dir", str(bin_dir))

        assert 0 == first.returncode, first.stderr
        assert f"+++ {settings}" in first.stdout and '+        "PostToolBatch": [' in first.stdout
        assert (settings.parent / "settings.json.bak").read_text() == original
        config = json.loads(written)
        assert config["model"] == "opus" and config["hooks"]["PreToolUse"][0]["matcher"] == "Bash"
        command = shlex.split(ours_by_event(config)["PreToolUse"][0]["command"])
        assert command == [str(bin_dir / "loopwarden-hook"), "claude-code", "--agent", "coder",
                           "--url", "http://127.0.0.1:50052"]
        assert '\n    "model": "opus"' in written  # the file's own four-space indentation
        assert 0 == second.returncode
        assert f"nothing to change: {settings} already has loopwarden's hooks" in second.stdout
        assert settings.read_text() == written and "---" not in second.stdout

    def test_the_plugin_enabled_in_the_same_file_is_warned_of_and_the_hooks_still_written(self, places, tmp_path):
        """Claude Code would run both; the daemon counts each call once (the host's tool_use_id),
        but each call would cost two hook processes."""
        settings = places[0] / ".claude" / "settings.json"
        settings.parent.mkdir()
        settings.write_text(json.dumps({"enabledPlugins": {"loopwarden@loopwarden": True, "other@x": True}}) + "\n")
        bin_dir = str(fake_bin(tmp_path, compiled=True))

        both = install_hooks(places, "claude-code", "--yes", "--bin-dir", bin_dir)
        settings.write_text(json.dumps({"enabledPlugins": {"loopwarden@loopwarden": ["1.0"]}}) + "\n")
        listed = install_hooks(places, "claude-code", "--yes", "--bin-dir", bin_dir)

        assert 0 == both.returncode, both.stderr
        assert ("warning: " + str(settings) + " also turns on loopwarden's Claude Code plugin (loopwarden@loopwarden)"
                in both.stdout)
        assert "claude plugin disable loopwarden@loopwarden" in both.stdout
        assert "PreToolUse" in json.loads(settings.read_text())["hooks"]
        assert 0 == listed.returncode and "warning" not in listed.stdout, "only true turns a plugin on"

    def test_dry_run_shows_the_diff_and_writes_nothing(self, places, tmp_path):
        result = install_hooks(places, "codex", "--dry-run", "--bin-dir", str(fake_bin(tmp_path, compiled=True)))

        assert 0 == result.returncode
        assert "--- /dev/null" in result.stdout and '+        "matcher": "Bash|apply_patch|mcp__.*",' in result.stdout
        assert "dry run" in result.stdout
        assert not (places[0] / ".codex").exists()

    def test_without_yes_it_asks_and_writes_only_on_yes(self, places, tmp_path):
        bin_dir = str(fake_bin(tmp_path, compiled=True))
        hooks = places[0] / ".cursor" / "hooks.json"

        refused = install_hooks(places, "cursor", "--bin-dir", bin_dir, stdin="n\n")
        no_answer = install_hooks(places, "cursor", "--bin-dir", bin_dir, stdin="")
        assert not hooks.exists()
        accepted = install_hooks(places, "cursor", "--bin-dir", bin_dir, stdin="y\n")

        assert 1 == refused.returncode and "not written" in refused.stdout and "Write " in refused.stdout
        assert 1 == no_answer.returncode
        assert 0 == accepted.returncode, accepted.stderr
        assert json.loads(hooks.read_text())["version"] == 1
        assert not (hooks.parent / "hooks.json.bak").exists()  # a new file has nothing to back up

    def test_a_file_that_is_not_json_is_refused_with_its_line_and_column(self, places, tmp_path):
        settings = places[0] / ".gemini" / "settings.json"
        settings.parent.mkdir()
        settings.write_text('{\n  // my settings\n  "theme": "dark"\n}\n')

        result = install_hooks(places, "gemini-cli", "--yes", "--bin-dir", str(fake_bin(tmp_path, compiled=True)))

        assert 2 == result.returncode
        assert f"{settings}:2:3: not valid JSON" in result.stderr and "nothing was written" in result.stderr
        assert settings.read_text() == '{\n  // my settings\n  "theme": "dark"\n}\n'
        assert not (settings.parent / "settings.json.bak").exists()

    def test_a_config_of_the_wrong_shape_is_refused_and_left_alone(self, places, tmp_path):
        settings = places[0] / ".claude" / "settings.json"
        settings.parent.mkdir()
        settings.write_text('{"hooks": []}\n')

        result = install_hooks(places, "claude-code", "--yes", "--bin-dir", str(fake_bin(tmp_path, compiled=True)))

        assert 2 == result.returncode and "`hooks` is a JSON list" in result.stderr
        assert settings.read_text() == '{"hooks": []}\n'

    def test_remove_takes_out_exactly_loopwardens_entries(self, places, tmp_path):
        settings = places[0] / ".claude" / "settings.json"
        settings.parent.mkdir()
        settings.write_text(json.dumps(PERSONAL_CLAUDE, indent=2) + "\n")
        bin_dir = str(fake_bin(tmp_path, compiled=True))
        install_hooks(places, "claude-code", "--yes", "--bin-dir", bin_dir)

        removed = install_hooks(places, "claude-code", "--remove", "--yes")
        again = install_hooks(places, "claude-code", "--remove", "--yes")

        assert 0 == removed.returncode, removed.stderr
        assert json.loads(settings.read_text()) == PERSONAL_CLAUDE
        assert "nothing to change" in again.stdout and "has no loopwarden hooks" in again.stdout

    @pytest.mark.parametrize("host_name, variable, relative", [
        ("claude-code", None, ".claude/settings.json"),
        ("claude-code", "CLAUDE_CONFIG_DIR", "settings.json"),
        ("codex", None, ".codex/hooks.json"),
        ("codex", "CODEX_HOME", "hooks.json"),
        ("gemini-cli", None, ".gemini/settings.json"),
        ("cursor", None, ".cursor/hooks.json"),
    ])
    def test_user_writes_the_hosts_own_user_config(self, places, tmp_path, host_name, variable, relative):
        moved = tmp_path / "moved"
        env = {variable: str(moved)} if variable else {}

        result = install_hooks(places, host_name, "--user", "--yes",
                               "--bin-dir", str(fake_bin(tmp_path, compiled=True)), env=env)

        assert 0 == result.returncode, result.stderr
        assert ((moved if variable else places[1]) / relative).is_file()
        assert ("then: Codex runs a hook only once you have reviewed it" in result.stdout) is (host_name == "codex")
        assert not any(places[0].iterdir())  # nothing in the project

    def test_without_the_compiled_command_it_writes_loopwarden_hook_and_says_so(self, places, tmp_path):
        bin_dir = fake_bin(tmp_path, compiled=False)

        result = install_hooks(places, "claude-code", "--yes", "--bin-dir", str(bin_dir), "--address", "10.0.0.1:1")

        assert 0 == result.returncode, result.stderr
        assert "loopwarden-hook is not in" in result.stdout and "Python fallback" in result.stdout
        config = json.loads((places[0] / ".claude" / "settings.json").read_text())
        assert shlex.split(ours_by_event(config)["PreToolUse"][0]["command"]) == [
            str(bin_dir / "loopwarden"), "hook", "claude-code", "--address", "10.0.0.1:1"]
        assert "PostToolBatch" not in config["hooks"]

    def test_url_must_be_the_plain_http_listener(self, places):
        result = install_hooks(places, "codex", "--yes", "--url", "https://127.0.0.1:50052")

        assert 2 == result.returncode and "--url must be" in result.stderr

    def test_the_written_command_runs_and_answers_for_a_daemon_that_is_down(self, places, tmp_path):
        """The entry's command is the real loopwarden-hook by its absolute (quoted) path: run as Claude
        Code would run it (a shell, the hook JSON on stdin), it answers with the unchecked message."""
        bin_dir = fake_bin(tmp_path, compiled=True)
        install_hooks(places, "claude-code", "--yes", "--bin-dir", str(bin_dir), "--url", "http://127.0.0.1:9")
        config = json.loads((places[0] / ".claude" / "settings.json").read_text())
        command = ours_by_event(config)["PreToolUse"][0]["command"]
        payload = {"session_id": "s-1", "transcript_path": "/tmp/t.jsonl", "cwd": str(places[0]),
                   "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"},
                   "tool_use_id": "toolu_1", "permission_mode": "default"}

        result = subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload), capture_output=True,
                                text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})

        assert 0 == result.returncode, result.stderr
        assert "did not answer; this call ran without a loop check" in json.loads(result.stdout)["systemMessage"]

    def test_help_lists_the_hosts(self):
        result = loopwarden("install-hooks", "--help")

        assert 0 == result.returncode
        assert "claude-code, codex, gemini-cli, cursor" in result.stdout and "--remove" in result.stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class _Answers(BaseHTTPRequestHandler):
    """What the daemon's hook listener answers a GET: 405, `Server: loopwarden` (or another server's name)."""
    server_name_header = "loopwarden"

    def version_string(self) -> str:
        return self.server_name_header

    def do_GET(self) -> None:  # http.server's name
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def listener():
    """Start an HTTP server on a free loopback port that answers as `name` does; yields its port."""
    servers = []

    def start(name: str = "loopwarden") -> int:
        handler = type("Handler", (_Answers,), {"server_name_header": name})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def written_url(places) -> str:
    config = json.loads((places[0] / ".claude" / "settings.json").read_text())
    argv = shlex.split(ours_by_event(config)["PreToolUse"][0]["command"])
    return argv[argv.index("--url") + 1]


class TestHookUrl:
    """The entries post to the daemon that runs, wherever it was moved, and never to a URL nobody answers on."""

    @pytest.mark.parametrize("flag, environ, url", [
        ("", {}, "http://127.0.0.1:50052"),
        ("", {"HOOKS_PORT": "50062"}, "http://127.0.0.1:50062"),
        ("", {"LOOPWARDEN_HOOKS_LISTEN": "127.0.0.2:7000", "HOOKS_PORT": "50062"}, "http://127.0.0.2:7000"),
        ("", {"LOOPWARDEN_HOOKS_LISTEN": "0.0.0.0:7000"}, "http://127.0.0.1:7000"),
        ("", {"LOOPWARDEN_HOOKS_LISTEN": "[::]:7000"}, "http://[::1]:7000"),
        ("http://10.0.0.1:9/", {"LOOPWARDEN_HOOKS_LISTEN": "127.0.0.2:7000"}, "http://10.0.0.1:9"),
    ])
    def test_the_url_is_the_flags_then_the_daemons_variable_then_make_serves(self, flag, environ, url):
        assert choose(flag, environ).url == url

    def test_hooks_port_is_written_and_said_when_a_daemon_answers_there(self, places, tmp_path, listener):
        port = listener()

        result = install_hooks(places, "claude-code", "--yes", "--bin-dir", str(fake_bin(tmp_path, compiled=True)),
                               env={"HOOKS_PORT": str(port)}, check=True)

        assert 0 == result.returncode, result.stderr
        assert f"hooks post to http://127.0.0.1:{port} (from HOOKS_PORT={port})" in result.stdout
        assert written_url(places) == f"http://127.0.0.1:{port}"

    def test_the_daemons_own_variable_wins_over_hooks_port(self, places, tmp_path, listener):
        port = listener()

        result = install_hooks(places, "claude-code", "--yes", "--bin-dir", str(fake_bin(tmp_path, compiled=True)),
                               env={"LOOPWARDEN_HOOKS_LISTEN": f"127.0.0.1:{port}", "HOOKS_PORT": "1"}, check=True)

        assert 0 == result.returncode, result.stderr
        assert f"(from LOOPWARDEN_HOOKS_LISTEN=127.0.0.1:{port})" in result.stdout
        assert written_url(places) == f"http://127.0.0.1:{port}"

    def test_a_url_nothing_answers_on_is_refused_and_nothing_written(self, places, tmp_path):
        port = _free_port()

        result = install_hooks(places, "claude-code", "--yes", "--bin-dir", str(fake_bin(tmp_path, compiled=True)),
                               env={"HOOKS_PORT": str(port)}, check=True)

        assert 2 == result.returncode
        assert (f"error: no loopwarden daemon answers on http://127.0.0.1:{port}: nothing listens there "
                f"(connection refused)") in result.stderr
        assert "--no-check writes the URL anyway; nothing was written" in result.stderr
        assert not (places[0] / ".claude").exists()

    def test_another_http_server_is_not_taken_for_the_daemon(self, places, tmp_path, listener):
        port = listener("nginx")

        result = install_hooks(places, "codex", "--yes", "--bin-dir", str(fake_bin(tmp_path, compiled=True)),
                               "--url", f"http://127.0.0.1:{port}", check=True)

        assert 2 == result.returncode
        assert "not loopwarden's hook listener (HTTP 405, Server: nginx)" in result.stderr

    def test_no_check_writes_the_url_anyway(self, places, tmp_path):
        port = _free_port()

        result = install_hooks(places, "claude-code", "--yes", "--bin-dir", str(fake_bin(tmp_path, compiled=True)),
                               env={"HOOKS_PORT": str(port)}, check=False)

        assert 0 == result.returncode, result.stderr
        assert written_url(places) == f"http://127.0.0.1:{port}"

    def test_a_dry_run_only_warns(self, places, tmp_path):
        result = install_hooks(places, "claude-code", "--dry-run", "--bin-dir", str(fake_bin(tmp_path, compiled=True)),
                               "--url", f"http://127.0.0.1:{_free_port()}", check=True)

        assert 0 == result.returncode and "warning: no loopwarden daemon answers on" in result.stdout

    def test_a_hooks_port_that_is_no_port_is_an_error(self, places, tmp_path):
        result = install_hooks(places, "claude-code", "--yes", "--bin-dir", str(fake_bin(tmp_path, compiled=True)),
                               env={"HOOKS_PORT": "fifty"})

        assert 2 == result.returncode and "HOOKS_PORT='fifty' is not a port number" in result.stderr


# Files as people write them: a hand-formatted 5-line file, tabs, one-line arrays, a file with
# hooks of their own (compact), no final newline, and non-ASCII text.
HAND_FORMATTED = {
    "five lines": '{\n  "model": "opus",\n  "permissions": {"allow": ["Bash(git status)"]},\n  "env": { "A": "1" }\n}\n',
    "tabs": '{\n\t"theme": "dark",\n\t"hooks": {\n\t\t"PreToolUse": [{"matcher": "Bash", "hooks": '
            '[{"type": "command", "command": "/usr/local/bin/audit"}]}]\n\t}\n}\n',
    "one line": '{"model":"opus","hooks":{"PreCompact":[{"hooks":[{"type":"command","command":"notify"}]}]}}',
    "own hooks, four spaces": json.dumps(PERSONAL_CLAUDE, indent=4) + "\n",
    "crlf and unicode": '{\r\n  "statusLine": "café ☕",\r\n  "theme": "dark"\r\n}\r\n',
}
# Cursor's hooks.json starts with its format version, which install adds and --remove leaves.
CURSOR_HAND_FORMATTED = '{\n    "version": 1,\n    "hooks": {"stop": [{"command": "./notify.sh"}]}\n}'


class TestTheirBytes:
    """install-hooks changes only what it owns, and --remove gives the person's bytes back."""

    @pytest.mark.parametrize("host_name, name", [
        *((host_name, name) for host_name in ("claude-code", "codex", "gemini-cli") for name in HAND_FORMATTED),
        ("cursor", "cursor")])
    def test_install_then_remove_gives_back_the_same_bytes(self, places, tmp_path, host_name, name):
        path = places[0] / HOSTS[host_name].project_file
        path.parent.mkdir()
        original = (CURSOR_HAND_FORMATTED if name == "cursor" else HAND_FORMATTED[name]).encode()
        path.write_bytes(original)
        bin_dir = str(fake_bin(tmp_path, compiled=True))

        installed = install_hooks(places, host_name, "--yes", "--bin-dir", bin_dir)
        config = json.loads(path.read_text())
        removed = install_hooks(places, host_name, "--remove", "--yes")

        assert 0 == installed.returncode and 0 == removed.returncode, installed.stderr + removed.stderr
        assert sorted(ours_by_event(config)) == sorted(event.name for event in HOSTS[host_name].events)
        assert path.read_bytes() == original

    def test_the_first_install_adds_lines_and_changes_none(self, places, tmp_path):
        settings = places[0] / ".claude" / "settings.json"
        settings.parent.mkdir()
        settings.write_text(HAND_FORMATTED["five lines"])

        result = install_hooks(places, "claude-code", "--yes", "--bin-dir", str(fake_bin(tmp_path, compiled=True)))

        assert 0 == result.returncode, result.stderr
        changed = [line for line in result.stdout.splitlines()
                   if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))]
        assert changed and all(line.startswith("+") for line in changed)
        assert '+  "hooks": {' in changed and '+    "PreToolUse": [' in changed  # the file's two spaces
        for line in HAND_FORMATTED["five lines"].splitlines():
            assert line in settings.read_text().splitlines()  # every line of theirs, as they wrote it

    def test_a_new_event_beside_theirs_keeps_their_lines_and_their_hook_first(self, places, tmp_path):
        hooks = places[0] / ".codex" / "hooks.json"
        hooks.parent.mkdir()
        hooks.write_text('{\n  "hooks": {\n    "PreToolUse": [{"matcher": "Bash", "hooks": '
                         '[{"type": "command", "command": "audit"}]}]\n  }\n}\n')

        result = install_hooks(places, "codex", "--yes", "--bin-dir", str(fake_bin(tmp_path, compiled=True)))

        assert 0 == result.returncode, result.stderr
        config = json.loads(hooks.read_text())
        assert config["hooks"]["PreToolUse"][0] == {"matcher": "Bash", "hooks": [{"type": "command",
                                                                                   "command": "audit"}]}
        assert is_loopwarden_command(config["hooks"]["PreToolUse"][1]["hooks"][0]["command"])
        # their one-line array stays one line, ours joins it in its style
        assert '    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}, ' \
               '{"matcher": "Bash|apply_patch|mcp__.*"' in hooks.read_text()

    def test_a_second_install_with_other_flags_edits_only_the_commands(self, places, tmp_path):
        settings = places[0] / ".claude" / "settings.json"
        settings.parent.mkdir()
        settings.write_text(HAND_FORMATTED["five lines"])
        bin_dir = str(fake_bin(tmp_path, compiled=True))
        install_hooks(places, "claude-code", "--yes", "--bin-dir", bin_dir)

        again = install_hooks(places, "claude-code", "--yes", "--bin-dir", bin_dir, "--agent", "coder")

        assert 0 == again.returncode, again.stderr
        changed = [line for line in again.stdout.splitlines()
                   if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))]
        assert changed and all('"command": ' in line for line in changed)
        assert all("--agent coder" in line for line in changed if line.startswith("+"))

    def test_output_closed_early_ends_quietly(self, places, tmp_path):
        """`install-hooks --dry-run | grep -m2 x`: the reader is gone before the diff is written."""
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            project, home = places
            clean = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWARDEN_") and k != "HOOKS_PORT"}
            result = subprocess.run(
                [str(pathlib.Path(sys.executable).parent / "loopwarden"), "install-hooks", "claude-code",
                 "--dry-run", "--no-check", "--bin-dir", str(fake_bin(tmp_path, compiled=True))],
                cwd=project, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60,
                env={**clean, "HOME": str(home)})
        finally:
            os.close(write_end)

        assert 0 == result.returncode, result.stderr
        assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr
