"""JSON5 text -> validated blocks -> Config with every agent's settings resolved (spec section 2).

Validation names each problem as `<dotted.path>: <problem>`, with the bad value rendered as JSON,
and goes on past it: a file with several mistakes is refused once, with every one of them
(`ConfigErrors`), each with the line of the file it is on. A block or entry that is itself unusable
(not an object) is skipped, so what is inside it is not reported twice. Only the top-level keys we
own are read: users paste their whole agent-framework config, so unrelated keys anywhere outside
our blocks are ignored, while inside `tools.loopDetection` and `loopwarden` every key must be known
(a typo there would otherwise silently change behaviour).

Near misses. On the levels that lead to our blocks (the top level, `tools`, `agents`, an agent
entry and its `tools`) other keys are ignored, but a key that is *almost* ours is refused with a
suggestion: the same key in another case, or within two edits of one of our keys that has six or
more letters (`loopDetecton`, `entires`, `loopWarden`). Ignoring it would silently switch detection
off. Keys the reference's own config uses at that level are never near misses, so a whole
OpenClaw config (top-level `hooks` is two edits from `tools`) still loads.

Per-agent overrides come in two spellings that mean the same: `agents.list[]` (objects with an
`id`) and `agents.entries.<id>` (a map keyed by id, the newest documentation's path). An id in
both is refused, naming both paths.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import fields
from importlib import resources
from typing import Any, cast

import json5

from loopwarden_server.config.positions import key_lines

from loopwarden_server.config.model import Config, ExtensionsBlock, LoopDetectionBlock
from loopwarden_server.config.presets import PRESETS
from loopwarden_server.config.resolve import merge, resolve
from loopwarden_server.config.detection import ToolCatalog
from loopwarden_server.config.tool_rules import RuleError, ToolRules, parse_tool_rules
# Every key, its kind, bounds and order come from the one table (tables/loopwarden.toml).
from loopwarden_server.config.tables import (  # noqa: F401  (the ceilings are re-exported)
    BLOCKS, CHILD_BLOCKS, MAX_HISTORY_SIZE, DaemonLimits, MAX_THRESHOLD, MAX_WINDOW_SIZE, SETTINGS, SettingRow,
)
from loopwarden_core import normalize_tool_name

ROOT_PATH = "(root)"
_RENDER_LIMIT = 80


class ConfigError(ValueError):
    """A refused config: `path` is the dotted location, `problem` what is wrong there, `line` the
    line of the file it is on (None: not known, e.g. the whole file)."""

    def __init__(self, path: str, problem: str, line: int | None = None) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
        self.line = line


class ConfigErrors(ConfigError):
    """Several problems in one config, in file order; `path`, `problem` and `line` are the first's."""

    def __init__(self, errors: list[ConfigError]) -> None:
        first = errors[0]
        super().__init__(first.path, first.problem, first.line)
        # One line, as the daemon's start error and reload log line are: "N problems: line L: PATH: ...; ...".
        self.args = (f"{len(errors)} problems: " + "; ".join(
            str(error) if error.line is None else f"line {error.line}: {error}" for error in errors),)
        self.errors = errors

    def __str__(self) -> str:
        return self.args[0]


def problems(error: ConfigError) -> list[ConfigError]:
    """Every problem a refusal carries (one, or a ConfigErrors' list)."""
    return list(error.errors) if isinstance(error, ConfigErrors) else [error]


# The problems found so far while one config is built; None: raise at the first (a lone parser).
_found: ContextVar[list[ConfigError] | None] = ContextVar("config_problems", default=None)


def _report(error: ConfigError) -> None:
    """Note a problem and go on, or raise it when nobody collects."""
    found = _found.get()
    if found is None:
        raise error
    found.append(error)


# ---------------------------------------------------------------------------------------------
# Public entry points


def load_config_text(text: str, source: str = "<string>") -> Config:
    """Parse and resolve a config; `source` names the text in JSON5 syntax errors. Raises one
    ConfigError, or ConfigErrors when there are several, each with its line in `text`."""
    root = _parse_json5(text, source)
    found: list[ConfigError] = []
    token = _found.set(found)
    try:
        config = _build_config(root)
    except ConfigError as error:  # a problem nothing could go on after
        found.append(error)
    finally:
        _found.reset(token)
    if not found:
        return cast(Config, config)  # None only when a problem was reported, and none was
    lines = key_lines(text)
    for problem in found:
        problem.line = _line_of(problem.path, lines)
    found.sort(key=lambda problem: problem.line or 0)  # stable: same line keeps the order found
    raise found[0] if len(found) == 1 else ConfigErrors(found)


def _line_of(path: str, lines: Mapping[str, int]) -> int | None:
    """The line of `path`, else of its nearest ancestor written in the file."""
    while path:
        if path in lines:
            return lines[path]
        cut = max(path.rfind("."), path.rfind("["))
        if cut <= 0:
            return None
        path = path[:cut]
    return None


def load_config_file(path: str | os.PathLike[str]) -> Config:
    """Read a config file (the only I/O here). OSError propagates: an unreadable file is not a
    config problem, and callers (the CLI, the reloader) treat it differently.
    """
    source = os.fspath(path)
    with open(source, "rb") as handle:
        raw = handle.read()
    return load_config_bytes(raw, source)


def load_config_bytes(raw: bytes, source: str) -> Config:
    """A config file's bytes: what `check-config`, the daemon's start and every reload all parse."""
    try:
        # utf-8-sig: editors on Windows like to add a BOM, which is not a reason to refuse a file.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(source, f"invalid JSON5: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return load_config_text(text, source)


def default_config_text() -> str:
    """The embedded, commented default config (also a starting point for users)."""
    return resources.files(__package__).joinpath("default.json5").read_text(encoding="utf-8")


def load_default_config() -> Config:
    return load_config_text(default_config_text(), "<default config>")


# ---------------------------------------------------------------------------------------------
# Parsing


def _parse_json5(text: str, source: str) -> Any:
    try:
        return json5.loads(text, allow_duplicate_keys=False)
    except ValueError as exc:
        raise ConfigError(source, f"invalid JSON5: {_parser_message(exc)}") from None
    except RecursionError:
        raise ConfigError(source, "invalid JSON5: nested too deeply") from None


def _parser_message(exc: ValueError) -> str:
    # The parser names every input "<string>"; replace that with the line it already carries.
    return re.sub(r"^<string>:(\d+) ", r"line \1: ", str(exc))


def _render(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _RENDER_LIMIT else text[: _RENDER_LIMIT - 3] + "..."


def _child(path: str, key: str) -> str:
    return key if path == ROOT_PATH else f"{path}.{key}"


def _require_object(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(path, f"must be an object, got {_render(value)}")
    return value


def _optional_object(parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    """`parent[key]` as an object; absent or null reads as empty."""
    value = parent.get(key)
    return {} if value is None else _require_object(value, _child(path, key))


# ---------------------------------------------------------------------------------------------
# Value parsers: (value, path) -> typed value, or ConfigError. Never called with None.

Parser = Callable[[Any, str], Any]


def _boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(path, f"must be true or false, got {_render(value)}")
    return value


def _positive_int(maximum: int) -> Parser:
    def parse(value: Any, path: str) -> int:
        # JSON5 has one number type, so `10.0` is an honest way to write 10; bool is an int
        # subclass in Python but never a count in a config file.
        integral = isinstance(value, int) or (
            isinstance(value, float) and math.isfinite(value) and value.is_integer()
        )
        if isinstance(value, bool) or not integral or value < 1:
            raise ConfigError(path, f"must be a positive integer, got {_render(value)}")
        if value > maximum:
            raise ConfigError(path, f"must be at most {maximum}, got {_render(value)}")
        return int(value)

    return parse


def _at_least(minimum: int, maximum: int) -> Parser:
    """An integer count from `minimum` up (a streak of 1 is no pattern yet)."""
    positive = _positive_int(maximum)

    def parse(value: Any, path: str) -> int:
        count = positive(value, path)
        if count < minimum:
            raise ConfigError(path, f"must be at least {minimum}, got {_render(value)}")
        return count

    return parse


def _optional_count(minimum: int) -> Parser:
    """A count, or false (0) to switch an inherited one off."""
    count = _at_least(minimum, MAX_THRESHOLD)

    def parse(value: Any, path: str) -> int:
        if value is False:
            return 0
        try:
            return count(value, path)
        except ConfigError as error:
            raise ConfigError(path, f"{error.problem.replace('must be', 'must be false or', 1)}") from None

    return parse


def _preset(value: Any, path: str) -> str:
    if not isinstance(value, str) or value not in PRESETS:
        raise ConfigError(path, f"must be one of {', '.join(_render(name) for name in PRESETS)}, got {_render(value)}")
    return value


def _choice(choices: tuple[str, ...]) -> Parser:
    def parse(value: Any, path: str) -> str:
        if not isinstance(value, str) or value not in choices:
            raise ConfigError(path, f"must be one of {', '.join(_render(c) for c in choices)}, got {_render(value)}")
        return value
    return parse


def _limit_or_off(maximum: int) -> Parser:
    """A positive count up to `maximum` (budgets go past MAX_THRESHOLD), or false (0): off."""
    positive = _positive_int(maximum)

    def parse(value: Any, path: str) -> int:
        if value is False or (isinstance(value, int) and not isinstance(value, bool) and value == 0):
            return 0
        try:
            return positive(value, path)
        except ConfigError as error:
            if "at most" in error.problem:
                raise
            raise ConfigError(path, f"must be a positive integer or false, got {_render(value)}") from None

    return parse


def _number(minimum: float, maximum: float) -> Parser:
    """A number in [minimum, maximum]; where the minimum is 0, false means 0 (off)."""
    def parse(value: Any, path: str) -> float:
        if value is False and minimum == 0:
            return 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            off = " or false" if minimum == 0 else ""
            raise ConfigError(path, f"must be a number{off}, got {_render(value)}")
        if not minimum <= value <= maximum:
            raise ConfigError(path, f"must be between {minimum:g} and {maximum:g}, got {_render(value)}")
        return float(value)

    return parse


def _tool_names(value: Any, path: str) -> frozenset[str]:
    if not isinstance(value, list):
        raise ConfigError(path, f"must be an array of tool names, got {_render(value)}")
    names = set()
    for index, entry in enumerate(value):
        if not isinstance(entry, str) or not entry.strip():
            raise ConfigError(f"{path}[{index}]", f"must be a non-empty string, got {_render(entry)}")
        names.add(normalize_tool_name(entry))
    return frozenset(names)


def _tool_rules(value: Any, path: str) -> ToolRules:
    try:
        return parse_tool_rules(value, path)
    except RuleError as error:
        raise ConfigError(error.path, error.problem) from None


# A strict object schema: JSON key -> (attribute it fills, parser of its value).
Schema = Mapping[str, tuple[str, Parser]]


def _parse_strict(value: Any, path: str, schema: Schema) -> dict[str, Any]:
    """Parse an object whose keys must all be in `schema`; null values count as unset."""
    parsed: dict[str, Any] = {}
    for key, item in _require_object(value, path).items():
        if key not in schema:
            allowed = ", ".join(sorted(schema))
            meant = closest_key(key, frozenset(schema))
            hint = f"; did you mean {_render(meant)}?" if meant else ""
            _report(ConfigError(_child(path, key), f"unknown key{hint} (allowed: {allowed})"))
            continue
        if item is not None:
            attribute, parse = schema[key]
            try:
                parsed[attribute] = parse(item, _child(path, key))
            except ConfigError as error:
                _report(error)
    return parsed


def _parser(row: SettingRow) -> Parser:
    """The value parser of one key, by its kind in the table."""
    # Ints for a count, ints or floats for a number; the table's checks (tables/gen/source.py)
    # hold every count and number to a min and a max.
    minimum: Any = row.minimum
    maximum: Any = row.maximum
    if row.kind in ("switch", "bool", "gate"):
        return _boolean
    if row.kind == "count":
        return _positive_int(maximum) if minimum == 1 else _at_least(minimum, maximum)
    if row.kind == "count_or_off":
        return _limit_or_off(maximum) if minimum == 1 else _optional_count(minimum)
    if row.kind == "number":
        return _number(minimum, maximum)
    if row.kind == "tool_names":
        return _tool_names
    if row.kind == "preset":
        return _preset
    if row.kind == "tool_rules":
        return _tool_rules
    if row.kind == "choice":
        return _choice(row.choices)
    raise AssertionError(f"{row.path}: kind {row.kind!r} has no parser")


def _schema(path: str, *, per_agent: bool) -> Schema:
    """The strict schema of the block at `path`: its keys, then its child blocks."""
    schema: dict[str, tuple[str, Parser]] = {
        row.key: (row.attribute, _parser(row)) for row in SETTINGS
        if row.block == path and not (per_agent and row.scope == "global")
    }
    for key, attribute, child in CHILD_BLOCKS[path]:
        schema[key] = (attribute, _block_parser(child, per_agent=per_agent))
    return schema


def _block_parser(path: str, *, per_agent: bool) -> Callable[[Any, str], Any]:
    schema = _schema(path, per_agent=per_agent)
    ordered = [row for row in SETTINGS if row.block == path and row.after]

    def parse(value: Any, where: str) -> Any:
        block = BLOCKS[path](**_parse_strict(value, where, schema))
        _check_order(block, where, ordered)
        return block

    return parse


def _check_order(block: Any, path: str, ordered: list[SettingRow]) -> None:
    """W < C < G (and warnAt < blockAt) inside one block, checked only between values it sets."""
    for row in ordered:
        value = getattr(block, row.attribute)
        floor = getattr(block, row.after_attribute)
        if floor is not None and value and value <= floor:
            _report(ConfigError(_child(path, row.key), f"must be greater than {row.after} ({floor}), got {value}"))


_loop_detection_block = _block_parser("tools.loopDetection", per_agent=False)
# Extensions: opt-in behaviour beyond the reference, global and per agent (same shape).
_EXTENSIONS_SCHEMA: Schema = _schema("loopwarden", per_agent=True)
# The `loopwarden` block holds the daemon's own settings, kept out of `tools.loopDetection` so that
# block stays exactly the documented schema: the tool catalog (global only) and the extensions
# (global, and per agent in `agents.list[i].loopwarden`).
_LOOPWARDEN_SCHEMA: Schema = _schema("loopwarden", per_agent=False)


def _nested_loop_detection(container: Mapping[str, Any], path: str) -> LoopDetectionBlock:
    """`container.tools.loopDetection`; other keys of `tools` belong to the agent framework."""
    tools = _optional_object(container, "tools", path)
    _refuse_near_misses(tools, _child(path, "tools"), _TOOLS_KEYS, _OPENCLAW_TOOLS_KEYS)
    value = tools.get("loopDetection")
    if value is None:
        return LoopDetectionBlock()
    return _loop_detection_block(value, _child(_child(path, "tools"), "loopDetection"))


# ---------------------------------------------------------------------------------------------
# Near misses: keys that are almost ours


_ROOT_KEYS = frozenset({"tools", "agents", "loopwarden"})
_TOOLS_KEYS = frozenset({"loopDetection"})
_AGENTS_KEYS = frozenset({"list", "entries"})
_AGENT_KEYS = frozenset({"id", "tools", "loopwarden"})

# Keys of the reference's (OpenClaw's) config at the same levels, current and legacy: never near
# misses, whatever their spelling distance to ours.
_OPENCLAW_ROOT_KEYS = frozenset({
    "$schema", "$include", "meta", "auth", "acp", "env", "wizard", "diagnostics", "logging", "cli", "update",
    "browser", "ui", "secrets", "skills", "plugins", "models", "nodeHost", "agents", "tools", "bindings",
    "broadcast", "audio", "messages", "commands", "approvals", "session", "web", "channels", "cron", "hooks",
    "discovery", "canvasHost", "talk", "gateway", "vault", "memory",
    "agent", "routing", "identity", "telegram", "discord", "slack", "signal", "imessage", "whatsapp",
})
_OPENCLAW_TOOLS_KEYS = frozenset({
    "profile", "allow", "alsoAllow", "deny", "byProvider", "web", "media", "links", "message",
    "agentToAgent", "sessions", "elevated", "exec", "fs", "loopDetection", "subagents", "sandbox",
})
_OPENCLAW_AGENTS_KEYS = frozenset({"defaults", "list"})
_OPENCLAW_AGENT_KEYS = frozenset({
    "id", "default", "name", "workspace", "agentDir", "model", "memorySearch", "humanDelay", "heartbeat",
    "statusUpdates", "identity", "groupChat", "subagents", "sandbox", "tools", "skills", "params", "runtime",
})
_NEAR_MISS_MIN_LENGTH = 6
_NEAR_MISS_MAX_EDITS = 2


def _edit_distance(a: str, b: str, limit: int) -> int:
    """Damerau-Levenshtein distance (optimal string alignment: a swap of two neighbours is one
    edit, the commonest typo), or limit + 1 as soon as it must exceed `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before: list[int] = []
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            best = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            if i > 1 and j > 1 and char_a == b[j - 2] and a[i - 2] == char_b:
                best = min(best, before[j - 2] + 1)
            current.append(best)
        if min(current) > limit:
            return limit + 1
        before, previous = previous, current
    return previous[-1]


def closest_key(key: str, known: frozenset[str]) -> str | None:
    """The known key `key` is closest to, within two edits ignoring case (ties: alphabetical);
    None when none is that close. For strict blocks, where every key must be known."""
    folded = key.casefold()
    best, best_distance = None, _NEAR_MISS_MAX_EDITS + 1
    for candidate in sorted(known):
        # A key of two letters is two edits from any other: only a case slip is a suggestion there.
        limit = _NEAR_MISS_MAX_EDITS if min(len(key), len(candidate)) > _NEAR_MISS_MAX_EDITS else 0
        distance = _edit_distance(folded, candidate.casefold(), limit)
        if distance <= limit and distance < best_distance:
            best, best_distance = candidate, distance
    return best


def near_miss(key: str, ours: frozenset[str]) -> str | None:
    """The key of ours that `key` almost is (another case, or 1-2 edits from a 6+ letter key)."""
    if key in ours:
        return None
    folded = key.casefold()
    for candidate in sorted(ours):
        if folded == candidate.casefold():
            return candidate
    for candidate in sorted(ours):
        if len(candidate) >= _NEAR_MISS_MIN_LENGTH and \
                _edit_distance(folded, candidate.casefold(), _NEAR_MISS_MAX_EDITS) <= _NEAR_MISS_MAX_EDITS:
            return candidate
    return None


def _refuse_near_misses(value: Mapping[str, Any], path: str, ours: frozenset[str], theirs: frozenset[str]) -> None:
    for key in value:
        if key in ours or key in theirs:
            continue
        meant = near_miss(key, ours)
        if meant is not None:
            _report(ConfigError(_child(path, key), f"not a key loopwarden reads here; did you mean {_render(meant)}? "
                                f"(as written it would be ignored)"))


# ---------------------------------------------------------------------------------------------
# Agents: `agents.list[]` and `agents.entries.<id>`


_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]+")


def _entries_path(agent_id: str) -> str:
    return f"agents.entries.{agent_id}" if _PLAIN_ID.fullmatch(agent_id) else f"agents.entries[{_render(agent_id)}]"


def _agent_entries(root: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """Every per-agent entry of both spellings as (id, dotted path, entry), list first, ids unique."""
    agents = _optional_object(root, "agents", ROOT_PATH)
    _refuse_near_misses(agents, "agents", _AGENTS_KEYS, _OPENCLAW_AGENTS_KEYS)
    found: list[tuple[str, str, Mapping[str, Any]]] = []
    first_path: dict[str, str] = {}

    def add(agent_id: str, path: str, id_path: str, entry: Mapping[str, Any]) -> None:
        if agent_id in first_path:
            _report(ConfigError(id_path, f"duplicate agent id {_render(agent_id)} (first at {first_path[agent_id]})"))
            return
        first_path[agent_id] = path
        _refuse_near_misses(entry, path, _AGENT_KEYS, _OPENCLAW_AGENT_KEYS)
        found.append((agent_id, path, entry))

    entries = agents.get("list")
    if entries is not None:
        if not isinstance(entries, list):
            raise ConfigError("agents.list", f"must be an array, got {_render(entries)}")
        for index, entry in enumerate(entries):
            path = f"agents.list[{index}]"
            try:  # one unusable entry does not hide the others' problems
                agent = _require_object(entry, path)
                add(_agent_id(agent, path), path, _child(path, "id"), agent)
            except ConfigError as error:
                _report(error)
    keyed = agents.get("entries")
    if keyed is not None:
        if not isinstance(keyed, dict):
            raise ConfigError("agents.entries", f"must be an object keyed by agent id, got {_render(keyed)}")
        for raw_id, entry in keyed.items():
            agent_id = raw_id.strip()
            path = _entries_path(raw_id)
            try:
                if not agent_id:
                    raise ConfigError(path, "an agent id must be a non-empty string")
                agent = _require_object(entry, path)
                inner = agent.get("id")
                if inner is not None and (not isinstance(inner, str) or inner.strip() != agent_id):
                    raise ConfigError(_child(path, "id"), f"must be the entry's own key {_render(agent_id)} when set, "
                                      f"got {_render(inner)}")
                add(agent_id, path, path, agent)
            except ConfigError as error:
                _report(error)
    return found


def _agent_id(entry: Mapping[str, Any], path: str) -> str:
    value = entry.get("id")
    if value is None:
        raise ConfigError(_child(path, "id"), "is required (a non-empty string)")
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(_child(path, "id"), f"must be a non-empty string, got {_render(value)}")
    # Runs are matched after strip() too, so " a1" and "a1" are the same agent.
    return value.strip()


def _extensions(settings: Mapping[str, Any]) -> ExtensionsBlock:
    names = {spec.name for spec in fields(ExtensionsBlock)}
    return ExtensionsBlock(**{name: value for name, value in settings.items() if name in names})


def _agent_extensions(agents: list[tuple[str, str, Mapping[str, Any]]]) -> dict[str, ExtensionsBlock]:
    """Each agent's `loopwarden` block (extension keys only), keyed by agent id."""
    blocks: dict[str, ExtensionsBlock] = {}
    for agent_id, path, entry in agents:
        value = entry.get("loopwarden")
        if value is not None:
            try:
                blocks[agent_id] = _extensions(_parse_strict(value, _child(path, "loopwarden"), _EXTENSIONS_SCHEMA))
            except ConfigError as error:
                _report(error)
    return blocks


def _agent_blocks(agents: list[tuple[str, str, Mapping[str, Any]]]) -> dict[str, LoopDetectionBlock]:
    """Each agent's `tools.loopDetection` block, keyed by id in file order (list, then entries)."""
    blocks: dict[str, LoopDetectionBlock] = {}
    for agent_id, path, entry in agents:
        try:
            blocks[agent_id] = _nested_loop_detection(entry, path)
        except ConfigError as error:
            _report(error)
    return blocks


def _tool_catalog(daemon_settings: Mapping[str, Any]) -> ToolCatalog:
    # Take only the catalog's own attributes: other `loopwarden` settings feed other objects.
    catalog_fields = {spec.name for spec in fields(ToolCatalog)}
    return ToolCatalog(**{name: value for name, value in daemon_settings.items() if name in catalog_fields})


def _daemon_limits(daemon_settings: Mapping[str, Any]) -> DaemonLimits:
    # Only the limits' own attributes; a key not written keeps its default.
    limit_fields = {spec.name for spec in fields(DaemonLimits)}
    return DaemonLimits(**{name: value for name, value in daemon_settings.items()
                           if name in limit_fields and value is not None})


def _attempt(parse: Callable[[], Any], fallback: Any) -> Any:
    """`parse()`, or `fallback` once its problem is reported (the other sections still get read)."""
    try:
        return parse()
    except ConfigError as error:
        _report(error)
        return fallback


def _build_config(root: Any) -> Config | None:
    """The Config; None when problems were reported to a collector (see load_config_text)."""
    root = _require_object(root, ROOT_PATH)
    _refuse_near_misses(root, ROOT_PATH, _ROOT_KEYS, _OPENCLAW_ROOT_KEYS)
    global_block = _attempt(lambda: _nested_loop_detection(root, ROOT_PATH), LoopDetectionBlock())
    agents = _attempt(lambda: _agent_entries(root), [])
    agent_blocks = _agent_blocks(agents)
    loopwarden = root.get("loopwarden")
    daemon_settings = {} if loopwarden is None else _attempt(
        lambda: _parse_strict(loopwarden, "loopwarden", _LOOPWARDEN_SCHEMA), {})
    agent_extensions = _agent_extensions(agents)
    if _found.get():  # a partly read config is never resolved, let alone used
        return None
    global_extensions = _extensions(daemon_settings)

    def extensions_of(agent_id: str) -> ExtensionsBlock:
        own = agent_extensions.get(agent_id)
        return global_extensions if own is None else merge(global_extensions, own)

    return Config(
        global_block=global_block,
        agent_blocks=agent_blocks,
        tool_catalog=_tool_catalog(daemon_settings),
        daemon_limits=_daemon_limits(daemon_settings),
        global_settings=resolve(global_block, global_extensions),
        agent_settings={
            agent_id: resolve(merge(global_block, block), extensions_of(agent_id))
            for agent_id, block in agent_blocks.items()
        },
        global_extensions=global_extensions,
        agent_extensions=agent_extensions,
    )
