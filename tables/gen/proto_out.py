"""proto/loopwarden/v1/loopwarden.proto: EffectiveConfig's fields, enum Detector, error_code's list."""
from __future__ import annotations

from . import regions
from .source import Tables

PATH = "proto/loopwarden/v1/loopwarden.proto"

_PROTO = {"switch": "optional bool", "bool": "bool", "count": "uint32", "count_or_off": "uint32", "preset": "string",
          "tool_rules": "repeated ToolRule", "choice": "string", "number": "double"}


def _comment(text: str, indent: str) -> list[str]:
    return regions.comment(text, f"{indent}// ")


def update(t: Tables, text: str) -> str:
    fields: list[str] = []
    for s in t.wire:
        fields += _comment(f"{s.path}: {s.doc}", "  ")
        fields.append(f"  {_PROTO[s.kind]} {s.wire_name} = {s.proto_tag};")
    text = regions.replace(text, "effective-config", fields, path=PATH)
    detectors: list[str] = []
    for d in t.detectors:
        detectors += _comment(d.doc, "  ")
        name = "UNSPECIFIED" if d.number == 0 else d.id.upper()
        detectors.append(f"  DETECTOR_{name} = {d.number};")
    text = regions.replace(text, "detector", detectors, path=PATH)
    codes: list[str] = []
    for kind, label in (("abort", "on ABORT"), ("reject", "on REJECT (nothing was recorded)"),
                        ("internal", "when the daemon failed on this event (it changed nothing)")):
        names = ", ".join(e.code for e in t.error_codes if e.kind == kind)
        codes += _comment(f"{label}: {names}.", "  ")
    return regions.replace(text, "error-codes", codes, path=PATH)
