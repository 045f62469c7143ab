"""`loopwarden.toolRules`: what the config says about a tool, parsed once into frozen objects.

    loopwarden: {
      toolRules: {
        fetch: {ignoreArgs: ["$.nonce"]},                       // a nonce is not a new call
        send_email: {class: "mutating"},                        // duplicateSideEffect judges it
        "mcp__github__list_*": {class: "readOnly", ignoreResult: ["$.meta.requestId"]},
      },
    }

A key is a tool name or an fnmatch-style glob (`*` only), normalised as every tool name is
(NFKC, case, aliases: `Bash` is `exec`). A rule is an object with `class` (`readOnly`, `mutating`
or `poll`), `ignoreArgs` or `keepArgs` (never both) and `ignoreResult`: JSON paths of the subset
the core parses (`$.a.b`, `$.a[*].b`, `$['a']`). Every path is parsed here, at load, with the
core's own parser (`loopwarden_core.parse_json_path`), so the core receives compiled steps and a
bad path is refused naming its field. Per agent, rules merge over the global ones by key: an
agent's rule for a key replaces the global rule for that key, other global rules stay.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loopwarden_core import ToolRule as CoreToolRule
from loopwarden_core import normalize_tool_name, parse_json_path

CLASSES = ("readOnly", "mutating", "poll")
_PATH_FIELDS = ("ignoreArgs", "keepArgs", "ignoreResult")
_KEYS = ("class", *_PATH_FIELDS)


class RuleError(ValueError):
    """A refused rule: `path` is the dotted location, `problem` what is wrong there."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True, slots=True)
class JsonPath:
    """A path as written and its compiled steps (a member name, or None for `[*]`)."""

    text: str
    steps: tuple[str | None, ...]


@dataclass(frozen=True, slots=True)
class ToolRule:
    tool: str  # the normalised name or glob (the merge key)
    tool_class: str = ""  # "" = unset
    ignore_args: tuple[JsonPath, ...] = ()
    keep_args: tuple[JsonPath, ...] = ()
    ignore_result: tuple[JsonPath, ...] = ()

    def compiled(self) -> CoreToolRule:
        """The rule as the core takes it (`tool_rules::from_py`): paths as their steps."""
        def steps(paths: tuple[JsonPath, ...]) -> list[list[str | None]]:
            return [list(p.steps) for p in paths]

        return CoreToolRule(self.tool, self.tool_class, ignore_args=steps(self.ignore_args),
                            keep_args=steps(self.keep_args), ignore_result=steps(self.ignore_result))


@dataclass(frozen=True, slots=True)
class ToolRules:
    """One block's (or one agent's merged) rules, in the order written."""

    rules: tuple[ToolRule, ...] = ()

    def over(self, base: ToolRules) -> ToolRules:
        """These rules merged over `base` by key: a key here replaces base's rule for it."""
        mine = {rule.tool: rule for rule in self.rules}
        kept = tuple(rule for rule in base.rules if rule.tool not in mine)
        return ToolRules(kept + self.rules)

    def compiled(self) -> list[CoreToolRule]:
        return [rule.compiled() for rule in self.rules]

    def __bool__(self) -> bool:
        return bool(self.rules)


def _render(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _paths(value: Any, path: str) -> tuple[JsonPath, ...]:
    if not isinstance(value, list):
        raise RuleError(path, f"must be an array of JSON paths, got {_render(value)}")
    parsed = []
    for index, entry in enumerate(value):
        where = f"{path}[{index}]"
        if not isinstance(entry, str):
            raise RuleError(where, f"must be a JSON path string, got {_render(entry)}")
        try:
            steps = parse_json_path(entry)
        except ValueError as error:
            raise RuleError(where, f"not a supported JSON path {_render(entry)}: {error}") from None
        parsed.append(JsonPath(entry, tuple(steps)))
    return tuple(parsed)


def _rule(tool: str, value: Any, path: str) -> ToolRule:
    if not isinstance(value, dict):
        raise RuleError(path, f"must be an object with {', '.join(_KEYS)}, got {_render(value)}")
    for key in value:
        if key not in _KEYS:
            raise RuleError(f"{path}.{key}", f"unknown key (allowed: {', '.join(sorted(_KEYS))})")
    if value.get("ignoreArgs") is not None and value.get("keepArgs") is not None:
        raise RuleError(f"{path}.keepArgs", "ignoreArgs and keepArgs are mutually exclusive: use one of them")
    tool_class = value.get("class")
    if tool_class is not None and tool_class not in CLASSES:
        raise RuleError(f"{path}.class",
                        f"must be one of {', '.join(_render(c) for c in CLASSES)}, got {_render(tool_class)}")
    found = {key: _paths(value[key], f"{path}.{key}") for key in _PATH_FIELDS if value.get(key) is not None}
    return ToolRule(tool, tool_class or "", found.get("ignoreArgs", ()), found.get("keepArgs", ()),
                    found.get("ignoreResult", ()))


def parse_tool_rules(value: Any, path: str) -> ToolRules:
    """A `toolRules` object as written -> frozen rules; RuleError naming the field otherwise."""
    if not isinstance(value, Mapping):
        raise RuleError(path, f"must be an object of tool name (or glob) -> rule, got {_render(value)}")
    rules: dict[str, ToolRule] = {}
    written: dict[str, str] = {}
    for key, rule in value.items():
        where = f"{path}[{_render(key)}]" if not key.replace("_", "").isalnum() else f"{path}.{key}"
        if not key.strip():
            raise RuleError(where, "a tool name (or glob) must not be blank")
        tool = normalize_tool_name(key)
        if tool in rules:
            raise RuleError(where, f"the same tool as {_render(written[tool])} once normalised ({_render(tool)})")
        if rule is None:
            continue
        rules[tool] = _rule(tool, rule, where)
        written[tool] = key
    return ToolRules(tuple(rules.values()))
