"""Loops without tool calls in real `codex exec` runs (0.169.0), their model the Responses API
stand-in of test_codex_hooks, loopwarden's hooks the ones `loopwarden install-hooks codex --user`
writes (run with `--dangerously-bypass-hook-trust`, standing in for the user's review).

- A stop-hook loop: the user's own Stop hook (a second entry of hooks.json) answers `decision:
  "block"` with a reason, which keeps the turn going, and the model answers the same thing each
  time. Codex 0.169.0 has no cap of its own: without loopwarden the loop runs until the user's hook
  itself gives up (here after KEEP_GOING_LIMIT continuations), measured in the same run; with
  loopwarden, `stopContinuation` ends it with `continue: false` after abortAt continuations.
- The same hook with a model that does new tool work after every continuation: never ended.
- A compaction storm: `model_auto_compact_token_limit` low and the model's usage over it every
  fourth call, so Codex compacts (PreCompact) again and again while the model repeats one shell
  command. Codex honours `continue: false` at PreCompact: loopwarden's `compaction_storm` abort
  stops the turn at the abortAt-th compaction, before its summary is asked for.

The daemon's call detectors that would judge the repeated command first are off or out of reach.
"""
from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from tests.e2e.test_hooks_http import daemon_args, hooks_address  # noqa: F401 - the daemon with its hook listener
from tests.integrations.test_codex_hooks import _Handler, codex, codex_exec, codex_home  # noqa: F401 - codex
from tests.support.keep_going import (
    ANSWER, COMPACTION_ABORT_AT, CONFIG, KEEP_GOING, KEEP_GOING_LIMIT, STOP_ABORT_AT, aborts, keep_going_hook,
)

from tests.support.scripted_model import ScriptedModelServer, serving

pytestmark = pytest.mark.node

KEEP_GOING_BLOCK = {"decision": "block", "reason": KEEP_GOING}  # the user's Stop hook: keep going

COMPACT_TOKEN_LIMIT = 100_000
FULL_CONTEXT_TOKENS = 900_000
COMPACT_EVERY = 4
MODEL_CALL_LIMIT = 30
COMPACTION_PROMPT = "CONTEXT CHECKPOINT COMPACTION"  # the request Codex makes to compact


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


def _message(text: str) -> dict:
    return {"type": "message", "id": "msg_done", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _shell(call: int, command: str) -> dict:
    return {"type": "function_call", "id": f"fc_{call}", "status": "completed", "call_id": f"call_{call}",
            "name": "exec_command", "arguments": json.dumps({"cmd": command})}


class _UsageHandler(_Handler):
    """test_codex_hooks' streaming handler, with the usage `next_item` names."""

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        item, tokens = self.server.next_item(request)
        response_id = f"resp_{len(self.server.requests)}"
        usage = {"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": tokens + 5}
        events = [{"type": "response.created", "response": {"id": response_id}},
                  {"type": "response.output_item.done", "output_index": 0, "item": item},
                  {"type": "response.completed", "response": {"id": response_id, "usage": usage}}]
        self._send("".join(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events).encode(),
                   "text/event-stream")


class StopModel(ScriptedModelServer):
    """Ends every turn on the same answer; with `new_work`, a continuation (a stop hook's prompt)
    first gets a shell command it has not run before, and its output the answer."""

    def __init__(self, *, new_work: bool = False):
        super().__init__(_UsageHandler)
        self.new_work = new_work
        self.requests: list[dict] = []
        self.steps = 0
        self.answered = False  # the last reply was the answer

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def next_item(self, request: dict) -> tuple[dict, int]:
        with self.lock:
            self.requests.append(request)
            # One turn's requests come one at a time: after the answer only a stop hook's
            # continuation brings the model back.
            if self.new_work and self.answered:
                self.answered = False
                self.steps += 1
                return _shell(self.steps, f"echo step {self.steps}"), 10
            self.answered = True
        return _message(ANSWER), 10


class CompactingModel(ScriptedModelServer):
    """Repeats one shell command, its usage over the compaction limit every COMPACT_EVERY calls;
    answers Codex's compaction request with a summary; ends the turn after MODEL_CALL_LIMIT calls."""

    def __init__(self):
        super().__init__(_UsageHandler)
        self.requests: list[dict] = []
        self.calls = 0
        self.summaries = 0

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def next_item(self, request: dict) -> tuple[dict, int]:
        with self.lock:
            self.requests.append(request)
            if COMPACTION_PROMPT in json.dumps((request.get("input") or [])[-1:]):
                self.summaries += 1
                return _message("SUMMARY: the user wants a word printed."), 10
            if self.calls >= MODEL_CALL_LIMIT:
                return _message("I will stop here."), 10
            self.calls += 1
            full = self.calls % COMPACT_EVERY == 0
            return _shell(self.calls, "echo looping"), FULL_CONTEXT_TOKENS if full else 10


def home_with(tmp_path: pathlib.Path, model: ScriptedModelServer, url: str, *, loopwarden: bool,
              keep_going: bool, compact_limit: bool = False) -> dict:
    """A CODEX_HOME for `model` with loopwarden's hooks for the daemon at `url` (written by
    install-hooks, then taken out again without `loopwarden`: the same home without it), the
    user's keep-going Stop hook, and a low auto-compaction limit; the environment to run codex in."""
    _home, env = codex_home(tmp_path, model, url)
    codex_dir = pathlib.Path(env["CODEX_HOME"])
    hooks_file = codex_dir / "hooks.json"
    hooks = json.loads(hooks_file.read_text()) if loopwarden else {"hooks": {}}
    if keep_going:
        handler = {"type": "command", "command": str(keep_going_hook(tmp_path, KEEP_GOING_BLOCK))}
        hooks["hooks"].setdefault("Stop", []).append({"hooks": [handler]})
    hooks_file.write_text(json.dumps(hooks, indent=2))
    if compact_limit:
        config = codex_dir / "config.toml"
        config.write_text(f"model_auto_compact_token_limit = {COMPACT_TOKEN_LIMIT}\n" + config.read_text())
    return env


def run(codex: pathlib.Path, workspace: pathlib.Path, env: dict, prompt: str) -> subprocess.CompletedProcess:
    workspace.mkdir(parents=True, exist_ok=True)
    return subprocess.run([str(codex), "exec", "--dangerously-bypass-hook-trust", "--skip-git-repo-check", "-s",
                           "danger-full-access", prompt], capture_output=True, text=True, timeout=300,
                          cwd=workspace, env=env, stdin=subprocess.DEVNULL)


class TestAStopHookLoop:
    def test_loopwarden_ends_a_loop_codex_never_ends_itself(self, codex, daemon, tmp_path):
        url = f"http://{hooks_address(daemon)}"
        with serving(StopModel()) as alone:
            unguarded = run(codex, tmp_path / "w1",
                            home_with(tmp_path / "alone", alone, url, loopwarden=False, keep_going=True), "say done")
        before = daemon.scrape()
        with serving(StopModel()) as model:
            guarded = run(codex, tmp_path / "w2",
                          home_with(tmp_path / "guarded", model, url, loopwarden=True, keep_going=True), "say done")
        after = daemon.scrape()
        print(f"model requests: {len(alone.requests)} without loopwarden (until the user's hook gave up), "
              f"{len(model.requests)} with it")

        assert 0 == unguarded.returncode, unguarded.stderr[-3000:]
        assert KEEP_GOING_LIMIT + 1 == len(alone.requests)  # Codex itself never stops it
        assert 0 == guarded.returncode, guarded.stderr[-3000:]
        assert STOP_ABORT_AT + 1 == len(model.requests)
        assert 1 == aborts(before, after, "stop_continuation", "codex")
        assert "hook: Stop Stopped" in guarded.stdout + guarded.stderr

    def test_new_tool_work_between_stops_is_never_ended(self, codex, daemon, tmp_path):
        url = f"http://{hooks_address(daemon)}"
        before = daemon.scrape()
        with serving(StopModel(new_work=True)) as model:
            done = run(codex, tmp_path / "w", home_with(tmp_path, model, url, loopwarden=True, keep_going=True),
                       "do the steps")
        after = daemon.scrape()
        print(f"new work between stops: {model.steps} steps, {len(model.requests)} model requests")

        assert 0 == done.returncode, done.stderr[-3000:]
        assert KEEP_GOING_LIMIT == model.steps  # every continuation ran, until the user's hook let it end
        assert 0 == aborts(before, after, "stop_continuation", "codex")
        assert "hook: Stop Stopped" not in done.stdout + done.stderr


class TestACompactionStorm:
    def test_loopwarden_stops_the_turn_at_the_storms_compaction(self, codex, daemon, tmp_path):
        url = f"http://{hooks_address(daemon)}"
        with serving(CompactingModel()) as alone:
            unguarded = run(codex, tmp_path / "w1", home_with(tmp_path / "alone", alone, url, loopwarden=False,
                                                              keep_going=False, compact_limit=True), "print a word")
        before = daemon.scrape()
        with serving(CompactingModel()) as model:
            guarded = run(codex, tmp_path / "w2", home_with(tmp_path / "guarded", model, url, loopwarden=True,
                                                            keep_going=False, compact_limit=True), "print a word")
        after = daemon.scrape()
        print(f"compactions: {alone.summaries} without loopwarden ({alone.calls} calls), "
              f"{model.summaries} with it ({model.calls} calls)")

        assert 0 == unguarded.returncode, unguarded.stderr[-3000:]
        assert MODEL_CALL_LIMIT == alone.calls and alone.summaries >= COMPACTION_ABORT_AT + 2
        # The abortAt-th PreCompact is stopped before its summary request.
        assert COMPACTION_ABORT_AT - 1 == model.summaries
        assert COMPACTION_ABORT_AT * COMPACT_EVERY == model.calls
        assert 1 == aborts(before, after, "compaction_storm", "codex")
        assert "hook: PreCompact Stopped" in guarded.stdout + guarded.stderr
