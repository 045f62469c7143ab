"""Named presets: `loopwarden: { preset: NAME }` (global or per agent) replaces the defaults.

A preset only supplies defaults: every value written in the file (global or the agent's) still
wins over it, key by key, and the usual W < C < G repair runs after it. `reference` is the
documented behaviour (what no preset means), so an agent can opt out of a global preset.

`fast` stops real loops within about five calls instead of twenty. Its values were chosen on the
shared real traces (`bench/real_traces.py` prints the measurement; README "A fast preset"): no good
run of any set is blocked, and every injected loop kind is blocked within six calls of its start.
"""
from __future__ import annotations

from dataclasses import dataclass

from loopwarden_server.config.model import (
    ArgumentChurnBlock, ErrorRepeatBlock, ExtensionsBlock, LoopDetectionBlock, RunWideBreakerBlock,
)


@dataclass(frozen=True, slots=True)
class Preset:
    loop_detection: LoopDetectionBlock
    extensions: ExtensionsBlock


PRESETS: dict[str, Preset] = {
    "reference": Preset(LoopDetectionBlock(), ExtensionsBlock()),
    "fast": Preset(
        # C = 5: no good run repeats one call with one outcome more than 4 times (the 6th identical
        # call is blocked); W = 4 warns far fewer coding runs than 3 (they re-run tests a lot).
        LoopDetectionBlock(enabled=True, warning_threshold=4, critical_threshold=5, unknown_tool_threshold=4,
                           global_circuit_breaker_threshold=8),
        ExtensionsBlock(
            abort_after_blocks=3,
            # The longest churn streak of a good run is 9 (coding agents: edits that all print nothing).
            argument_churn=ArgumentChurnBlock(enabled=True, warn_at=6, block_at=10),
            error_repeat=ErrorRepeatBlock(enabled=True, threshold=5),
            # The longest no-new-triple stretch of a good run is 4: K = 6 keeps a margin of 2.
            run_wide_breaker=RunWideBreakerBlock(enabled=True, threshold=6),
            # One good airline run alternates an empty `think` with a failing booking 7 times: a
            # silent side proves nothing, so such a ping-pong only warns.
            ping_pong_needs_answers=True,
        ),
    ),
}
