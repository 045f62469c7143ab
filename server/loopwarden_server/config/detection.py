"""The settings the engine consumes, already merged, defaulted and repaired by the config loader.

Their fields, defaults and docs are generated (config/tables.py, from tables/loopwarden.toml);
this module adds what the fields mean together.
"""
from __future__ import annotations

from .tables import ResolvedSettings, ToolCatalog

__all__ = ["DEFAULT_TOOL_CATALOG", "LoopDetectionSettings", "ToolCatalog"]


class LoopDetectionSettings(ResolvedSettings):
    """Effective `tools.loopDetection` plus `loopwarden` for one agent (spec section 2, resolved).

    `enabled` keeps its three states: None (unset: only the post-compaction guard runs),
    True (every guard), False (nothing runs and nothing is recorded). Opt-in settings are 0 (or
    False) when off, so by default every verdict is exactly the documented one.
    """

    __slots__ = ()

    @property
    def ranked_after_on(self) -> bool:
        """Any opt-in detector that ranks after the reference table is on."""
        return bool(self.argument_churn_warn_at or self.argument_churn_block_at or self.error_repeat_threshold
                    or self.duplicate_side_effect
                    or self.cycle_warn_after or self.cycle_block_after or self.failure_cascade_threshold)

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


DEFAULT_TOOL_CATALOG = ToolCatalog()
