"""Frozen config objects: the blocks as written (generated), and the Config that serves resolved settings."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .detection import LoopDetectionSettings, ToolCatalog
# The blocks as written (None = not set there) are generated from tables/loopwarden.toml.
from .tables import (  # noqa: F401  (re-exported: the blocks are part of the config's model)
    ArgumentChurnBlock, DaemonLimits, DetectorsBlock, ErrorRepeatBlock, ExtensionsBlock, GuardBlock,
    LoopDetectionBlock, RunWideBreakerBlock,
)


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
    # Global-only limits the daemon applies (per-tenant shares), not the engine.
    daemon_limits: DaemonLimits = field(default_factory=DaemonLimits)

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
