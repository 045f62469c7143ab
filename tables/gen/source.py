"""Read and check tables/loopwarden.toml: the one definition every generated copy comes from.

Only the standard library, so the generator and its freshness check run before anything is
installed or built.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import cast

SOURCE = Path("tables/loopwarden.toml")

KINDS = ("switch", "bool", "count", "count_or_off", "gate", "tool_names", "preset", "tool_rules", "choice", "number")
LEVELS = ("warning", "critical")
ERROR_KINDS = ("abort", "reject", "internal", "request")
UNITS = ("bytes", "chars", "count", "seconds")
MIB = 1 << 20
PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


class SourceError(ValueError):
    """The source itself is wrong: named by its table and row."""


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def pascal(name: str) -> str:
    return "".join(part.title() for part in name.split("_"))


@dataclass(frozen=True)
class Block:
    path: str
    python: str
    doc: str

    @property
    def key(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def parent(self) -> str:
        return self.path.rsplit(".", 1)[0] if "." in self.path else ""

    @property
    def attribute(self) -> str:
        return snake(self.key)


@dataclass(frozen=True)
class Setting:
    path: str
    kind: str
    doc: str
    field: str = ""
    minimum: int | float | None = None
    maximum: int | float | None = None
    maximum_name: str = ""
    default: object = None
    after: str = ""
    symbol: str = ""
    scope: str = ""
    rust_type: str = ""
    proto_name: str = ""
    proto_tag: int = 0
    choices: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def block(self) -> str:
        return self.path.rsplit(".", 1)[0]

    @property
    def attribute(self) -> str:
        return snake(self.key)

    @property
    def wire_name(self) -> str:
        return self.proto_name or self.field


@dataclass(frozen=True)
class Preset:
    name: str
    doc: str
    values: dict[str, object]


@dataclass(frozen=True)
class Detector:
    id: str
    number: int
    rust: str
    doc: str


@dataclass(frozen=True)
class ErrorCode:
    code: str
    kind: str
    doc: str
    limit: str = ""  # the [[limit]] it enforces: `{flag}` in the doc is that limit's flag


@dataclass(frozen=True)
class Message:
    id: str
    detector: str
    level: str
    text: str
    # For the docs' message table, when the detector alone does not say when it is sent (the
    # messages of no one detector): the situation, and the action the verdict takes.
    when: str = ""
    action: str = ""

    @property
    def placeholders(self) -> list[str]:
        seen: list[str] = []
        for name in PLACEHOLDER.findall(self.text):
            if name not in seen:
                seen.append(name)
        return seen


@dataclass(frozen=True)
class Limit:
    """One input limit: a daemon flag, and when `core`, a field of the core's Limits."""

    name: str
    unit: str
    default: int | float
    help: str
    doc: str
    core: bool
    flag: str = ""
    env: str = ""
    why: str = ""

    def __post_init__(self) -> None:
        if not self.flag:
            object.__setattr__(self, "flag", "--" + self.name.replace("_", "-"))
        if not self.env:
            object.__setattr__(self, "env", "LOOPWARDEN_" + self.flag.strip("-").replace("-", "_").upper())

    @property
    def is_float(self) -> bool:
        return self.unit == "seconds"

    @property
    def shown(self) -> str:
        """The default as --help and the docs show it: `1 MiB`, `256`, `600`."""
        value = self.default
        if self.unit == "bytes" and value % MIB == 0:
            return f"{int(value) // MIB} MiB"
        return str(int(value)) if float(value).is_integer() else str(value)

    @property
    def metavar(self) -> str:
        """The docs' placeholder of the flag's value."""
        return "S" if self.unit == "seconds" else "N"


@dataclass(frozen=True)
class Tables:
    bounds: dict[str, int]
    blocks: list[Block]
    settings: list[Setting]
    presets: list[Preset]
    detectors: list[Detector]
    error_codes: list[ErrorCode]
    messages: list[Message]
    limits: list[Limit]

    # ---- views the generators share

    @property
    def resolved(self) -> list[Setting]:
        """Settings the engine reads (each has a field), in table order."""
        return [s for s in self.settings if s.field]

    @property
    def wire(self) -> list[Setting]:
        """Resolved settings that EffectiveConfig carries, by proto tag."""
        return sorted((s for s in self.resolved if s.proto_tag), key=lambda s: s.proto_tag)

    @property
    def core_limits(self) -> list[Limit]:
        """The limits the core enforces, in table order."""
        return [limit for limit in self.limits if limit.core]

    def block(self, path: str) -> Block:
        return next(b for b in self.blocks if b.path == path)

    def children(self, path: str) -> list[Block]:
        return [b for b in self.blocks if b.parent == path]

    def settings_of(self, path: str) -> list[Setting]:
        return [s for s in self.settings if s.block == path]

    def gate_of(self, setting: Setting) -> Setting | None:
        return next((s for s in self.settings_of(setting.block) if s.kind == "gate"), None)

    def setting(self, path: str) -> Setting:
        return next(s for s in self.settings if s.path == path)

    def resolved_default(self, setting: Setting) -> object:
        """What the engine sees when nothing is written: 0 for a setting behind a gate."""
        if setting.kind == "switch":
            return None
        if setting.kind == "preset":
            return ""
        if setting.kind == "tool_rules":
            return {}
        if self.gate_of(setting) is not None:
            return 0
        return setting.default


def load(root: Path) -> Tables:
    raw = tomllib.loads((root / SOURCE).read_text(encoding="utf-8"))
    bounds = dict(raw["bounds"])
    blocks = [Block(**row) for row in raw["block"]]
    settings = []
    for row in raw["setting"]:
        row = dict(row)
        maximum_name = row.pop("max", "")
        row["minimum"] = row.pop("min", None)
        if isinstance(maximum_name, (int, float)):
            row["maximum"], maximum_name = maximum_name, ""
        elif maximum_name:
            if maximum_name not in bounds:
                raise SourceError(f"setting {row['path']}: max {maximum_name!r} is not in [bounds]")
            row["maximum"] = bounds[maximum_name]
        if "choices" in row:
            row["choices"] = tuple(row["choices"])
        settings.append(Setting(maximum_name=maximum_name, **row))
    limits = [Limit(**row) for row in raw["limit"]]
    presets = [Preset(name, table["doc"], dict(table.get("values", {}))) for name, table in raw["preset"].items()]
    tables = Tables(
        bounds=bounds, blocks=blocks, settings=settings, presets=presets,
        detectors=[Detector(**row) for row in raw["detector"]],
        error_codes=_error_codes(raw["error_code"], limits),
        messages=[Message(**row) for row in raw["message"]],
        limits=limits,
    )
    _check(tables)
    return tables


def _error_codes(rows: list[dict], limits: list[Limit]) -> list[ErrorCode]:
    """The error codes, each `{flag}` in a doc filled with the flag of the code's limit."""
    flags = {limit.name: limit.flag for limit in limits}
    codes = []
    for row in rows:
        code = ErrorCode(**row)
        if code.limit and code.limit not in flags:
            raise SourceError(f"error code {code.code}: limit {code.limit!r} is not a [[limit]]")
        if bool(code.limit) != ("{flag}" in code.doc):
            raise SourceError(f"error code {code.code}: a doc names its limit's flag as {{flag}}, and only with limit")
        codes.append(ErrorCode(code.code, code.kind, code.doc.replace("{flag}", flags.get(code.limit, "")), code.limit))
    return codes


def _unique(what: str, values: list) -> None:
    seen = set()
    for value in values:
        if value in seen:
            raise SourceError(f"{what} {value!r} is defined twice")
        seen.add(value)


def _check(t: Tables) -> None:
    """Refuse a source that would generate inconsistent copies, naming the row."""
    _unique("block", [b.path for b in t.blocks])
    _unique("setting", [s.path for s in t.settings])
    _unique("setting field", [s.field for s in t.resolved])
    _unique("proto tag", [s.proto_tag for s in t.resolved if s.proto_tag])
    _unique("detector", [d.id for d in t.detectors])
    _unique("detector number", [d.number for d in t.detectors])
    _unique("error code", [e.code for e in t.error_codes])
    _unique("message", [m.id for m in t.messages])
    _unique("limit", [limit.name for limit in t.limits])
    _unique("limit flag", [limit.flag for limit in t.limits])
    _unique("limit env", [limit.env for limit in t.limits])
    paths = {b.path for b in t.blocks}
    for s in t.settings:
        where = f"setting {s.path}"
        if s.kind not in KINDS:
            raise SourceError(f"{where}: kind {s.kind!r} is not one of {', '.join(KINDS)}")
        if s.block not in paths:
            raise SourceError(f"{where}: {s.block} is not a block")
        if s.kind in ("count", "count_or_off") and (s.minimum is None or s.maximum is None or s.default is None):
            raise SourceError(f"{where}: a {s.kind} needs min, max and default")
        # A number's default is a TOML int or float (a Setting's default is any TOML value).
        if s.kind == "number" and (s.minimum is None or s.maximum is None or s.default is None
                                   or not s.minimum <= cast(float, s.default) <= s.maximum):
            raise SourceError(f"{where}: a number needs min, max and a default between them")
        if s.kind == "choice" and (len(s.choices) < 2 or s.default not in s.choices):
            raise SourceError(f"{where}: a choice needs two or more choices and a default among them")
        if s.kind in ("gate", "tool_names") and s.field:
            raise SourceError(f"{where}: a {s.kind} has no resolved field")
        if s.kind not in ("gate", "tool_names") and not s.field and s.scope != "global":
            raise SourceError(f"{where}: needs a field (the name the engine reads)")
        if s.scope == "global" and s.field:
            raise SourceError(f"{where}: a global-only key is read by the daemon, not the engine: no field")
        if s.after and s.after not in {o.key for o in t.settings_of(s.block)}:
            raise SourceError(f"{where}: after {s.after!r} is not a key of {s.block}")
        if s.field and s.field != "preset" and not s.proto_tag:
            raise SourceError(f"{where}: needs a proto_tag (EffectiveConfig carries every resolved setting)")
    names = {p.name for p in t.presets}
    if "reference" not in names:
        raise SourceError("preset 'reference' (the documented behaviour) is required")
    for preset in t.presets:
        for path in preset.values:
            if path not in {s.path for s in t.settings}:
                raise SourceError(f"preset {preset.name}: {path} is not a setting")
    detector_ids = {d.id for d in t.detectors}
    # Numbers are wire values: unique (checked above), `none` = 0 first; a gap is allowed, since
    # detectors are numbered when they are designed and branches adding them merge in any order.
    if not t.detectors or t.detectors[0].number != 0:
        raise SourceError("the first detector must be number 0 (none)")
    for e in t.error_codes:
        if e.kind not in ERROR_KINDS:
            raise SourceError(f"error code {e.code}: kind {e.kind!r} is not one of {', '.join(ERROR_KINDS)}")
    for m in t.messages:
        if m.detector not in detector_ids:
            raise SourceError(f"message {m.id}: detector {m.detector!r} is not a detector id")
        if m.level not in LEVELS:
            raise SourceError(f"message {m.id}: level {m.level!r} is not one of {', '.join(LEVELS)}")
        if m.action not in ("", "WARN", "BLOCK", "ABORT", "ASK"):
            raise SourceError(f"message {m.id}: action {m.action!r} is not one of WARN, BLOCK, ABORT, ASK")
        prefix = "WARNING: " if m.level == "warning" else "CRITICAL: "
        if not m.text.startswith(prefix):
            raise SourceError(f"message {m.id}: a {m.level} message starts with {prefix!r}")
    for limit in t.limits:
        where = f"limit {limit.name}"
        if not re.fullmatch(r"[a-z][a-z0-9_]*", limit.name):
            raise SourceError(f"{where}: a name is snake_case")
        if limit.unit not in UNITS:
            raise SourceError(f"{where}: unit {limit.unit!r} is not one of {', '.join(UNITS)}")
        if not limit.flag.startswith("--") or not limit.env.startswith("LOOPWARDEN_"):
            raise SourceError(f"{where}: a flag starts with -- and a variable with LOOPWARDEN_")
        wanted = (int, float) if limit.is_float else (int,)
        if isinstance(limit.default, bool) or not isinstance(limit.default, wanted) or limit.default <= 0:
            raise SourceError(f"{where}: the default is a positive {'number' if limit.is_float else 'integer'}")
        if limit.core and limit.is_float:
            raise SourceError(f"{where}: the core's limits are counts (usize), not seconds")
