"""Three peers' published tool-call loop rules, re-implemented in Python so the bench can replay
them on the same events as loopwarden (`bench/real_traces.py --head-to-head`).

Each peer is a class with `observe(event) -> str`, fed one event dict at a time, in run order (a
fresh instance per run): `tool_call` (tool_name, params), `tool_outcome` (tool_name, params,
result | error) and `run_end`. It answers:

- "allow": nothing happens;
- "warn": the peer puts something in front of the model or the caller and lets the call run;
- "stop": the peer refuses this call (it does not run) or halts the run before it.

A verdict on a `tool_call` is about that call; a verdict on a `run_end` is about the step the
agent would have taken next. Every rule is judged as its source has it: what it compares (the
call alone, or the call and what it returned), whether repeats must be consecutive, and its
thresholds at their defaults. Only the tool-call rules are here: the peers' text, monologue,
context-window and LLM-judge checks need events the traces do not carry.

The traces have no parallel calls (no call starts before the previous one's outcome), so every
call is its own model round.
"""
from __future__ import annotations

import json
import re

ALLOW, WARN, STOP = "allow", "warn", "stop"


def _arguments(event: dict):
    params = event.get("params")
    return {} if params is None else params


def _canonical(value) -> str:
    """Key-order-insensitive JSON. Equal values give equal text, which is all a repeat test needs
    (the peers hash this text; equal text, equal hash)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# OpenRouter Agent SDK `doomLoop`, tool-fingerprint detector, default ladder.
# Source: github.com/OpenRouterTeam/typescript-agent at commit
# 5a7ed03e5acf47e640ec027dbd3c713f115a054a (the detector last changed in 75271c31fdd5):
#   packages/agent/src/lib/doom-loop.ts   DEFAULT_DOOM_LOOP_LADDER {observe: 2, steer: false,
#       escalate: false, block: 3, stop: 6}; fingerprintToolCall = sha256(toolName + "\n" +
#       JCS(arguments)); DoomLoopMonitor.recordToolCall keeps one streak per tool name
#       (interleaved calls to OTHER tools do not reset it); a tool's streak grows when its next
#       round repeats the same fingerprint and restarts at 1 otherwise; thresholds compare `>=`,
#       strongest rung wins; blocked calls are recorded like any other.
#   packages/agent/src/lib/model-result.ts checkDoomLoopBeforeExecution / applyDoomLoopVerdict:
#       the check runs before the call executes; `block` refuses the call with an explanatory
#       error output, `stop` also refuses it and halts before the next model request; `observe`
#       only emits the `DoomLoopDetected` hook to the caller's hook handlers - nothing reaches the
#       model. It is counted as "warn" here because it is a report to the caller.
# What it compares: tool name + arguments only, never the result or error (README: "The detector
# compares arguments, not results"). No tool here declares a `loopKey`, so the whole argument
# object is the identity. The text detectors (text-repetition, text-streak) and server-tool
# fingerprints need assistant text / server tools, which the traces do not have.
# JCS is replaced by sorted-key JSON: both are canonical, so repeats match the same way.


class OpenRouterDoomLoop:
    name = "OpenRouter doomLoop"
    OBSERVE, BLOCK, STOP = 2, 3, 6

    def __init__(self) -> None:
        self.tools: dict[str, tuple[str, int]] = {}   # tool name -> (fingerprint, streak)

    def observe(self, event: dict) -> str:
        if event.get("kind") != "tool_call":
            return ALLOW
        tool = str(event.get("tool_name"))
        fingerprint = f"{tool}\n{_canonical(_arguments(event))}"
        previous = self.tools.get(tool)
        streak = previous[1] + 1 if previous is not None and previous[0] == fingerprint else 1
        self.tools[tool] = (fingerprint, streak)
        if streak >= self.STOP or streak >= self.BLOCK:
            return STOP
        if streak >= self.OBSERVE:
            return WARN
        return ALLOW


# ---------------------------------------------------------------------------------------------
# gemini-cli LoopDetectionService, the tool-call check only.
# Source: github.com/google-gemini/gemini-cli at commit 5411f113cafae26161b4969b0237b8e1e024e2c2
# (the service last changed in acae7124bdd849e554eaa5e090199a0cf08cd782):
#   packages/core/src/services/loopDetectionService.ts  TOOL_CALL_LOOP_THRESHOLD = 5;
#       getToolCallKey = sha256(name + ":" + JSON.stringify(args)); checkToolCallLoop keeps the
#       last 25 keys and reports a loop when the last 5*k calls are one cycle of length k
#       repeated 5 times, for k = 1..5 (k = 1: five identical calls in a row). Before acae7124 it
#       counted only identical consecutive calls; the cycle check is the current rule.
#   packages/core/src/core/client.ts  every ToolCallRequest goes through addAndCheck before it is
#       handed on; on the first detection (count 1) the stream is cut before the call is yielded
#       (it never runs) and _recoverFromLoop re-prompts the model with "Potential loop
#       detected ..."; on the second detection of the same prompt (count 2) it yields
#       LoopDetected and the turn ends. The history is kept across the recovery.
# Both detections refuse the call, so both are "stop"; there is no earlier warning. After the
# second one the agent waits for a new prompt, and a new prompt resets the service (reset()), so
# the replay resets it there. What it compares: tool name + arguments, never results; the
# repeats must be consecutive (or an exact consecutive cycle). The content-chanting and LLM
# checks are not tool-call rules. The traces carry no user turns, so a whole run is one prompt:
# gemini-cli would also reset at every user message of a τ-bench conversation.
# JSON.stringify keeps the arguments' key order; json.dumps without sort_keys does too.


class GeminiCliLoopDetection:
    name = "gemini-cli loopDetection"
    THRESHOLD = 5
    MAX_CYCLE = 5

    def __init__(self) -> None:
        self.history: list[str] = []
        self.detected = 0

    def observe(self, event: dict) -> str:
        if event.get("kind") != "tool_call":
            return ALLOW
        args = json.dumps(event.get("params"), separators=(",", ":"), ensure_ascii=False)
        self.history.append(f"{event.get('tool_name')}:{args}")
        self.history = self.history[-self.MAX_CYCLE * self.THRESHOLD:]
        if not self._is_loop():
            return ALLOW
        self.detected += 1
        if self.detected > 1:   # LoopDetected: the turn ends; the next prompt starts afresh
            self.history, self.detected = [], 0
        return STOP

    def _is_loop(self) -> bool:
        n = len(self.history)
        for k in range(1, self.MAX_CYCLE + 1):
            required = k * self.THRESHOLD
            if n >= required:
                cycle = self.history[-k:]
                if all(self.history[n - required + i] == cycle[i % k] for i in range(required)):
                    return True
        return False


# ---------------------------------------------------------------------------------------------
# OpenHands StuckDetector (V0 agent controller).
# Source: github.com/All-Hands-AI/OpenHands (now OpenHands/OpenHands) at commit
# 156d0686c46aafb0fa9d291da6421fb6f64dddc0 (the detector last changed in
# 17e32af6fec0643e546d560592e9477efa479b44):
#   openhands/controller/stuck.py  is_stuck(): with at least 3 events in the history (user
#       messages and null events left out), the last 4 actions and the last 4 observations
#       (collected separately, wherever they are):
#       1. "repeating_action_observation": 4 equal actions AND 4 equal observations;
#       2. "repeating_action_error": the last 3 actions equal AND the last 3 observations all
#          ErrorObservation (their texts may differ); the IPython SyntaxError variant needs
#          Jupyter cells, which the traces do not have;
#       4. "repeating_action_observation_pattern" (6 or more events): over the last 6 actions and
#          6 observations, a0 == a2 == a4, a1 == a3 == a5, and the same for the observations;
#       3 (monologue: 3 identical agent messages with no observation between) and
#       5 (context window: 10 condensation events in a row) are not tool-call loops and need
#       events the traces do not have.
#       _eq_no_pid: a CmdOutputObservation equals another with the same command and exit code
#       (the output is NOT compared); everything else by dataclass equality (all fields).
#   openhands/controller/agent_controller.py _step(): `enable_stuck_detection` defaults to true;
#       is_stuck runs at the start of every agent step, before the agent acts; stuck raises
#       AgentStuckInLoopError (headless: the run ends in error; CLI: the agent is paused with
#       recovery options). So a stop here is the step after the loop's last observation: it is
#       judged on the next tool_call (that call never happens) or on run_end. No warning stage.
# Events as OpenHands would hold them: a `bash` / `exec` call with a `command` is a CmdRunAction
# and its outcome a CmdOutputObservation (command + exit code, from mini-swe's <returncode> or
# exec's details.exitCode; -1 when the output has neither); OpenHands builds the CmdRunAction from
# the command alone (codeact_agent/function_calling.py), so other argument fields (a nonce) do not
# reach its equality. Any other call is an MCPAction (name + arguments), its result an
# MCPObservation (text + name + arguments); an `error` outcome is an ErrorObservation. Strictly,
# OpenHands returns a failing MCP tool as an MCPObservation with isError (stuck.py's scenario 2
# would not see it) and only its own tools' failures, or a call to a missing tool, as an
# ErrorObservation: reading every error as ErrorObservation gives OpenHands scenario 2 on every
# error, the generous reading. Actions also compare their `thought` in OpenHands; the traces have
# none, so actions compare by tool and arguments, which can only make it fire more, not less.
# Headless mode (the whole history), as in evaluation runs.

MINISWE_RETURNCODE = re.compile(r"\A<returncode>(-?\d+)</returncode>")


def _result_text(result) -> str:
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        return "".join(part.get("text", "") for part in result["content"] if isinstance(part, dict))
    return result if isinstance(result, str) else _canonical(result)


def _exit_code(result) -> int | None:
    if isinstance(result, dict):
        details = result.get("details")
        if isinstance(details, dict) and isinstance(details.get("exitCode"), int):
            return details["exitCode"]
    match = MINISWE_RETURNCODE.match(_result_text(result))
    return int(match.group(1)) if match else None


class OpenHandsStuckDetector:
    name = "OpenHands StuckDetector"
    COMMAND_TOOLS = ("bash", "exec")

    def __init__(self) -> None:
        self.history: list[tuple] = []   # ("action", identity) / ("observation", identity, is_error)

    def observe(self, event: dict) -> str:
        kind = event.get("kind")
        if kind == "tool_outcome":
            self.history.append(self._observation(event))
            return ALLOW
        if kind not in ("tool_call", "run_end"):
            return ALLOW
        stuck = self._is_stuck()          # checked before the agent's next step
        if kind == "tool_call":
            self.history.append(("action", self._action(event)))
        return STOP if stuck else ALLOW

    def _command(self, event: dict) -> str | None:
        params = event.get("params")
        if event.get("tool_name") not in self.COMMAND_TOOLS or not isinstance(params, dict):
            return None
        command = params.get("command")
        return command if isinstance(command, str) else None

    def _action(self, event: dict) -> tuple:
        command = self._command(event)
        if command is not None:
            return ("CmdRunAction", command)
        return ("MCPAction", event.get("tool_name"), _canonical(_arguments(event)))

    def _observation(self, event: dict) -> tuple:
        if "error" in event:
            return ("observation", ("ErrorObservation", str(event["error"])), True)
        result = event.get("result")
        command = self._command(event)
        if command is not None:   # an exit code the output does not give stays CmdOutputMetadata's -1
            exit_code = _exit_code(result)
            return ("observation", ("CmdOutputObservation", command, -1 if exit_code is None else exit_code), False)
        return ("observation", ("MCPObservation", _result_text(result), event.get("tool_name"),
                                _canonical(_arguments(event))), False)

    def _last(self, count: int) -> tuple[list, list]:
        actions, observations = [], []
        for entry in reversed(self.history):
            if entry[0] == "action" and len(actions) < count:
                actions.append(entry[1])
            elif entry[0] == "observation" and len(observations) < count:
                observations.append(entry)
            if len(actions) == count and len(observations) == count:
                break
        return actions, observations

    def _is_stuck(self) -> bool:
        if len(self.history) < 3:
            return False
        actions, observations = self._last(4)
        seen = [o[1] for o in observations]
        # 1: four identical action/observation pairs
        if len(actions) == 4 and len(seen) == 4 and all(a == actions[0] for a in actions) \
                and all(o == seen[0] for o in seen):
            return True
        # 2: three identical actions, each ending in an error
        if len(actions) >= 3 and len(observations) >= 3 and all(a == actions[0] for a in actions[:3]) \
                and all(o[2] for o in observations[:3]):
            return True
        # 4: the same two action/observation pairs alternating over the last six
        if len(self.history) >= 6:
            actions, observations = self._last(6)
            seen = [o[1] for o in observations]
            if len(actions) == 6 and len(seen) == 6 and all(
                    xs[0] == xs[2] == xs[4] and xs[1] == xs[3] == xs[5] for xs in (actions, seen)):
                return True
        return False


PEERS = {peer.name: peer for peer in (OpenRouterDoomLoop, GeminiCliLoopDetection, OpenHandsStuckDetector)}
