"""helm/loopwarden: the `config` schema in values.schema.json and the `config` block of values.yaml,
and the daemon's input limits ([[limit]] rows) as `daemon.limits`: their values, their schema, the
map from each key to its flag in templates/_helpers.tpl, and their rows in the chart README."""
from __future__ import annotations

import json

from . import regions
from .source import Limit, Setting, Tables, camel

SCHEMA_PATH = "helm/loopwarden/values.schema.json"
VALUES_PATH = "helm/loopwarden/values.yaml"
HELPERS_PATH = "helm/loopwarden/templates/_helpers.tpl"
README_PATH = "helm/loopwarden/README.md"

_NULLABLE_OBJECT = ["object", "null"]

# One `toolRules` entry (the loader checks the JSON path syntax itself: docs/extensions.md).
_JSON_PATHS = {"type": ["array", "null"], "items": {"type": "string", "pattern": "^\\$."}}
_TOOL_RULE = {
    "type": "object", "additionalProperties": False,
    "properties": {"class": {"type": ["string", "null"], "enum": ["readOnly", "mutating", "poll", None]},
                   "ignoreArgs": _JSON_PATHS, "keepArgs": _JSON_PATHS, "ignoreResult": _JSON_PATHS},
    "not": {"required": ["ignoreArgs", "keepArgs"]},
}


def _describe(s: Setting) -> str:
    head = f"{s.symbol}: " if s.symbol else ""
    return head + s.doc


def _setting_schema(t: Tables, s: Setting) -> dict:
    if s.kind in ("switch", "bool", "gate"):
        schema: dict = {"type": ["boolean", "null"]}
    elif s.kind == "count":
        schema = {"type": ["integer", "null"], "minimum": s.minimum, "maximum": s.maximum}
    elif s.kind == "count_or_off":
        # false (or 0 where the smallest count is 1) switches an inherited value off; true means nothing.
        schema = {"type": ["integer", "boolean", "null"], "minimum": 0 if s.minimum == 1 else s.minimum,
                  "maximum": s.maximum, "not": {"const": True}}
    elif s.kind == "number":
        # a float in [min, max]; where min is 0, false (like 0) switches an inherited value off.
        schema = {"type": ["number", "boolean", "null"] if s.minimum == 0 else ["number", "null"],
                  "minimum": s.minimum, "maximum": s.maximum}
        if s.minimum == 0:
            schema["not"] = {"const": True}
    elif s.kind == "tool_names":
        schema = {"type": ["array", "null"], "items": {"type": "string", "minLength": 1, "pattern": "\\S"}}
    elif s.kind == "choice":
        schema = {"type": ["string", "null"], "enum": [*s.choices, None]}
    elif s.kind == "tool_rules":
        schema = {"type": _NULLABLE_OBJECT, "additionalProperties": _TOOL_RULE}
    else:  # preset
        schema = {"type": ["string", "null"], "enum": [p.name for p in t.presets] + [None]}
    schema["description"] = _describe(s)
    return schema


def _block_schema(t: Tables, path: str, *, per_agent: bool = False) -> dict:
    properties: dict = {}
    for s in t.settings_of(path):
        if per_agent and s.scope == "global":
            continue
        properties[s.key] = _setting_schema(t, s)
    for child in t.children(path):
        properties[child.key] = _block_schema(t, child.path, per_agent=per_agent)
    return {"type": _NULLABLE_OBJECT, "additionalProperties": False, "properties": properties,
            "description": t.block(path).doc}


def _agent_schema(t: Tables, *, listed: bool) -> dict:
    properties: dict = {}
    if listed:
        properties["id"] = {"type": "string", "pattern": "\\S", "description": "Agent id (unique)."}
    properties["tools"] = {"type": _NULLABLE_OBJECT, "additionalProperties": True,
                           "properties": {"loopDetection": _block_schema(t, "tools.loopDetection")}}
    agent_block = _block_schema(t, "loopwarden", per_agent=True)
    agent_block["description"] = "This agent's loopwarden settings, merged key by key over the global block."
    properties["loopwarden"] = agent_block
    schema: dict = {"type": "object", "additionalProperties": True, "properties": properties}
    if listed:
        schema["required"] = ["id"]
    return schema


def config_schema(t: Tables) -> dict:
    return {
        "type": "object",
        "description": "The daemon's config file; unknown top-level keys are ignored by the daemon, as in an "
                       "agent framework's file.",
        "additionalProperties": True,
        "properties": {
            "tools": {"type": _NULLABLE_OBJECT, "additionalProperties": True,
                      "properties": {"loopDetection": _block_schema(t, "tools.loopDetection")}},
            "agents": {"type": _NULLABLE_OBJECT, "additionalProperties": True, "properties": {
                "list": {"type": ["array", "null"], "items": _agent_schema(t, listed=True),
                         "description": "Per-agent overrides as a list, matched by the run's agent id."},
                "entries": {"type": _NULLABLE_OBJECT, "additionalProperties": _agent_schema(t, listed=False),
                            "description": "Per-agent overrides as a map keyed by agent id."},
            }},
            "loopwarden": _block_schema(t, "loopwarden"),
        },
    }


def update_schema(t: Tables, text: str) -> str:
    document = json.loads(text)
    document["properties"]["config"] = config_schema(t)
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _yaml(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _comment(text: str, indent: str) -> list[str]:
    return regions.comment(text, f"{indent}# ", first=f"{indent}# -- ")


def _note(t: Tables, s: Setting) -> str:
    """Bounds and the daemon's default, in the comment: the value itself stays null (unset)."""
    parts = []
    if s.kind == "count":
        parts.append(f"{s.minimum}..{s.maximum}")
    elif s.kind == "count_or_off":
        parts.append(f"{s.minimum}..{s.maximum}, or false")
    elif s.kind == "number":
        parts.append(f"a number in {s.minimum}..{s.maximum}" + (", or false" if s.minimum == 0 else ""))
    if s.kind in ("count", "count_or_off", "bool", "number"):
        # 0 is "off" except where it is an ordinary value (a count from 0, e.g. "an equal share").
        default = s.default if s.default or s.kind == "bool" or (s.kind == "count" and s.minimum == 0) else "off"
        when = " when enabled" if t.gate_of(s) is not None else ""
        parts.append(f"default {_yaml(default)}{when}")
    return f" ({'; '.join(parts)})" if parts else ""


def _values_block(t: Tables, path: str, indent: str, chart_values: dict[str, object]) -> list[str]:
    """The block's keys, unset (null) unless the chart sets them: a value written here would beat
    a preset the user names, so the daemon's defaults stay in the comments."""
    lines: list[str] = []
    for s in t.settings_of(path):
        chart = " The chart sets it: detection is what it is deployed for." if s.path in chart_values else ""
        lines += _comment(_describe(s) + _note(t, s) + chart, indent)
        if s.kind == "tool_names":
            lines.append(f"{indent}{s.key}: []")
        elif s.kind == "tool_rules":
            lines.append(f"{indent}{s.key}: {{}}")
        else:
            lines.append(f"{indent}{s.key}: {_yaml(chart_values.get(s.path))}")
    for child in t.children(path):
        lines += _comment(child.doc, indent)
        lines.append(f"{indent}{child.key}:")
        lines += _values_block(t, child.path, indent + "  ", chart_values)
    return lines


# The chart turns detection on: that is what it is deployed for (the daemon's own default, unset,
# runs only the post-compaction guard).
CHART_VALUES: dict[str, object] = {"tools.loopDetection.enabled": True}


def update_values(t: Tables, text: str) -> str:
    loop_detection = ["    loopDetection:"] + _values_block(t, "tools.loopDetection", "      ", CHART_VALUES)
    text = regions.replace(text, "config-loop-detection", loop_detection, path=VALUES_PATH)
    loopwarden = ["  loopwarden:"] + _values_block(t, "loopwarden", "    ", CHART_VALUES)
    return regions.replace(text, "config-loopwarden", loopwarden, path=VALUES_PATH)



def update_readme(t: Tables, text: str) -> str:
    """The values table of the `config` keys the daemon reads (the chart README's Values section)."""
    rows = ["| value | default | meaning |", "|---|---|---|"]
    for s in t.settings:
        value = {"tool_names": "[]", "tool_rules": "{}"}.get(s.kind) or _yaml(CHART_VALUES.get(s.path))
        meaning = (_describe(s) + _note(t, s)).replace("|", "\\|").replace("<", "&lt;")
        rows.append(f"| `config.{s.path}` | `{value}` | {meaning} |")
    return regions.replace(text, "chart-config", rows, path=README_PATH)


# ---------------------------------------------------------------- daemon.limits ([[limit]] rows)
# One key per limit, camelCase of its name; 0 (the default) leaves its flag out, so the daemon's own
# default applies and the chart never carries a second copy of it.

_UNIT_WORDS = {"bytes": ", in bytes", "chars": ", in characters"}  # counts and seconds say so already


def limit_key(limit: Limit) -> str:
    return camel(limit.name)


def _limit_meaning(limit: Limit) -> str:
    head = limit.help[0].upper() + limit.help[1:]
    return f"{head}{_UNIT_WORDS.get(limit.unit, '')} (`{limit.flag}`; daemon default {limit.shown}): {limit.doc}."


def update_schema_limits(t: Tables, text: str) -> str:
    document = json.loads(text)
    properties = {limit_key(limit): {"type": "number" if limit.is_float else "integer", "minimum": 0,
                                     "description": _limit_meaning(limit) + " 0: the daemon default."}
                  for limit in t.limits}
    document["properties"]["daemon"]["properties"]["limits"] = {
        "type": "object", "additionalProperties": False,
        "description": "The daemon's input limits, one key per flag; 0 keeps the daemon default.",
        "properties": properties, "required": list(properties)}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def update_values_limits(t: Tables, text: str) -> str:
    lines: list[str] = []
    for limit in t.limits:
        lines += _comment(_limit_meaning(limit), "    ")
        lines.append(f"    {limit_key(limit)}: 0")
    return regions.replace(text, "daemon-limits", lines, path=VALUES_PATH)


def update_helpers_limits(t: Tables, text: str) -> str:
    """`loopwarden.limitFlags`: one "key flag" line per limit, in table order (deployment.yaml
    renders the args from it, leaving out a limit of 0)."""
    lines = ['{{/* daemon.limits keys and the `loopwarden serve` flags they set, one "key flag" a line, in',
             "the order the args are rendered (a limit of 0 leaves its flag out: the daemon default). */}}",
             '{{- define "loopwarden.limitFlags" -}}']
    lines += [f"{limit_key(limit)} {limit.flag}" for limit in t.limits]
    lines.append("{{- end }}")
    return regions.replace(text, "limit-flags", lines, path=HELPERS_PATH)


def update_readme_limits(t: Tables, text: str) -> str:
    rows = ["| value | default | meaning |", "|---|---|---|"]
    for limit in t.limits:
        meaning = _limit_meaning(limit).replace("|", "\\|").replace("<", "&lt;")
        rows.append(f"| `daemon.limits.{limit_key(limit)}` | `0` | {meaning} |")
    return regions.replace(text, "chart-limits", rows, path=README_PATH)
