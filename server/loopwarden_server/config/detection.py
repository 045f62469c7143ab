"""The settings the engine consumes, already merged, defaulted and clamped by the config loader."""
from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_HISTORY_SIZE = 30
DEFAULT_WARNING_THRESHOLD = 10
DEFAULT_CRITICAL_THRESHOLD = 20
DEFAULT_UNKNOWN_TOOL_THRESHOLD = 10
DEFAULT_GLOBAL_CIRCUIT_BREAKER_THRESHOLD = 30
DEFAULT_COMPACTION_WINDOW_SIZE = 3


@dataclass(frozen=True, slots=True)
class LoopDetectionSettings:
    """Effective `tools.loopDetection` for one agent (spec section 2, after resolution).

    `enabled` keeps its three states: None (unset: only the post-compaction guard runs),
    True (every guard), False (nothing runs and nothing is recorded).
    """

    enabled: bool | None = None
    history_size: int = DEFAULT_HISTORY_SIZE
    warning_threshold: int = DEFAULT_WARNING_THRESHOLD
    critical_threshold: int = DEFAULT_CRITICAL_THRESHOLD
    unknown_tool_threshold: int = DEFAULT_UNKNOWN_TOOL_THRESHOLD
    global_circuit_breaker_threshold: int = DEFAULT_GLOBAL_CIRCUIT_BREAKER_THRESHOLD
    generic_repeat: bool = True
    known_poll_no_progress: bool = True
    ping_pong: bool = True
    compaction_window_size: int = DEFAULT_COMPACTION_WINDOW_SIZE
    # Extensions (from the `loopwarden` block, never from tools.loopDetection); 0/False = off, so
    # by default every verdict is exactly the documented one.
    abort_after_blocks: int = 0  # the N-th BLOCK of a run becomes ABORT (tool_loop_persisted)
    run_wide_breaker_threshold: int = 0  # K completed calls in a row with no new triple: critical
    shadow: bool = False  # compute BLOCK/ABORT, report them, but answer ALLOW
    # Opt-in detectors ranked after the reference's (0 = off).
    argument_churn_warn_at: int = 0  # same tool, changing args, one result: warn at this streak
    argument_churn_block_at: int = 0  # … and block at this one
    error_repeat_threshold: int = 0  # same call, identical error: block at this count, warn one earlier
    # A ping-pong with a side that only returned empty results is never blocked (only warned).
    ping_pong_needs_answers: bool = False
    # The preset the settings were resolved from ("" = none: the documented defaults).
    preset: str = ""

    @property
    def ranked_after_on(self) -> bool:
        """Any opt-in detector that ranks after the reference table is on."""
        return bool(self.argument_churn_warn_at or self.argument_churn_block_at or self.error_repeat_threshold)

    @property
    def rolling_detectors_on(self) -> bool:
        return self.enabled is True

    @property
    def recording_on(self) -> bool:
        """Calls and outcomes are recorded unless detection is explicitly switched off."""
        return self.enabled is not False

    @property
    def compaction_guard_on(self) -> bool:
        return self.enabled is not False


@dataclass(frozen=True, slots=True)
class ToolCatalog:
    """Tool classifications that live outside `tools.loopDetection` (daemon settings).

    provider_send_tools: tools whose results are outbound sends (e.g. "telegram"): their outcome
        hash ignores volatile delivery ids, like `message` with a send action.
    extra_poll_tools: tools treated as known poll tools for any params, like `command_status`.
    Names are normalised (lower-case) by the loader.
    """

    provider_send_tools: frozenset[str] = field(default_factory=frozenset)
    extra_poll_tools: frozenset[str] = field(default_factory=frozenset)


DEFAULT_TOOL_CATALOG = ToolCatalog()
