"""The hooks `loopwarden install-hooks codex --user` writes, run by Codex itself (0.169.0 from npm,
scripts/install-codex.sh): `codex exec` in a CODEX_HOME of the test's own, its model a scripted
stand-in for the Responses API on loopback (a custom model provider) that repeats one shell command.
Codex reports the command to the hooks as `Bash` (the matcher's first alternative), so its
PreToolUse hook (loopwarden-hook, the daemon's listener) lets calls 1-20 run and blocks the 21st
with loopwarden's message, which the model reads as the call's output.

Codex runs a hook from a user's hooks.json only once the user has reviewed it; `codex exec
--dangerously-bypass-hook-trust` stands in for that review here, and a run without it shows the
hooks do not run unreviewed (what the Codex guide tells users to do after installing).

`codex exec` shows the user none of a hook's messages: its human output prints a hook's event name
and status only, and its `--json` stream leaves hooks out. The announced warning reaches the model
(`additionalContext`, a developer message) and the session's rollout file, and the daemon keeps it
for `loopwarden inspect` under Codex's session id; the Codex guide says so, and the test of what
`codex exec` shows holds it to that.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.e2e.test_hooks_http import hooks_address, reference_messages
from tests.e2e.test_hooks_http import daemon_args  # noqa: F401 - the daemon with its hook listener
from tests.support.hook_binary import hook_binary
from tests.support.scripted_model import JsonHandler, ScriptedModelServer, serving

pytestmark = pytest.mark.node

REPO = pathlib.Path(__file__).resolve().parents[2]
CODEX = REPO / ".cache" / "codex" / "node_modules" / ".bin" / "codex"
CRITICAL = 20  # the default critical threshold: calls 1..20 run, 21 is denied
LIMIT = CRITICAL + 3  # the scripted model gives up after this many calls


@pytest.fixture(scope="module")
def codex() -> pathlib.Path:
    subprocess.run(["bash", str(REPO / "scripts" / "install-codex.sh")], check=True, timeout=900)
    return CODEX


class ScriptedModel(ScriptedModelServer):
    """The Responses API as Codex streams it: while the shell tool (`exec_command`) is offered and no
    call was blocked, ask for `echo looping` again; then end with a message. Keeps every
    function_call_output Codex sends back, in order, and every request body."""

    def __init__(self):
        super().__init__(_Handler)
        self.outputs: list[str] = []
        self.requests: list[str] = []
        self.responses = 0

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def next_item(self, request: dict) -> dict:
        with self.lock:
            self.requests.append(json.dumps(request))
            known = {output for output in self.outputs}
            for item in request.get("input", []):
                if isinstance(item, dict) and item.get("type") == "function_call_output":
                    text = item["output"] if isinstance(item["output"], str) else json.dumps(item["output"])
                    if f"{item['call_id']}\n{text}" not in known:
                        self.outputs.append(f"{item['call_id']}\n{text}")
            self.responses += 1
            blocked = any("blocked" in output.lower() for output in self.outputs)
            tools = [tool.get("name") for tool in request.get("tools", [])]
            if "exec_command" in tools and not blocked and len(self.outputs) < LIMIT:
                return {"type": "function_call", "id": f"fc_{len(self.outputs)}", "status": "completed",
                        "call_id": f"call_{len(self.outputs) + 1}", "name": "exec_command",
                        "arguments": json.dumps({"cmd": "echo looping"})}
            return {"type": "message", "id": "msg_done", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "I will stop here.", "annotations": []}]}


class _Handler(JsonHandler):
    server: ScriptedModel

    def do_GET(self) -> None:  # the model list: none, Codex falls back to its defaults
        self._send(json.dumps({"data": [], "models": []}).encode(), "application/json")

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        item = self.server.next_item(request)
        response_id = f"resp_{self.server.responses}"
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        events = [{"type": "response.created", "response": {"id": response_id}},
                  {"type": "response.output_item.done", "output_index": 0, "item": item},
                  {"type": "response.completed", "response": {"id": response_id, "usage": usage}}]
        self._send("".join(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events).encode(),
                   "text/event-stream")


@pytest.fixture
def scripted_model():
    with serving(ScriptedModel()) as model:
        yield model


def codex_home(tmp_path: pathlib.Path, model: ScriptedModel, hooks_url: str) -> tuple[pathlib.Path, dict]:
    """A CODEX_HOME whose config points at the scripted model, with loopwarden's hooks installed into
    it by `loopwarden install-hooks codex --user` (the compiled loopwarden-hook of this checkout)."""
    home = tmp_path / "home"
    codex_dir = home / ".codex"
    codex_dir.mkdir(parents=True)
    (codex_dir / "config.toml").write_text(
        'model = "scripted"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{model.base_url}"\nenv_key = "SCRIPTED_MODEL_KEY"\nwire_api = "responses"\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "loopwarden-hook").symlink_to(hook_binary())
    env = {key: value for key, value in os.environ.items() if not key.startswith(("LOOPWARDEN_", "OPENAI_", "CODEX_"))}
    env.update(HOME=str(home), CODEX_HOME=str(codex_dir), SCRIPTED_MODEL_KEY="scripted")
    script = pathlib.Path(sys.executable).parent / "loopwarden"
    done = subprocess.run([str(script), "install-hooks", "codex", "--user", "--yes", "--bin-dir", str(bin_dir),
                           "--url", hooks_url], capture_output=True, text=True, timeout=60, cwd=home, env=env)
    assert 0 == done.returncode, done.stderr
    assert (codex_dir / "hooks.json").is_file()
    return home, env


def codex_exec(codex: pathlib.Path, workspace: pathlib.Path, env: dict, *flags: str) -> subprocess.CompletedProcess:
    workspace.mkdir(exist_ok=True)
    return subprocess.run([str(codex), "exec", *flags, "--skip-git-repo-check", "-s", "danger-full-access",
                           "print a word until told to stop"], capture_output=True, text=True, timeout=300,
                          cwd=workspace, env=env, stdin=subprocess.DEVNULL)


class TestCodexRunsTheInstalledHooks:
    def test_a_stuck_shell_command_is_blocked_at_21(self, codex, daemon, client, run_id, scripted_model, tmp_path):
        _, block = reference_messages(client, f"{run_id}-reference")
        _, env = codex_home(tmp_path, scripted_model, f"http://{hooks_address(daemon)}")

        done = codex_exec(codex, tmp_path / "workspace", env, "--dangerously-bypass-hook-trust")

        assert 0 == done.returncode, done.stdout[-3000:] + done.stderr[-3000:]
        outputs = scripted_model.outputs
        assert CRITICAL + 1 == len(outputs), outputs
        assert all("looping" in output and "blocked" not in output.lower() for output in outputs[:CRITICAL])
        assert block in outputs[CRITICAL]
        assert "hook: PreToolUse Blocked" in done.stdout + done.stderr

    def test_hooks_a_user_has_not_reviewed_do_not_run(self, codex, daemon, scripted_model, tmp_path):
        """Without the review (or the bypass), Codex runs the calls and none of loopwarden's hooks."""
        _, env = codex_home(tmp_path, scripted_model, f"http://{hooks_address(daemon)}")

        done = codex_exec(codex, tmp_path / "workspace", env)

        assert 0 == done.returncode, done.stdout[-3000:] + done.stderr[-3000:]
        assert LIMIT == len(scripted_model.outputs)
        assert "hook: PreToolUse" not in done.stdout + done.stderr


class TestWhatCodexExecShowsAfterAWarning:
    """The 10th identical call gets loopwarden's announced warning: `additionalContext` for the model,
    `systemMessage` for the user. Codex 0.169.0's `codex exec` prints neither (a hook's
    `systemMessage` is a warning entry of its run, and exec's printers drop a run's entries), so what
    the user has is the session's rollout file and the daemon's own record of the run."""

    def test_the_warning_reaches_the_model_and_the_rollout_but_not_the_exec_output(
            self, codex, daemon, client, run_id, tmp_path):
        warning, _ = reference_messages(client, f"{run_id}-reference")
        assert warning
        runs = {}
        for form, flags in (("human", ()), ("json", ("--json",))):
            with serving(ScriptedModel()) as model:
                home, env = codex_home(tmp_path / form, model, f"http://{hooks_address(daemon)}")
                done = codex_exec(codex, tmp_path / form / "workspace", env, "--dangerously-bypass-hook-trust", *flags)
            assert 0 == done.returncode, done.stdout[-3000:] + done.stderr[-3000:]
            assert CRITICAL + 1 == len(model.outputs), model.outputs
            # The model was told: Codex adds additionalContext to its next request.
            assert any(warning in request for request in model.requests)
            runs[form] = (home, done)

        for form, (home, done) in runs.items():
            shown = done.stdout + done.stderr
            assert warning not in shown and "loopwarden: WARNING" not in shown, form
            rollouts = list((home / ".codex" / "sessions").rglob("rollout-*.jsonl"))
            assert 1 == len(rollouts), rollouts
            assert any(warning in line and "hooks.additional_context" in line
                       for line in rollouts[0].read_text().splitlines()), form
        # The human output: each hook's event and status, the warned call's included, nothing more.
        human = runs["human"][1].stderr
        assert CRITICAL == human.count("hook: PreToolUse Completed")
        assert "hook: PreToolUse Blocked" in human
        # The JSON stream has no hook events at all; its thread id is the session id, loopwarden's run.
        events = [json.loads(line) for line in runs["json"][1].stdout.splitlines() if line.startswith("{")]
        assert {"error", "command_execution", "agent_message"} == {e["item"]["type"] for e in events if "item" in e}
        assert not any("loopwarden" in json.dumps(event) for event in events)
        session = next(event["thread_id"] for event in events if event["type"] == "thread.started")
        recent = client.inspect(session).recent_verdicts  # the latest ones: the 10th has scrolled out
        assert any(v.action.value == "warn" and v.message.startswith("WARNING: Bash has been called") for v in recent)
