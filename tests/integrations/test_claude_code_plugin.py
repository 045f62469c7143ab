"""loopwarden's Claude Code plugin (integrations/claude-code) and marketplace (.claude-plugin at the
repository root) checked and installed by Claude Code itself (2.1.332 from npm,
scripts/install-claude-code.sh): `claude plugin validate --strict` on both, then `claude plugin
marketplace add` of a clone and `claude plugin install loopwarden@loopwarden` in a home directory of
the test's own, and the installed plugin's hook command (from Claude Code's plugin cache) run as
Claude Code runs it, against a real daemon: 21 identical Bash calls, the warning at 11, denied at 21.
Last, real `claude -p` sessions, their model a scripted stand-in for the Messages API on loopback
that repeats one Bash call: with the plugin installed, and with the settings.json `loopwarden
install-hooks claude-code --user` writes, Claude Code itself runs the hooks, and the model is warned
at the 11th call and reads the denial of the 21st.

A clone here is a directory holding the marketplace, the plugin and a `.venv/bin/loopwarden-hook`
(the compiled command of this checkout), as `make serve` leaves a real clone. Claude Code's
telemetry and other non-essential traffic are switched off: the machine has no network to send it to.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from tests.client.python.hooks.test_claude_code_types import guide_settings
from tests.e2e.test_hooks_http import assert_loop_answers, claude_loop, hooks_address, reference_messages
from tests.e2e.test_hooks_http import daemon_args  # noqa: F401 - the daemon with its hook listener
from tests.support.hook_binary import hook_binary
from tests.support.scripted_model import JsonHandler, ScriptedModelServer, serving

CRITICAL = 20  # the default critical threshold: calls 1..20 run, 21 is denied

pytestmark = pytest.mark.node

REPO = pathlib.Path(__file__).resolve().parents[2]
PLUGIN = REPO / "integrations" / "claude-code"
CLAUDE = REPO / ".cache" / "claude-code" / "node_modules" / ".bin" / "claude"


@pytest.fixture(scope="module")
def claude() -> pathlib.Path:
    subprocess.run(["bash", str(REPO / "scripts" / "install-claude-code.sh")], check=True, timeout=900)
    return CLAUDE


def quiet_env(home: pathlib.Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("LOOPWARDEN_", "CLAUDE_", "ANTHROPIC_"))}
    return {**env, "HOME": str(home), "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", **extra}


def run_claude(claude: pathlib.Path, home: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(claude), *args], capture_output=True, text=True, timeout=120, cwd=home,
                          env=quiet_env(home))


def make_clone(root: pathlib.Path) -> pathlib.Path:
    """The marketplace, the plugin and a built loopwarden-hook, laid out as in a clone after `make serve`."""
    clone = root / "loopwarden clone"  # a space: the hook command and its launcher must quote paths
    shutil.copytree(REPO / ".claude-plugin", clone / ".claude-plugin")
    shutil.copytree(PLUGIN, clone / "integrations" / "claude-code")
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "loopwarden-hook").symlink_to(hook_binary())
    return clone


@pytest.fixture(scope="module")
def installed(claude, tmp_path_factory) -> dict:
    """A home where Claude Code added the clone's marketplace and installed loopwarden@loopwarden."""
    root = tmp_path_factory.mktemp("claude-code-plugin")
    home = root / "home"
    home.mkdir()
    clone = make_clone(root)
    added = run_claude(claude, home, "plugin", "marketplace", "add", str(clone))
    assert 0 == added.returncode, added.stdout + added.stderr
    done = run_claude(claude, home, "plugin", "install", "loopwarden@loopwarden")
    assert 0 == done.returncode, done.stdout + done.stderr
    listed = run_claude(claude, home, "plugin", "list", "--json")
    assert 0 == listed.returncode, listed.stderr
    plugin = next(entry for entry in json.loads(listed.stdout) if entry["id"] == "loopwarden@loopwarden")
    return {"home": home, "clone": clone, "plugin": plugin, "install": add_text(added, done)}


def add_text(*results: subprocess.CompletedProcess) -> str:
    return "".join(result.stdout + result.stderr for result in results)


def plugin_hook_command(plugin_root: pathlib.Path, event: str) -> str:
    hooks = json.loads((plugin_root / "hooks" / "hooks.json").read_text())["hooks"]
    (handler,) = hooks[event][0]["hooks"]
    return handler["command"]


def run_plugin_hook(installed: dict, payload: dict, **env: str) -> subprocess.CompletedProcess:
    """The installed plugin's PreToolUse command, run as Claude Code runs a command hook: through a
    shell, CLAUDE_PLUGIN_ROOT set to the plugin's installed copy, the hook JSON on stdin."""
    root = pathlib.Path(installed["plugin"]["installPath"])
    command = plugin_hook_command(root, payload["hook_event_name"])
    return subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload), capture_output=True, text=True,
                          timeout=30, env=quiet_env(installed["home"], CLAUDE_PLUGIN_ROOT=str(root), **env))


class TestClaudeCodeAcceptsThePlugin:
    @pytest.mark.parametrize("path", [REPO, PLUGIN], ids=["marketplace", "plugin"])
    def test_claude_plugin_validate_strict_passes(self, claude, tmp_path, path):
        result = run_claude(claude, tmp_path, "plugin", "validate", "--strict", str(path))

        assert 0 == result.returncode, result.stdout + result.stderr
        assert "Validation passed" in result.stdout

    def test_the_check_is_real_a_bad_manifest_fails(self, claude, tmp_path):
        bad = tmp_path / "bad"
        shutil.copytree(PLUGIN, bad)
        manifest = json.loads((bad / ".claude-plugin" / "plugin.json").read_text())
        (bad / ".claude-plugin" / "plugin.json").write_text(json.dumps({**manifest, "name": "Loop Warden!"}))

        result = run_claude(claude, tmp_path, "plugin", "validate", "--strict", str(bad))

        assert 0 != result.returncode

    def test_marketplace_add_and_install_from_a_clone(self, installed):
        plugin = installed["plugin"]

        assert "Successfully installed plugin: loopwarden@loopwarden" in installed["install"]
        assert plugin["enabled"] is True
        assert plugin["version"] == json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())["version"]
        # Claude Code copied the plugin into its cache: the launcher cannot find the clone by its own path.
        assert pathlib.Path(plugin["installPath"]).is_relative_to(installed["home"] / ".claude" / "plugins")

    def test_claude_code_lists_the_eleven_hooks_of_the_guide(self, claude, installed):
        """The installed plugin's hooks, as Claude Code reports them, are the events of the guide's
        loopwarden-hook settings block, with the same matchers."""
        details = run_claude(claude, installed["home"], "plugin", "details", "loopwarden@loopwarden")
        (guide_block,) = [block for block in guide_settings() if "loopwarden-hook" in json.dumps(block)]
        plugin_hooks = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]

        assert 0 == details.returncode, details.stderr
        listed = re.search(r"Hooks \((\d+)\)\s+(.*)", details.stdout)
        assert listed is not None, details.stdout
        assert int(listed.group(1)) == len(guide_block["hooks"]) == 11
        assert {name.strip() for name in listed.group(2).split(" (")[0].split(",")} == set(guide_block["hooks"])
        assert {event: [group.get("matcher") for group in groups] for event, groups in plugin_hooks.items()} == {
            event: [group.get("matcher") for group in groups] for event, groups in guide_block["hooks"].items()}


class TestTheInstalledHooksReachTheDaemon:
    def test_a_bash_loop_warns_at_11_and_is_denied_at_21(self, installed, daemon, client, run_id):
        """Each hook is the installed plugin's command: the launcher finds the clone's loopwarden-hook
        through the marketplace Claude Code recorded, which posts to the daemon's listener."""
        warning, block = reference_messages(client, f"{run_id}-reference")
        url = f"http://{hooks_address(daemon)}"

        def send(payload: dict) -> dict:
            done = run_plugin_hook(installed, payload, LOOPWARDEN_HOOK_URL=url)
            assert (0, "") == (done.returncode, done.stderr)
            return json.loads(done.stdout)

        assert_loop_answers(claude_loop(send, run_id), warning, block)

    def test_the_environment_sets_the_agent_and_fail_closed(self, installed, run_id):
        """No daemon at the URL: with LOOPWARDEN_FAIL_CLOSED=1 the call is denied, and said."""
        from tests.client.python.hooks import payloads

        done = run_plugin_hook(installed, payloads.claude_pre_tool_use(run_id, "t1"),
                               LOOPWARDEN_HOOK_URL="http://127.0.0.1:9", LOOPWARDEN_FAIL_CLOSED="1",
                               LOOPWARDEN_AGENT="coder")

        assert 0 == done.returncode, done.stderr
        assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"

    def test_without_a_built_loopwarden_hook_the_hook_fails_saying_what_to_run(self, installed, run_id, tmp_path):
        """The clone without .venv/bin/loopwarden-hook: exit 1 (Claude Code's non-blocking failure:
        shown, the call runs at the default onFailure) and the way out on stderr."""
        from tests.client.python.hooks import payloads

        built = installed["clone"] / ".venv" / "bin" / "loopwarden-hook"
        built.rename(tmp_path / "moved-away")
        try:
            done = run_plugin_hook(installed, payloads.claude_pre_tool_use(run_id, "t1"))
        finally:
            (tmp_path / "moved-away").rename(built)

        assert 1 == done.returncode and "" == done.stdout
        assert f"loopwarden-hook is not built in {installed['clone']}/.venv/bin" in done.stderr
        assert "make serve" in done.stderr and "LOOPWARDEN_HOOK" in done.stderr


class ScriptedModel(ScriptedModelServer):
    """A stand-in for the Anthropic Messages API on loopback (ANTHROPIC_BASE_URL): while Bash is among
    the request's tools, it asks for the same Bash call again (a model stuck in a loop), until a call
    comes back as an error (`errors_to_stop` of them) or `limit` calls were made; then it ends the
    turn. It keeps every tool result Claude Code sends back, in order."""

    COMMAND = {"command": "echo looping", "description": "Print a word"}

    def __init__(self, limit: int, errors_to_stop: int = 1):
        super().__init__(_ScriptedModelHandler)
        self.limit = limit
        self.errors_to_stop = errors_to_stop  # the model tries again after fewer errors than this
        self.results: list[dict] = []
        self.requests: list[str] = []  # every request body, as sent

    def reply(self, request: dict) -> dict:
        results = [block for message in request.get("messages", []) if message["role"] == "user"
                   and isinstance(message["content"], list) for block in message["content"]
                   if block.get("type") == "tool_result"]
        with self.lock:
            self.requests.append(json.dumps(request))
            known = {result["tool_use_id"] for result in self.results}
            self.results += [result for result in results if result["tool_use_id"] not in known]
            errors = sum(1 for result in self.results if result.get("is_error"))
            stuck = (any(tool.get("name") == "Bash" for tool in request.get("tools", []))
                     and errors < self.errors_to_stop and len(self.results) < self.limit)
            calls = len(self.results)
        if stuck:
            block = {"type": "tool_use", "id": f"toolu_{calls + 1:04d}", "name": "Bash", "input": self.COMMAND}
            return {"content": [block], "stop_reason": "tool_use"}
        return {"content": [{"type": "text", "text": "I will stop here."}], "stop_reason": "end_turn"}


class _ScriptedModelHandler(JsonHandler):
    """The Messages API's answer to `server.reply(request)`: {"content", "stop_reason"}, and the
    request's `input_tokens` when the reply names them (10 otherwise)."""

    server: ScriptedModel

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if "count_tokens" in self.path:
            return self._send(b'{"input_tokens": 10}', "application/json")
        answer = self.server.reply(request)
        message = {"id": "msg_scripted", "type": "message", "role": "assistant", "model": request.get("model", ""),
                   "content": answer["content"], "stop_reason": answer["stop_reason"], "stop_sequence": None,
                   "usage": {"input_tokens": answer.get("input_tokens", 10), "output_tokens": 5}}
        if not request.get("stream"):
            return self._send(json.dumps(message).encode(), "application/json")
        events = [("message_start", {"type": "message_start",
                                     "message": {**message, "content": [], "stop_reason": None}})]
        for index, block in enumerate(answer["content"]):
            if block["type"] == "text":
                start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
            else:
                start, delta = {**block, "input": {}}, {"type": "input_json_delta",
                                                        "partial_json": json.dumps(block["input"])}
            events += [("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}),
                       ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
                       ("content_block_stop", {"type": "content_block_stop", "index": index})]
        events += [("message_delta", {"type": "message_delta", "usage": {"output_tokens": 5},
                                      "delta": {"stop_reason": answer["stop_reason"], "stop_sequence": None}}),
                   ("message_stop", {"type": "message_stop"})]
        self._send("".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode(),
                   "text/event-stream")


@pytest.fixture
def scripted_model():
    with serving(ScriptedModel(limit=CRITICAL + 5)) as model:
        yield model


def result_text(result: dict) -> str:
    content = result.get("content")
    if isinstance(content, list):
        return "".join(block.get("text", "") for block in content)
    return content or ""


def install_hooks_user(home: pathlib.Path, bin_dir: pathlib.Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    """`loopwarden install-hooks claude-code --user --yes` in `home`, hooks running `bin_dir`'s
    loopwarden-hook (the compiled command of this checkout) against `url`."""
    if not (bin_dir / "loopwarden-hook").exists():
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "loopwarden-hook").symlink_to(hook_binary())
    script = pathlib.Path(sys.executable).parent / "loopwarden"
    return subprocess.run([str(script), "install-hooks", "claude-code", "--user", "--yes", "--bin-dir", str(bin_dir),
                           "--url", url, *extra], capture_output=True, text=True, timeout=60, cwd=home,
                          env=quiet_env(home))


def claude_session(claude: pathlib.Path, home: pathlib.Path, model: ScriptedModel, workspace: pathlib.Path,
                   **env: str) -> subprocess.CompletedProcess:
    workspace.mkdir(exist_ok=True)
    return subprocess.run(
        [str(claude), "-p", "print a word until told to stop", "--allowedTools", "Bash", "--output-format", "json"],
        capture_output=True, text=True, timeout=300, cwd=workspace,
        env=quiet_env(home, ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="sk-scripted", **env))


def assert_stopped_at_21(done: subprocess.CompletedProcess, model: ScriptedModel, warning: str, block: str) -> None:
    """Calls 1-20 ran (their output reached the model), the 11th's warning reached the model in a later
    request (the hook's additionalContext), the 21st came back as an error carrying loopwarden's block
    message, and the model then ended the turn."""
    assert 0 == done.returncode, done.stdout[-2000:] + done.stderr[-2000:]
    results = model.results
    assert CRITICAL + 1 == len(results), [result_text(result) for result in results]
    assert all(not result.get("is_error") and "looping" in result_text(result) for result in results[:CRITICAL])
    assert results[CRITICAL].get("is_error") is True
    assert block in result_text(results[CRITICAL])
    assert any(warning in request for request in model.requests)
    assert json.loads(done.stdout)["result"] == "I will stop here."


class TestARealClaudeCodeSession:
    """`claude -p` with a scripted model that repeats one Bash call: loopwarden's hooks, installed as the
    plugin or written by install-hooks, warn at the 11th call and deny the 21st."""

    def test_the_plugins_hooks_stop_a_stuck_bash_loop(self, claude, installed, daemon, client, run_id,
                                                      scripted_model, tmp_path):
        warning, block = reference_messages(client, f"{run_id}-reference")

        done = claude_session(claude, installed["home"], scripted_model, tmp_path / "workspace",
                              LOOPWARDEN_HOOK_URL=f"http://{hooks_address(daemon)}")

        assert_stopped_at_21(done, scripted_model, warning, block)

    def test_the_hooks_install_hooks_writes_stop_a_stuck_bash_loop(self, claude, daemon, client, run_id,
                                                                   scripted_model, tmp_path):
        """`loopwarden install-hooks claude-code --user` in a fresh home, the compiled loopwarden-hook of
        this checkout in the bin directory it names: the settings.json it writes is what runs."""
        warning, block = reference_messages(client, f"{run_id}-reference")
        home = tmp_path / "home"
        home.mkdir()
        installed = install_hooks_user(home, tmp_path / "bin", f"http://{hooks_address(daemon)}")
        assert 0 == installed.returncode, installed.stderr

        done = claude_session(claude, home, scripted_model, tmp_path / "workspace")

        assert_stopped_at_21(done, scripted_model, warning, block)

    def test_the_plugin_and_install_hooks_together_count_each_call_once(self, claude, installed, daemon, client,
                                                                      run_id, scripted_model, tmp_path):
        """Both in one home: Claude Code runs two loopwarden hooks for every event. install-hooks
        warns; the daemon takes the second delivery of each call as a retry, so the session is
        warned at 11 and denied at 21 with a message saying 20, as with either alone."""
        warning, block = reference_messages(client, f"{run_id}-reference")
        url = f"http://{hooks_address(daemon)}"
        home = installed["home"]
        written = install_hooks_user(home, tmp_path / "bin", url)
        try:
            assert 0 == written.returncode, written.stderr
            assert "also turns on loopwarden's Claude Code plugin (loopwarden@loopwarden)" in written.stdout
            settings = json.loads((home / ".claude" / "settings.json").read_text())
            assert settings["enabledPlugins"]["loopwarden@loopwarden"] is True and "PreToolUse" in settings["hooks"]

            done = claude_session(claude, home, scripted_model, tmp_path / "workspace", LOOPWARDEN_HOOK_URL=url)
        finally:
            removed = install_hooks_user(home, tmp_path / "bin", url, "--remove")
            assert 0 == removed.returncode, removed.stderr

        assert "called 20 times" in block
        assert_stopped_at_21(done, scripted_model, warning, block)
