"""What the engine answers: actions, detectors, levels, error codes and the verdict itself.

The string values are the stable names used in logs and metric labels.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class Action(str, enum.Enum):
    ALLOW = "allow"
    WARN = "warn"
    BLOCK = "block"
    ABORT = "abort"
    REJECT = "reject"


class Detector(str, enum.Enum):
    NONE = "none"
    GENERIC_REPEAT = "generic_repeat"
    KNOWN_POLL_NO_PROGRESS = "known_poll_no_progress"
    PING_PONG = "ping_pong"
    UNKNOWN_TOOL_REPEAT = "unknown_tool_repeat"
    GLOBAL_CIRCUIT_BREAKER = "global_circuit_breaker"
    POST_COMPACTION_GUARD = "post_compaction_guard"
    RUN_WIDE_NO_PROGRESS = "run_wide_no_progress"
    ARGUMENT_CHURN = "argument_churn"
    ERROR_REPEAT = "error_repeat"
    DUPLICATE_SIDE_EFFECT = "duplicate_side_effect"  # opt-in, judged by the core only
    # The core's alone (opt-in): named here so its verdicts can be read in the oracle's terms.
    CYCLE = "cycle"
    FAILURE_CASCADE = "failure_cascade"


class Level(str, enum.Enum):
    NONE = "none"
    WARNING = "warning"
    CRITICAL = "critical"


class ErrorCode(str, enum.Enum):
    """Stable codes: the guard's abort reason and every input error a REJECT can carry."""

    COMPACTION_LOOP_PERSISTED = "compaction_loop_persisted"
    TOOL_LOOP_PERSISTED = "tool_loop_persisted"
    MISSING_RUN_ID = "missing_run_id"
    MISSING_EVENT_KIND = "missing_event_kind"
    INVALID_PARAMS_JSON = "invalid_params_json"
    INVALID_RESULT_JSON = "invalid_result_json"
    PARAMS_TOO_LARGE = "params_too_large"
    RESULT_TOO_LARGE = "result_too_large"
    RUN_ID_TOO_LONG = "run_id_too_long"
    JSON_TOO_DEEP = "json_too_deep"
    TOO_MANY_EVENTS = "too_many_events"
    TOOL_NAME_TOO_LONG = "tool_name_too_long"
    AGENT_ID_TOO_LONG = "agent_id_too_long"
    SESSION_ID_TOO_LONG = "session_id_too_long"
    TOOL_CALL_ID_TOO_LONG = "tool_call_id_too_long"
    # The daemon failed while evaluating this event (a bug); the event changed nothing.
    INTERNAL_ERROR = "internal_error"


# NOTE: not frozen: a frozen dataclass's __init__ goes through object.__setattr__ per field, which
# costs microseconds on the per-event path. Instances are never mutated after construction.
@dataclass(slots=True, kw_only=True)
class Verdict:
    action: Action
    detector: Detector = Detector.NONE
    level: Level = Level.NONE
    count: int = 0
    message: str = ""
    warning_key: str = ""
    # Warnings: first for their key in this run, or first in a new decade of count.
    # BLOCK and ABORT are always announced.
    announce: bool = False
    paired_tool_name: str = ""
    error_code: str = ""
    tool_name: str = ""
    # Evidence: seqs of the records that formed the pattern (oldest first), and the call ids of
    # those still pending. Empty for plain verdicts.
    evidence_seqs: tuple[int, ...] = ()
    evidence_call_ids: tuple[str, ...] = ()
    # Shadow mode: `action` is what the runner does (ALLOW/WARN); this is what would have been enforced.
    shadow_action: Action | None = None
    # A compaction retry armed the post-compaction guard (logged by the service).
    guard_armed: bool = False

    @property
    def loop_started_seq(self) -> int:
        return self.evidence_seqs[0] if self.evidence_seqs else 0


ALLOW = Verdict(action=Action.ALLOW)


def reject(code: ErrorCode, message: str) -> Verdict:
    return Verdict(action=Action.REJECT, error_code=code.value, message=message)
