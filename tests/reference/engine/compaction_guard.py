"""The post-compaction guard, all of it: arming on a compaction retry, watching the next
outcomes, and the abort when they repeat one (tool, args, result) triple.

After the runner compacts an overflowing context and retries, the guard watches the next
`windowSize` outcomes. When all of them are the same triple, compaction did not break the loop
and the run is aborted (`compaction_loop_persisted`). It runs unless detection is explicitly
switched off (`enabled: false`), so it works even with the rolling detectors off.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .settings import LoopDetectionSettings
from .state import RunState, args_hash_text
from .verdicts import Action, Detector, ErrorCode, Level, Verdict


@dataclass(slots=True)
class GuardWindow:
    """An armed guard: N slots, each filled by one observed outcome triple."""

    window_size: int
    observed: int = 0
    first_triple: tuple | None = None
    all_identical: bool = True
    seqs: list[int] = field(default_factory=list)  # the observed outcomes, for the evidence

    def observe(self, triple: tuple, seq: int = 0) -> None:
        if self.first_triple is None:
            self.first_triple = triple
        elif triple != self.first_triple:
            self.all_identical = False
        self.observed += 1
        self.seqs.append(seq)

    @property
    def used_up(self) -> bool:
        return self.observed >= self.window_size


def arm(state: RunState, settings: LoopDetectionSettings) -> Verdict:
    """A compaction retry: (re)arm the guard for the next windowSize outcomes."""
    if not settings.compaction_guard_on:
        return Verdict(action=Action.ALLOW,
                       message="post-compaction guard is off (tools.loopDetection.enabled is false)")
    window = settings.compaction_window_size
    state.guard = GuardWindow(window)
    return Verdict(action=Action.ALLOW, message=f"post-compaction guard armed for {window} attempts",
                   guard_armed=True)


def observe_outcome(state: RunState, tool_name: str, call_digest: bytes, status: int, result_digest: bytes,
                    result_hash: str, seq: int, spelled: str | None = None) -> Verdict | None:
    """A recorded outcome while the guard is armed: the abort verdict when the window filled
    with one triple (not yet enforced: the caller applies shadow mode), else None."""
    guard = state.guard
    if guard is None:
        return None
    guard.observe((tool_name, call_digest, status, result_digest), seq)
    if not guard.used_up:
        return None
    state.guard = None
    if not guard.all_identical:
        return None
    spelled = tool_name if spelled is None else spelled  # the message's and verdict's name
    return Verdict(
        action=Action.ABORT, detector=Detector.POST_COMPACTION_GUARD, level=Level.CRITICAL,
        count=guard.observed,
        message=f"CRITICAL: compaction did not break the loop: after compaction, {spelled} was "
                f"called {guard.observed} times with the same arguments and returned the same result "
                "each time, so the run was aborted (compaction_loop_persisted). Report the task as failed.",
        warning_key=f"compaction:{tool_name}:{args_hash_text(tool_name, call_digest)}:{result_hash}",
        announce=True, error_code=ErrorCode.COMPACTION_LOOP_PERSISTED.value,
        tool_name=spelled, evidence_seqs=tuple(guard.seqs),
    )
