"""Named presets: `loopwarden: { preset: NAME }` (global or per agent) replaces the defaults.

A preset only supplies defaults: every value written in the file (global or the agent's) still
wins over it, key by key, and the usual W < C < G repair runs after it. `reference` is the
documented behaviour (what no preset means), so an agent can opt out of a global preset.

The presets' values and the reasons for them live in tables/loopwarden.toml (`fast` was chosen
on the vendored real traces: `bench/real_traces.py` prints the measurement); here they become
the same blocks a config file parses into.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopwarden_server.config.model import ExtensionsBlock, LoopDetectionBlock
from loopwarden_server.config.tables import BLOCKS, CHILD_BLOCKS, PRESET_VALUES, SETTINGS


@dataclass(frozen=True, slots=True)
class Preset:
    loop_detection: LoopDetectionBlock
    extensions: ExtensionsBlock


def _block(path: str, values: dict[str, Any]) -> Any:
    """The block at `path` with the preset's values of its keys and of its child blocks."""
    own = {row.attribute: values[row.path] for row in SETTINGS if row.block == path and row.path in values}
    children = {attribute: _block(child, values) for _, attribute, child in CHILD_BLOCKS[path]}
    return BLOCKS[path](**own, **children)


PRESETS: dict[str, Preset] = {
    name: Preset(_block("tools.loopDetection", values), _block("loopwarden", values))
    for name, values in PRESET_VALUES.items()
}
