"""Merge an agent block over the global one, fill defaults, restore W < C < G (spec section 2)."""
from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import TypeVar

from loopwarden_server.config.model import ExtensionsBlock, LoopDetectionBlock
from loopwarden_server.config.presets import PRESETS
from loopwarden_server.config.detection import (
    DEFAULT_COMPACTION_WINDOW_SIZE,
    DEFAULT_CRITICAL_THRESHOLD,
    DEFAULT_GLOBAL_CIRCUIT_BREAKER_THRESHOLD,
    DEFAULT_HISTORY_SIZE,
    DEFAULT_UNKNOWN_TOOL_THRESHOLD,
    DEFAULT_WARNING_THRESHOLD,
    LoopDetectionSettings,
)

BlockT = TypeVar("BlockT")
ValueT = TypeVar("ValueT")


def merge(base: BlockT, override: BlockT) -> BlockT:
    """`override` wins key by key where it sets a value; nested blocks merge one level deeper."""
    changes: dict[str, object] = {}
    for spec in fields(override):  # type: ignore[arg-type]
        mine = getattr(override, spec.name)
        if is_dataclass(mine):
            changes[spec.name] = merge(getattr(base, spec.name), mine)
        elif mine is not None:
            changes[spec.name] = mine
    return replace(base, **changes)  # type: ignore[type-var]


def _or_default(value: ValueT | None, default: ValueT) -> ValueT:
    return default if value is None else value


DEFAULT_RUN_WIDE_THRESHOLD = 40
# The recommended settings of the opt-in detectors (measured on the shared real traces, README).
DEFAULT_ARGUMENT_CHURN_WARN_AT = 8
DEFAULT_ARGUMENT_CHURN_BLOCK_AT = 12
DEFAULT_ERROR_REPEAT_THRESHOLD = 5


def resolve(block: LoopDetectionBlock, extensions: ExtensionsBlock | None = None) -> LoopDetectionSettings:
    """Fill defaults, then restore W < C < G, which a merge can break even when each block was valid.

    Extensions (already merged, global then agent) are off unless set. A preset named by them
    supplies defaults beneath everything written.
    """
    extensions = extensions or ExtensionsBlock()
    preset_name = extensions.preset or "reference"
    preset = PRESETS[preset_name]
    block = merge(preset.loop_detection, block)
    extensions = merge(preset.extensions, extensions)
    run_wide = extensions.run_wide_breaker
    churn = extensions.argument_churn
    error_repeat = extensions.error_repeat
    warning = _or_default(block.warning_threshold, DEFAULT_WARNING_THRESHOLD)
    critical = _or_default(block.critical_threshold, DEFAULT_CRITICAL_THRESHOLD)
    if critical <= warning:
        critical = warning + 1
    breaker = _or_default(block.global_circuit_breaker_threshold, DEFAULT_GLOBAL_CIRCUIT_BREAKER_THRESHOLD)
    if breaker <= critical:
        breaker = critical + 1
    detectors = block.detectors
    churn_warn = _or_default(churn.warn_at, DEFAULT_ARGUMENT_CHURN_WARN_AT) if churn.enabled else 0
    churn_block = _or_default(churn.block_at, DEFAULT_ARGUMENT_CHURN_BLOCK_AT) if churn.enabled else 0
    if churn_block and churn_block <= churn_warn:
        churn_block = churn_warn + 1  # a merge can break the order, as for W < C
    return LoopDetectionSettings(
        enabled=block.enabled,  # three states on purpose: None keeps only the compaction guard on
        history_size=_or_default(block.history_size, DEFAULT_HISTORY_SIZE),
        warning_threshold=warning,
        critical_threshold=critical,
        unknown_tool_threshold=_or_default(block.unknown_tool_threshold, DEFAULT_UNKNOWN_TOOL_THRESHOLD),
        global_circuit_breaker_threshold=breaker,
        generic_repeat=_or_default(detectors.generic_repeat, True),
        known_poll_no_progress=_or_default(detectors.known_poll_no_progress, True),
        ping_pong=_or_default(detectors.ping_pong, True),
        compaction_window_size=_or_default(block.post_compaction_guard.window_size, DEFAULT_COMPACTION_WINDOW_SIZE),
        abort_after_blocks=_or_default(extensions.abort_after_blocks, 0),
        run_wide_breaker_threshold=(
            _or_default(run_wide.threshold, DEFAULT_RUN_WIDE_THRESHOLD) if run_wide.enabled else 0),
        shadow=_or_default(extensions.shadow_mode, False),
        argument_churn_warn_at=churn_warn,
        argument_churn_block_at=churn_block,
        error_repeat_threshold=(
            _or_default(error_repeat.threshold, DEFAULT_ERROR_REPEAT_THRESHOLD) if error_repeat.enabled else 0),
        ping_pong_needs_answers=_or_default(extensions.ping_pong_needs_answers, False),
        preset="" if preset_name == "reference" else preset_name,
    )
