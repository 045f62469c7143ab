"""docs/: the reference tables, in the pages that explain them.

docs/configuration.md: settings, presets, error codes, the input limits' flags. docs/detectors.md: detectors, messages.
"""
from __future__ import annotations

from . import limits_out, regions
from .source import Setting, Tables

CONFIGURATION_PATH = "docs/configuration.md"
DETECTORS_PATH = "docs/detectors.md"

_ACTIONS = {"abort": "ABORT", "reject": "REJECT", "internal": "REJECT", "request": "(the stream ends)"}
_VERDICTS = {"warning": "WARN", "critical": "BLOCK"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    return f"`{value}`"


def _accepts(s: Setting) -> str:
    if s.kind == "switch":
        return "`true`, `false` or unset"
    if s.kind in ("bool", "gate"):
        return "`true`, `false`"
    if s.kind == "count":
        return f"{s.minimum}..{s.maximum}"
    if s.kind == "count_or_off":
        zero = ", `0`" if s.minimum == 1 else ""
        return f"{s.minimum}..{s.maximum}, `false`{zero} (off)"
    if s.kind == "number":
        off = ", `false` or `0` (off)" if s.minimum == 0 else ""
        return f"a number in {s.minimum}..{s.maximum}{off}"
    if s.kind == "tool_names":
        return "tool names"
    if s.kind == "choice":
        return ", ".join(f'`"{c}"`' for c in s.choices)
    if s.kind == "tool_rules":
        return ("an object: tool name or glob -> a rule (`class`, `ignoreArgs` or `keepArgs`, `ignoreResult`; "
                "[tool rules](extensions.md#tool-rules))")
    return "a preset's name"


def _default(t: Tables, s: Setting) -> str:
    if s.kind == "tool_names":
        return "`[]`"
    if s.kind == "tool_rules":
        return "`{}`"
    if s.kind == "gate":
        return "`false`"
    if s.kind == "preset":
        return "`reference`"
    if t.gate_of(s) is not None:
        return f"{_value(s.default)} when on"
    if s.kind in ("count_or_off", "number") and not s.default:
        return "off"
    return _value(s.default)


def settings_table(t: Tables) -> list[str]:
    presets = [p for p in t.presets if p.values]
    head = ("| setting | letter | accepts | default | " + " | ".join(f"`{p.name}`" for p in presets)
            + " | per agent | meaning |")
    lines = [head, "|" + "---|" * (6 + len(presets))]
    for s in t.settings:
        after = f" Must stay greater than `{s.after}`." if s.after else ""
        cells = [f"`{s.path}`", s.symbol, _accepts(s), _default(t, s)]
        cells += [_value(p.values[s.path]) if s.path in p.values else "" for p in presets]
        cells += ["no" if s.scope == "global" else "yes", _cell(s.doc + after)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def presets_table(t: Tables) -> list[str]:
    lines = ["| preset | what it is |", "|---|---|"]
    lines += [f"| `{p.name}` | {_cell(p.doc)} |" for p in t.presets]
    return lines


def error_codes_table(t: Tables) -> list[str]:
    lines = ["| code | action | meaning |", "|---|---|---|"]
    lines += [f"| `{e.code}` | {_ACTIONS[e.kind]} | {_cell(e.doc)} |" for e in t.error_codes]
    return lines


def detectors_table(t: Tables) -> list[str]:
    lines = ["| detector | number | what it catches |", "|---|---|---|"]
    lines += [f"| `{d.id}` | {d.number} | {_cell(d.doc)} |" for d in t.detectors if d.number]
    return lines


def messages_table(t: Tables) -> list[str]:
    lines = ["| detector | verdict | message (`{placeholders}` are filled in) |", "|---|---|---|"]
    for m in t.messages:
        detector = m.when or (
            "any, on its N-th block (`abortAfterBlocks`)" if m.detector == "none" else f"`{m.detector}`")
        verdict = m.action or ("ABORT" if m.detector in ("none", "post_compaction_guard") else _VERDICTS[m.level])
        lines.append(f"| {detector} | {verdict} | {_cell(m.text)} |")
    return lines


def update_configuration(t: Tables, text: str) -> str:
    for name, table in (("settings", settings_table), ("presets", presets_table),
                        ("error-codes", error_codes_table), ("limit-flags", limits_out.flags_table)):
        text = regions.replace(text, name, table(t), path=CONFIGURATION_PATH)
    return text


def update_detectors(t: Tables, text: str) -> str:
    for name, table in (("detectors", detectors_table), ("messages", messages_table)):
        text = regions.replace(text, name, table(t), path=DETECTORS_PATH)
    return text
