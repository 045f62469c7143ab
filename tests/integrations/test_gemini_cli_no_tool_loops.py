"""A retry loop without tool calls in real `gemini -p` runs (0.61.0), their model the Gemini API
stand-in of test_gemini_cli_hooks, loopwarden's hooks the ones `loopwarden install-hooks gemini-cli
--user` writes (AfterModel and AfterAgent among them).

The user's own AfterAgent hook answers `decision: "deny"`, which sends the answer back to the model
as a new prompt, and the model answers the same thing each time. Gemini CLI has no cap of its own:
without loopwarden the loop runs until the user's hook gives up (KEEP_GOING_LIMIT retries),
measured in the same run; with loopwarden, `stopContinuation` ends the session with `continue:
false` after abortAt retries. A model that does new tool work after each retry is never ended.
"""
from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from tests.e2e.test_hooks_http import daemon_args, hooks_address  # noqa: F401 - the daemon with its hook listener
from tests.integrations.test_gemini_cli_hooks import _Handler, gemini, gemini_home, gemini_run  # noqa: F401
from tests.support.keep_going import ANSWER, KEEP_GOING, KEEP_GOING_LIMIT, STOP_ABORT_AT, aborts, keep_going_hook
from tests.support.scripted_model import ScriptedModelServer, serving

pytestmark = pytest.mark.node

CONFIG = "{tools: {loopDetection: {enabled: true}}, loopwarden: {stopContinuation: {enabled: true, abortAt: %d}}}" % STOP_ABORT_AT
SHELL = "run_shell_command"


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


class RetriedModel(ScriptedModelServer):
    """Answers every prompt and every retry with ANSWER; with `new_work`, a retry first gets a
    shell command it has not run before, and its result the answer."""

    def __init__(self, *, new_work: bool = False):
        super().__init__(_Handler)
        self.new_work = new_work
        self.requests: list[dict] = []
        self.steps = 0
        self.answered = False  # the last reply was the answer

    def parts(self, request: dict) -> list[dict]:
        with self.lock:
            self.requests.append(request)
            # One session's requests come one at a time: after the answer only a retry brings
            # the model back.
            if self.new_work and self.answered:
                self.answered = False
                self.steps += 1
                return [{"functionCall": {"name": SHELL, "args": {"command": f"echo step {self.steps}",
                                                                   "description": "Do the next step"}}}]
            self.answered = True
        return [{"text": ANSWER}]


def with_keep_going(env: dict, directory: pathlib.Path, *, loopwarden: bool) -> dict:
    """The home's settings with the user's AfterAgent hook (deny: retry, KEEP_GOING_LIMIT times),
    and without loopwarden's hooks when `loopwarden` is false."""
    settings_file = pathlib.Path(env["HOME"]) / ".gemini" / "settings.json"
    settings = json.loads(settings_file.read_text())
    if not loopwarden:
        settings["hooks"] = {}
    script = keep_going_hook(directory, {"decision": "deny", "reason": KEEP_GOING})
    settings.setdefault("hooks", {}).setdefault("AfterAgent", []).append(
        {"hooks": [{"type": "command", "command": str(script), "timeout": 10000}]})
    settings_file.write_text(json.dumps(settings, indent=2))
    return env


def session(gemini, tmp_path: pathlib.Path, name: str, model: RetriedModel, url: str, *,
            loopwarden: bool) -> subprocess.CompletedProcess:
    env = with_keep_going(gemini_home(tmp_path / name, url), tmp_path / name, loopwarden=loopwarden)
    workspace = tmp_path / name / "workspace"
    workspace.mkdir()
    return gemini_run(gemini, env, model, workspace, "say done")


class TestARetryLoop:
    def test_loopwarden_ends_a_loop_gemini_cli_never_ends_itself(self, gemini, daemon, tmp_path):
        url = f"http://{hooks_address(daemon)}"
        with serving(RetriedModel()) as alone:
            unguarded = session(gemini, tmp_path, "alone", alone, url, loopwarden=False)
        before = daemon.scrape()
        with serving(RetriedModel()) as model:
            guarded = session(gemini, tmp_path, "guarded", model, url, loopwarden=True)
        after = daemon.scrape()
        print(f"model requests: {len(alone.requests)} without loopwarden (until the user's hook gave up), "
              f"{len(model.requests)} with it")

        assert 0 == unguarded.returncode, unguarded.stderr[-3000:]
        assert KEEP_GOING_LIMIT + 1 == len(alone.requests)  # Gemini CLI itself never stops it
        assert STOP_ABORT_AT + 1 == len(model.requests)
        assert 1 == aborts(before, after, "stop_continuation", "gemini_cli")
        assert "stop_hook_loop" in guarded.stdout + guarded.stderr

    def test_new_tool_work_between_retries_is_never_ended(self, gemini, daemon, tmp_path):
        url = f"http://{hooks_address(daemon)}"
        before = daemon.scrape()
        with serving(RetriedModel(new_work=True)) as model:
            done = session(gemini, tmp_path, "working", model, url, loopwarden=True)
        after = daemon.scrape()

        assert 0 == done.returncode, done.stderr[-3000:]
        assert KEEP_GOING_LIMIT == model.steps
        assert 0 == aborts(before, after, "stop_continuation", "gemini_cli")
