"""What the real-host tests of loops without tool calls share: the user's own stop hook that keeps a
session going (the loop loopwarden must end), the numbers it is judged by, and the abort counter.

The hook is the user's, not loopwarden's: it says "keep going" KEEP_GOING_LIMIT times (past Claude
Code's own cap of 8; Codex and Gemini CLI have none), then lets the session end, so a session that
runs past loopwarden's `abortAt` without being ended shows the host's own behaviour."""
from __future__ import annotations

import json
import pathlib

from tests.support.metrics import delta

STOP_ABORT_AT = 3
COMPACTION_ABORT_AT = 3
KEEP_GOING = "keep going: the task is not finished"
KEEP_GOING_LIMIT = 12
ANSWER = "All done."
# tools.loopDetection.enabled is the gate of every detector; the call detectors that would judge a
# compaction storm's repeated command first are off (generic repeats) or out of reach (the
# post-compaction guard's window, wider than the calls between two compactions).
CONFIG = ("{tools: {loopDetection: {enabled: true, detectors: {genericRepeat: false}, postCompactionGuard: "
          "{windowSize: 20}}}, loopwarden: {stopContinuation: {enabled: true, abortAt: %d}, compactionStorm: "
          "{enabled: true, abortAt: %d}}}" % (STOP_ABORT_AT, COMPACTION_ABORT_AT))


def keep_going_hook(directory: pathlib.Path, answer: dict) -> pathlib.Path:
    """A hook command that prints `answer` (the host's "keep going": Claude Code's and Codex's
    `decision: "block"`, Gemini CLI's AfterAgent `decision: "deny"`) KEEP_GOING_LIMIT times, then
    `{}`; it counts its calls in a file beside it."""
    count = directory / "keep-going.count"
    script = directory / "keep-going.sh"
    script.write_text(f"#!/bin/sh\ncat > /dev/null\necho x >> '{count}'\n"
                      f"if [ $(wc -l < '{count}') -le {KEEP_GOING_LIMIT} ]; then echo '{json.dumps(answer)}'; "
                      "else echo '{}'; fi\n")
    script.chmod(0o755)
    return script


def aborts(before: str, after: str, detector: str, integration: str) -> float:
    """ABORT verdicts of `detector` for the default agent through `integration`, between two scrapes."""
    return delta(before, after, "loopwarden_verdicts_total", action="abort", detector=detector, agent="default",
                 integration=integration)
