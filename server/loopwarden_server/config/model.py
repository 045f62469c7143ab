"""Frozen config objects: the blocks as written, and the Config that serves resolved settings."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .detection import LoopDetectionSettings, ToolCatalog


@dataclass(frozen=True, slots=True)
class DetectorsBlock:
    """`detectors` as written; None = not set in this block."""

    generic_repeat: bool | None = None
    known_poll_no_progress: bool | None = None
    ping_pong: bool | None = None


@dataclass(frozen=True, slots=True)
class GuardBlock:
    """`postCompactionGuard` as written; None = not set in this block."""

    window_size: int | None = None


@dataclass(frozen=True, slots=True)
class LoopDetectionBlock:
    """One `tools.loopDetection` block as written (global or one agent's), validated, not merged.

    None means "not set here" so a merge can tell an agent's silence from an explicit value.
    The nested blocks are always present (empty when absent) so merging never special-cases them.
    """

    enabled: bool | None = None
    history_size: int | None = None
    warning_threshold: int | None = None
    critical_threshold: int | None = None
    unknown_tool_threshold: int | None = None
    global_circuit_breaker_threshold: int | None = None
    detectors: DetectorsBlock = field(default_factory=DetectorsBlock)
    post_compaction_guard: GuardBlock = field(default_factory=GuardBlock)


@dataclass(frozen=True, slots=True)
class RunWideBreakerBlock:
    """`loopwarden.runWideBreaker` as written."""

    enabled: bool | None = None
    threshold: int | None = None


@dataclass(frozen=True, slots=True)
class ArgumentChurnBlock:
    """`loopwarden.argumentChurn` as written; block_at 0 = explicitly warn-only."""

    enabled: bool | None = None
    warn_at: int | None = None
    block_at: int | None = None


@dataclass(frozen=True, slots=True)
class ErrorRepeatBlock:
    """`loopwarden.errorRepeat` as written."""

    enabled: bool | None = None
    threshold: int | None = None


@dataclass(frozen=True, slots=True)
class ExtensionsBlock:
    """The extension settings of a `loopwarden` block (global, or an agent's `loopwarden`).

    None = not set here; 0 for abort_after_blocks = explicitly off.
    """

    abort_after_blocks: int | None = None
    run_wide_breaker: RunWideBreakerBlock = field(default_factory=RunWideBreakerBlock)
    shadow_mode: bool | None = None
    argument_churn: ArgumentChurnBlock = field(default_factory=ArgumentChurnBlock)
    error_repeat: ErrorRepeatBlock = field(default_factory=ErrorRepeatBlock)
    ping_pong_needs_answers: bool | None = None
    preset: str | None = None


@dataclass(frozen=True, slots=True)
class Config:
    """A loaded config file. Built by the loader, which resolves every agent's settings up front
    so that `settings_for`, called on every event, is a dict lookup.
    """

    global_block: LoopDetectionBlock
    agent_blocks: Mapping[str, LoopDetectionBlock]
    tool_catalog: ToolCatalog
    global_settings: LoopDetectionSettings
    agent_settings: Mapping[str, LoopDetectionSettings]
    global_extensions: ExtensionsBlock = field(default_factory=ExtensionsBlock)
    agent_extensions: Mapping[str, ExtensionsBlock] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Copy into read-only views so a caller keeping the original dicts cannot mutate us.
        object.__setattr__(self, "agent_blocks", MappingProxyType(dict(self.agent_blocks)))
        object.__setattr__(self, "agent_settings", MappingProxyType(dict(self.agent_settings)))
        object.__setattr__(self, "agent_extensions", MappingProxyType(dict(self.agent_extensions)))

    @property
    def agent_ids(self) -> frozenset[str]:
        return frozenset(self.agent_blocks)

    def settings_for(self, agent_id: str) -> LoopDetectionSettings:
        """Effective settings for a run's agent; an unknown or empty agent id gets the global ones."""
        if not agent_id:
            return self.global_settings
        return self.agent_settings.get(agent_id.strip(), self.global_settings)
