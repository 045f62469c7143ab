"""Codex's hooks: its hook schemas (codex-rs/hooks/schema/generated: pre-tool-use, post-tool-use,
pre-compact, user-prompt-submit, subagent-start) and its hook runtime
(codex-rs/core/src/hook_runtime.rs).

Codex's inputs and answers are Claude Code's shapes, with less: no failure event (a failed call is
a PostToolUse), no batch end, no session end, and no ask (its parser refuses
`permissionDecision: "ask"`). Its `turn_id` names the turn a prompt starts. Its sub-agents are
named as Claude Code's are (`agent_id`, the child thread's id). Codex refuses `continue` /
`stopReason` in a PreToolUse answer (the whole answer would be dropped as invalid), so an abort
there only denies the call; every later call of the run is denied the same way, and the
PostToolUse that reports the loop's outcome stops the session.

Its `Stop` carries the turn's final answer (`last_assistant_message`, null when there is none) and
`stop_hook_active`; its answer takes `continue: false` with `stopReason` (ends the session) and
`systemMessage`, and refuses anything else (no `hookSpecificOutput`), so a warning there is shown
only. `decision: "block"` would keep the turn going, which loopwarden never asks for. Its
SubagentStop ends one turn of a sub-agent, which `send_input` can start again: it is the
sub-agent's Stop (its child run's final answer), and ends no run. PreCompact takes `continue:
false` too.
"""
from __future__ import annotations

from collections.abc import Mapping

from ...hookinstall.spec import Event, HookConfig
from ..host import Stage
from .claude_code import ClaudeCode

STAGES: Mapping[str, Stage] = {
    "PreToolUse": Stage.BEFORE_TOOL, "PostToolUse": Stage.AFTER_TOOL, "PreCompact": Stage.COMPACT,
    "UserPromptSubmit": Stage.USER_PROMPT, "SubagentStart": Stage.SUBAGENT_START, "Stop": Stage.STOP,
    "SubagentStop": Stage.STOP,
}


class Codex(ClaudeCode):
    name = "codex"
    title = "Codex"
    stages = STAGES
    ends_batches = False
    can_ask = False
    stops_before_tool = False
    prompt_key = "turn_id"

    install = HookConfig(
        # Codex reads hooks.json next to config.toml: ~/.codex (or $CODEX_HOME) and a trusted
        # project's .codex (codex-rs/hooks/src/engine/discovery.rs). Its tool hooks fire for shell
        # commands, apply_patch and MCP tools, the matcher the Codex guide gives.
        project_file=".codex/hooks.json", user_dir_env="CODEX_HOME", user_dir=".codex", user_file="hooks.json",
        next_step="Codex runs a hook only once you have reviewed it: start codex, which lists the hooks that need "
                  "review, and trust them (codex exec runs no unreviewed hook)",
        events=(
            Event("PreToolUse", "Bash|apply_patch|mcp__.*", before_tool=True),
            Event("PostToolUse", "Bash|apply_patch|mcp__.*"),
            Event("PreCompact"),
            Event("UserPromptSubmit"),  # a new prompt lifts a block (a user turn)
            Event("SubagentStart"),  # a sub-agent's child run exists before its first call
            Event("Stop"),  # the final answer, and a stop hook keeping the turn going
            Event("SubagentStop"),  # the same for a sub-agent's turn
        ),
    )

    def accepts_ask(self, tool_use_id: str) -> bool:
        return False


HOST = Codex()
