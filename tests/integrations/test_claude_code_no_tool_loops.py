"""Loops without tool calls in real headless Claude Code sessions (2.1.332, `claude -p`), their model
the scripted stand-in of test_claude_code_plugin, loopwarden's hooks the ones `loopwarden
install-hooks claude-code --user` writes.

- A stop-hook loop: the user's own Stop hook (a second hook script) always answers `decision:
  "block"` with a reason, which keeps the session going, and the model answers the same thing each
  time. Without loopwarden, Claude Code gives up by itself after 8 continuations (9 model
  requests, `terminal_reason: completed`), measured here in the same run; with loopwarden's Stop
  hook, `stopContinuation` ends the session with `continue: false` (`terminal_reason:
  stop_hook_prevented`) after fewer requests.
- The same keep-going hook with a model that does new tool work after every continuation: never
  ended by loopwarden. Claude Code's own cap does not end it either (it counts continuations
  without tool work only, measured: the session went on for as long as the hook said "keep
  going"), so here the user's hook itself gives up after KEEP_GOING_LIMIT continuations.
- A compaction storm: the model's usage says the context is full every fourth call, so Claude Code
  compacts automatically (PreCompact, `trigger: auto`), and between compactions the model repeats
  one Bash call (no new tool result). Claude Code 2.1.332 ignores `continue: false` at PreCompact,
  so the `compaction_storm` abort takes effect at the next tool call: its PreToolUse denies it and
  ends the session. Without loopwarden the session compacts until the model gives up.

The daemon's call detectors that would judge the repeated command first are off or out of reach,
so what ends a session here is the no-tool detectors' alone.
"""
from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from tests.e2e.test_hooks_http import daemon_args, hooks_address  # noqa: F401 - the daemon with its hook listener
from tests.integrations.test_claude_code_plugin import (  # noqa: F401 - claude: the pinned Claude Code
    _ScriptedModelHandler, claude, install_hooks_user, quiet_env,
)
from tests.support.keep_going import (
    ANSWER, COMPACTION_ABORT_AT, CONFIG, KEEP_GOING, KEEP_GOING_LIMIT, STOP_ABORT_AT, aborts, keep_going_hook,
)

from tests.support.scripted_model import ScriptedModelServer, serving

pytestmark = pytest.mark.node

KEEP_GOING_BLOCK = {"decision": "block", "reason": KEEP_GOING}  # the user's Stop hook: keep going

CLAUDE_CODE_CONTINUATIONS = 8  # Claude Code 2.1.332's own cap on Stop-hook continuations
FULL_CONTEXT_TOKENS = 990_000  # over the scripted model's context window's auto-compact threshold
COMPACT_EVERY = 4  # calls between compactions: more than Claude Code's own thrash window of 3 turns
MODEL_CALL_LIMIT = 40


@pytest.fixture(scope="module")
def daemon_config() -> str:
    return CONFIG


class StopModel(ScriptedModelServer):
    """Answers every prompt and every stop-hook continuation with the same final answer; with
    `new_work`, a continuation first gets a Bash call it has not made before (`echo step N`), and
    its result the answer. Keeps every request."""

    def __init__(self, *, new_work: bool = False):
        super().__init__(_ScriptedModelHandler)
        self.new_work = new_work
        self.requests: list[dict] = []
        self.steps = 0
        self.answered = False  # the last reply was the final answer

    def reply(self, request: dict) -> dict:
        with self.lock:
            self.requests.append(request)
            # One session's requests come one at a time: after a final answer only a stop hook's
            # continuation brings the model back (Claude Code reorders the history it sends, so
            # the request itself does not say reliably what came last).
            if self.new_work and self.answered:
                self.answered = False
                self.steps += 1
                call = {"type": "tool_use", "id": f"toolu_{self.steps:04d}", "name": "Bash",
                        "input": {"command": f"echo step {self.steps}", "description": "Do the next step"}}
                return {"content": [call], "stop_reason": "tool_use"}
            self.answered = True
        return {"content": [{"type": "text", "text": ANSWER}], "stop_reason": "end_turn"}


class CompactingModel(ScriptedModelServer):
    """Repeats one Bash call and, every COMPACT_EVERY calls, reports a full context, which makes
    Claude Code compact automatically; answers its summary request with a summary; ends the turn
    after MODEL_CALL_LIMIT calls."""

    def __init__(self):
        super().__init__(_ScriptedModelHandler)
        self.calls = 0
        self.summaries = 0

    def reply(self, request: dict) -> dict:
        last = request["messages"][-1]
        blocks = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
        with self.lock:
            if last["role"] == "user" and any("Respond with TEXT ONLY" in block.get("text", "") for block in blocks):
                self.summaries += 1  # Claude Code's compaction: its summary request
                return {"content": [{"type": "text", "text": "<summary>The user wants a word printed.</summary>"}],
                        "stop_reason": "end_turn"}
            if self.calls >= MODEL_CALL_LIMIT:
                return {"content": [{"type": "text", "text": "I will stop here."}], "stop_reason": "end_turn"}
            self.calls += 1
            call = {"type": "tool_use", "id": f"toolu_{self.calls:04d}", "name": "Bash",
                    "input": {"command": "echo looping", "description": "Print a word"}}
            full = self.calls % COMPACT_EVERY == 0
            return {"content": [call], "stop_reason": "tool_use", "input_tokens": FULL_CONTEXT_TOKENS if full else 10}


def home_with(tmp_path: pathlib.Path, name: str, *, loopwarden_url: str | None,
              keep_going: bool) -> pathlib.Path:
    """A home whose ~/.claude/settings.json has loopwarden's hooks (when `loopwarden_url`; written by
    install-hooks) and the keep-going Stop hook (when `keep_going`)."""
    home = tmp_path / name
    (home / ".claude").mkdir(parents=True)
    if loopwarden_url is not None:
        installed = install_hooks_user(home, tmp_path / "bin", loopwarden_url)
        assert 0 == installed.returncode, installed.stderr
    settings_file = home / ".claude" / "settings.json"
    settings = json.loads(settings_file.read_text()) if settings_file.exists() else {}
    if keep_going:
        handler = {"type": "command", "command": str(keep_going_hook(home, KEEP_GOING_BLOCK))}
        settings.setdefault("hooks", {}).setdefault("Stop", []).append({"hooks": [handler]})
    settings_file.write_text(json.dumps(settings, indent=2))
    return home


def run_session(claude: pathlib.Path, home: pathlib.Path, model: ScriptedModelServer, workspace: pathlib.Path,
                prompt: str) -> dict:
    """One `claude -p` session; its JSON result."""
    workspace.mkdir(exist_ok=True)
    done = subprocess.run([str(claude), "-p", prompt, "--allowedTools", "Bash", "--output-format", "json"],
                          capture_output=True, text=True, timeout=300, cwd=workspace,
                          env=quiet_env(home, ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="sk-scripted"))
    assert done.stdout.strip(), done.stderr[-3000:]
    return json.loads(done.stdout)


class TestAStopHookLoop:
    def test_loopwarden_ends_it_before_claude_codes_own_cap(self, claude, daemon, tmp_path):
        url = f"http://{hooks_address(daemon)}"
        with serving(StopModel()) as alone:
            unguarded = run_session(claude, home_with(tmp_path, "alone", loopwarden_url=None, keep_going=True),
                                    alone, tmp_path / "w1", "say done")
        before = daemon.scrape()
        with serving(StopModel()) as model:
            guarded = run_session(claude, home_with(tmp_path, "guarded", loopwarden_url=url, keep_going=True),
                                  model, tmp_path / "w2", "say done")
        after = daemon.scrape()
        print(f"model requests: {len(alone.requests)} without loopwarden "
              f"(terminal_reason {unguarded['terminal_reason']}), {len(model.requests)} with it "
              f"(terminal_reason {guarded['terminal_reason']})")

        # Claude Code's own cap, measured: 8 continuations, 9 requests, and it calls that completed.
        assert (CLAUDE_CODE_CONTINUATIONS + 1, "completed") == (len(alone.requests), unguarded["terminal_reason"])
        # loopwarden: the first stop, then abortAt continuations; the last is refused.
        assert ("stop_hook_prevented", STOP_ABORT_AT + 1) == (guarded["terminal_reason"], len(model.requests))
        assert len(model.requests) < len(alone.requests)
        assert 1 == aborts(before, after, "stop_continuation", "claude_code")
        # Every continuation the model got was the user's hook's reason, never loopwarden's.
        assert all(KEEP_GOING in json.dumps(request["messages"][-1]) for request in model.requests[1:])

    def test_new_tool_work_between_stops_is_never_ended(self, claude, daemon, tmp_path):
        url = f"http://{hooks_address(daemon)}"
        before = daemon.scrape()
        with serving(StopModel(new_work=True)) as model:
            result = run_session(claude, home_with(tmp_path, "working", loopwarden_url=url, keep_going=True),
                                 model, tmp_path / "w", "do the steps")
        after = daemon.scrape()
        print(f"new work between stops: {model.steps} steps, {len(model.requests)} model requests, "
              f"terminal_reason {result['terminal_reason']}")

        assert "completed" == result["terminal_reason"]  # the user's hook let it end, not loopwarden
        assert KEEP_GOING_LIMIT == model.steps  # every continuation did its new step
        assert 0 == aborts(before, after, "stop_continuation", "claude_code")


class TestACompactionStorm:
    def test_loopwarden_ends_a_session_that_compacts_again_and_again(self, claude, daemon, tmp_path):
        url = f"http://{hooks_address(daemon)}"
        with serving(CompactingModel()) as alone:
            unguarded = run_session(claude, home_with(tmp_path, "alone", loopwarden_url=None, keep_going=False),
                                    alone, tmp_path / "w1", "print a word until told to stop")
        before = daemon.scrape()
        with serving(CompactingModel()) as model:
            guarded = run_session(claude, home_with(tmp_path, "guarded", loopwarden_url=url, keep_going=False),
                                  model, tmp_path / "w2", "print a word until told to stop")
        after = daemon.scrape()
        print(f"compactions: {alone.summaries} without loopwarden ({alone.calls} calls, "
              f"{unguarded['terminal_reason']}), {model.summaries} with it ({model.calls} calls, "
              f"{guarded['terminal_reason']})")

        # Alone, Claude Code compacts until the model gives up.
        assert (MODEL_CALL_LIMIT, "completed") == (alone.calls, unguarded["terminal_reason"])
        assert alone.summaries >= MODEL_CALL_LIMIT // COMPACT_EVERY - 1
        # With loopwarden: the abortAt-th compaction aborts the run, and the next call ends the session.
        assert COMPACTION_ABORT_AT == model.summaries
        assert model.calls == COMPACTION_ABORT_AT * COMPACT_EVERY + 1
        # The next call's PreToolUse is denied with continue: false (Claude Code: hook_stopped).
        assert "hook_stopped" == guarded["terminal_reason"]
        assert 2 == aborts(before, after, "compaction_storm", "claude_code")  # the compaction, then that call
