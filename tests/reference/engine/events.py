"""The five events a runner sends, as the engine sees them (JSON still as text)."""
from __future__ import annotations

from dataclasses import dataclass


# NOTE: not frozen: a frozen dataclass's __init__ goes through object.__setattr__ per field, which
# costs microseconds on the per-event path. Instances are never mutated after construction.
@dataclass(slots=True)
class ToolCall:
    """Before a tool runs: may it run?"""

    tool_name: str
    params_json: str = ""  # empty means {}
    tool_call_id: str = ""
    seq: int = 0


@dataclass(slots=True)
class ToolOutcome:
    """After a tool ran. At most one of result_json / error is set; neither means no result."""

    tool_name: str
    params_json: str = ""
    tool_call_id: str = ""
    result_json: str | None = None
    error: str | None = None
    seq: int = 0


@dataclass(slots=True)
class CompactionRetry:
    """The runner compacted its context after an overflow and is retrying."""

    seq: int = 0


@dataclass(slots=True)
class RunEnd:
    """The run is over; its state can be dropped."""

    seq: int = 0


@dataclass(slots=True)
class UserTurn:
    """A person or an orchestrator sent a new instruction: the run starts fresh for detection."""

    prompt_id: str = ""
    seq: int = 0


Event = ToolCall | ToolOutcome | CompactionRetry | RunEnd | UserTurn
