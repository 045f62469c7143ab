"""A verdict as replay reports see it, whichever side (a daemon, or the engine in-process) gave it."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Observed:
    """Plain strings: `action` is "allow" … "reject", `detector` and `level` are "" when none matched.
    `shadow_action` is what shadow mode would have enforced ("" when not in shadow mode).
    """

    seq: int
    run_id: str
    action: str
    detector: str = ""
    level: str = ""
    count: int = 0
    message: str = ""
    error_code: str = ""
    tool_name: str = ""
    shadow_action: str = ""

    @property
    def enforced_action(self) -> str:
        """The action the settings would enforce: the shadow action when shadow mode withheld it."""
        return self.shadow_action or self.action


# A replay judge: one event dict (loopwarden.eventformat) in, its verdict out.
Judge = Callable[[Mapping[str, Any]], Observed]
