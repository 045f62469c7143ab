"""docs/configuration.md: the reference tables (settings, presets, detectors, error codes, messages)."""
from __future__ import annotations

from . import regions
from .source import Setting, Tables

PATH = "docs/configuration.md"


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
        return "`true` / `false` / unset"
    if s.kind in ("bool", "gate"):
        return "`true` / `false`"
    if s.kind == "count":
        return f"integer {s.minimum}..{s.maximum}"
    if s.kind == "count_or_off":
        zero = " or `0`" if s.minimum == 1 else ""
        return f"integer {s.minimum}..{s.maximum}, or `false`{zero} (off)"
    if s.kind == "tool_names":
        return "array of tool names"
    return "preset name"


def _default(t: Tables, s: Setting) -> str:
    if s.kind == "tool_names":
        return "`[]`"
    if s.kind == "gate":
        return "`false`"
    if s.kind == "preset":
        return "`reference`"
    if t.gate_of(s) is not None:
        return f"{_value(s.default)} when on"
    if s.kind == "count_or_off" and not s.default:
        return "off"
    return _value(s.default)


def settings_table(t: Tables) -> list[str]:
    presets = [p for p in t.presets if p.values]
    head = "| key | accepts | default | " + " | ".join(f"`{p.name}`" for p in presets) + " | what it does |"
    lines = [head, "|" + "---|" * (4 + len(presets))]
    for s in t.settings:
        symbol = f" ({s.symbol})" if s.symbol else ""
        scope = " Global only." if s.scope == "global" else ""
        after = f" Must stay greater than `{s.after}`." if s.after else ""
        cells = [f"`{s.path}`{symbol}", _accepts(s), _default(t, s)]
        cells += [_value(p.values[s.path]) if s.path in p.values else "" for p in presets]
        cells.append(_cell(s.doc + after + scope))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def presets_table(t: Tables) -> list[str]:
    lines = ["| preset | what it is |", "|---|---|"]
    lines += [f"| `{p.name}` | {_cell(p.doc)} |" for p in t.presets]
    return lines


def detectors_table(t: Tables) -> list[str]:
    lines = ["| id | number | what it catches |", "|---|---|---|"]
    lines += [f"| `{d.id}` | {d.number} | {_cell(d.doc)} |" for d in t.detectors]
    return lines


def error_codes_table(t: Tables) -> list[str]:
    lines = ["| code | kind | when |", "|---|---|---|"]
    lines += [f"| `{e.code}` | {e.kind} | {_cell(e.doc)} |" for e in t.error_codes]
    return lines


def messages_table(t: Tables) -> list[str]:
    lines = ["| message | detector | level | text (`{placeholders}` are filled in) |", "|---|---|---|---|"]
    for m in t.messages:
        detector = "any (wraps the block)" if m.detector == "none" else f"`{m.detector}`"
        lines.append(f"| `{m.id}` | {detector} | {m.level} | {_cell(m.text)} |")
    return lines


def update(t: Tables, text: str) -> str:
    for name, table in (("settings", settings_table), ("presets", presets_table), ("detectors", detectors_table),
                        ("error-codes", error_codes_table), ("messages", messages_table)):
        text = regions.replace(text, name, table(t), path=PATH)
    return text
