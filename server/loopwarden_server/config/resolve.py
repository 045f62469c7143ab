"""Merge an agent block over the global one, fill defaults, restore W < C < G (spec section 2).

Generic over the table (config/tables.py, from tables/loopwarden.toml): each resolved setting is
its written value, else its default; a setting behind its block's gate (`enabled`) is 0 (off)
unless the gate is true; a setting kept greater than a sibling (`after`) is raised past it when a
merge broke the order.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any, TypeVar

from loopwarden_server.config.detection import LoopDetectionSettings
from loopwarden_server.config.model import ExtensionsBlock, LoopDetectionBlock
from loopwarden_server.config.presets import PRESETS
from loopwarden_server.config.tables import CHILD_BLOCKS, SETTINGS, SettingRow
from loopwarden_server.config.tool_rules import ToolRules

BlockT = TypeVar("BlockT")

_RESOLVED = tuple(row for row in SETTINGS if row.field and row.kind != "preset")
_ORDERED = tuple(row for row in _RESOLVED if row.after)
_SIBLING_FIELD = {(row.block, row.key): row.field for row in _RESOLVED}
ROOTS = ("tools.loopDetection", "loopwarden")


def _trails() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Block path -> (its root block's path, the attributes from the root down to it)."""
    trails: dict[str, tuple[str, tuple[str, ...]]] = {}
    pending: list[tuple[str, str, tuple[str, ...]]] = [(root, root, ()) for root in ROOTS]
    while pending:
        root, path, trail = pending.pop()
        trails[path] = (root, trail)
        pending += [(root, child, (*trail, attribute)) for _, attribute, child in CHILD_BLOCKS[path]]
    return trails


_TRAILS = _trails()


def merge(base: BlockT, override: BlockT) -> BlockT:
    """`override` wins key by key where it sets a value; nested blocks merge one level deeper."""
    changes: dict[str, object] = {}
    for spec in fields(override):  # type: ignore[arg-type]
        mine = getattr(override, spec.name)
        if isinstance(mine, ToolRules):  # merged by rule key, not replaced whole
            below = getattr(base, spec.name)
            changes[spec.name] = mine if below is None else mine.over(below)
        elif is_dataclass(mine):
            changes[spec.name] = merge(getattr(base, spec.name), mine)
        elif mine is not None:
            changes[spec.name] = mine
    return replace(base, **changes)  # type: ignore[type-var]


def _block_at(roots: dict[str, Any], path: str) -> Any:
    """The (merged) block object at a dotted block path, from its root block."""
    root, trail = _TRAILS[path]
    block = roots[root]
    for attribute in trail:
        block = getattr(block, attribute)
    return block


def _value(row: SettingRow, block: Any) -> Any:
    if row.gate and not getattr(block, row.gate):
        return 0  # an opt-in behaviour whose gate is not on
    written = getattr(block, row.attribute)
    return row.default if written is None else written


def resolve(block: LoopDetectionBlock, extensions: ExtensionsBlock | None = None) -> LoopDetectionSettings:
    """Fill defaults, then restore the table's orders (W < C < G, warnAt < blockAt), which a merge
    can break even when each block was valid.

    Extensions (already merged, global then agent) are off unless set. A preset named by them
    supplies defaults beneath everything written.
    """
    extensions = extensions or ExtensionsBlock()
    preset_name = extensions.preset or "reference"
    preset = PRESETS[preset_name]
    roots = {"tools.loopDetection": merge(preset.loop_detection, block),
             "loopwarden": merge(preset.extensions, extensions)}
    values = {row.field: _value(row, _block_at(roots, row.block)) for row in _RESOLVED}
    for row in _ORDERED:
        floor = values[_SIBLING_FIELD[(row.block, row.after)]]
        if values[row.field] and values[row.field] <= floor:
            values[row.field] = floor + 1
    return LoopDetectionSettings(**values, preset="" if preset_name == "reference" else preset_name)
