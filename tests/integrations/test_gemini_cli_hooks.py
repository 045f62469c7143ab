"""The hooks `loopwarden install-hooks gemini-cli --user` writes, run by Gemini CLI itself (0.61.0
from npm, scripts/install-gemini-cli.sh): `gemini -p` in a home of the test's own, its model a
scripted stand-in for the Gemini API on loopback (GOOGLE_GEMINI_BASE_URL) that repeats one tool
call. Its BeforeTool hook (loopwarden-hook, the daemon's listener) shows the warning at the 11th
call and blocks the 21st, which the model reads as the call's error.

Gemini CLI has a loop detection of its own that ends a run of identical tool calls after a few;
the test turns it off (`model.disableLoopDetection`) to reach loopwarden's thresholds.
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
GEMINI = REPO / ".cache" / "gemini-cli" / "node_modules" / "@google" / "gemini-cli" / "bundle" / "gemini.js"
CRITICAL = 20  # the default critical threshold: calls 1..20 run, 21 is denied
LIMIT = CRITICAL + 3  # the scripted model gives up after this many calls


@pytest.fixture(scope="module")
def gemini() -> pathlib.Path:
    subprocess.run(["bash", str(REPO / "scripts" / "install-gemini-cli.sh")], check=True, timeout=900)
    return GEMINI


class ScriptedModel(ScriptedModelServer):
    """The Gemini API's streamGenerateContent: while the tool is offered and no call came back as an
    error, ask for the same call again; then answer with text. Keeps every functionResponse."""

    def __init__(self, call: dict):
        super().__init__(_Handler)
        self.call = call
        self.responses: list[dict] = []

    def parts(self, request: dict) -> list[dict]:
        with self.lock:
            seen = [part["functionResponse"] for content in request.get("contents", [])
                    for part in content.get("parts", []) if "functionResponse" in part]
            known = {response.get("id") for response in self.responses}
            self.responses += [response for response in seen if response.get("id") not in known]
            tools = [function["name"] for tool in request.get("tools", [])
                     for function in tool.get("functionDeclarations", [])]
            failed = any("error" in response.get("response", {}) for response in self.responses)
            if self.call["name"] in tools and not failed and len(self.responses) < LIMIT:
                return [{"functionCall": self.call}]
            return [{"text": "I will stop here."}]


class _Handler(JsonHandler):
    server: ScriptedModel

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if "countTokens" in self.path:
            return self._send(b'{"totalTokens": 10}', "application/json")
        chunk = {"candidates": [{"content": {"role": "model", "parts": self.server.parts(request)},
                                 "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}
        if "streamGenerateContent" in self.path:
            return self._send(f"data: {json.dumps(chunk)}\r\n\r\n".encode(), "text/event-stream")
        self._send(json.dumps(chunk).encode(), "application/json")


def gemini_home(tmp_path: pathlib.Path, hooks_url: str) -> dict:
    """A home whose ~/.gemini/settings.json selects API-key auth, trusts folders and turns Gemini CLI's
    own loop detection off, with loopwarden's hooks merged in by `install-hooks gemini-cli --user`."""
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "model": {"disableLoopDetection": True}}, indent=2))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "loopwarden-hook").symlink_to(hook_binary())
    env = {key: value for key, value in os.environ.items() if not key.startswith(("LOOPWARDEN_", "GEMINI_", "GOOGLE_"))}
    env["HOME"] = str(home)
    script = pathlib.Path(sys.executable).parent / "loopwarden"
    done = subprocess.run([str(script), "install-hooks", "gemini-cli", "--user", "--yes", "--bin-dir", str(bin_dir),
                           "--url", hooks_url], capture_output=True, text=True, timeout=60, cwd=home, env=env)
    assert 0 == done.returncode, done.stderr
    return env


def gemini_run(gemini: pathlib.Path, env: dict, model: ScriptedModel, workspace: pathlib.Path,
               prompt: str) -> subprocess.CompletedProcess:
    return subprocess.run(["node", str(gemini), "-p", prompt, "--approval-mode", "yolo", "-m", "gemini-2.5-pro"],
                          capture_output=True, text=True, timeout=300, cwd=workspace, stdin=subprocess.DEVNULL,
                          env={**env, "GOOGLE_GEMINI_BASE_URL": model.url, "GEMINI_API_KEY": "scripted"})


class TestGeminiCliRunsTheInstalledHooks:
    def test_a_repeated_read_is_warned_at_11_and_blocked_at_21(self, gemini, daemon, client, run_id, tmp_path):
        warning, block = reference_messages(client, f"{run_id}-reference", "read_file", {"file_path": "notes.txt"},
                                            "hello notes\n")
        env = gemini_home(tmp_path, f"http://{hooks_address(daemon)}")
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        (workspace / "notes.txt").write_text("hello notes\n")
        with serving(ScriptedModel({"name": "read_file", "args": {"file_path": "notes.txt"}})) as model:
            done = gemini_run(gemini, env, model, workspace, "read the notes until told to stop")

        assert 0 == done.returncode, done.stdout[-3000:] + done.stderr[-3000:]
        responses = model.responses
        assert CRITICAL + 1 == len(responses), responses
        assert all(response["response"] == {"output": "hello notes\n"} for response in responses[:CRITICAL])
        assert block in responses[CRITICAL]["response"]["error"]
        assert f"loopwarden: {warning}" in done.stdout + done.stderr  # the hook's systemMessage, shown

    def test_a_repeated_shell_command_is_blocked_at_21(self, gemini, daemon, client, run_id, tmp_path):
        env = gemini_home(tmp_path, f"http://{hooks_address(daemon)}")
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        call = {"name": "run_shell_command", "args": {"command": "echo looping", "description": "Print"}}
        with serving(ScriptedModel(call)) as model:
            done = gemini_run(gemini, env, model, workspace, "print a word until told to stop")

        assert 0 == done.returncode, done.stdout[-3000:] + done.stderr[-3000:]
        assert "has been called 10 times" in done.stdout + done.stderr  # the hooks do run
        assert CRITICAL + 1 == len(model.responses)
        assert "error" in model.responses[CRITICAL]["response"]
