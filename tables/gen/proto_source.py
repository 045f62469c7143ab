"""Read the messages of proto/loopwarden/v1/loopwarden.proto: the source of the event and view
shapes (which fields a message has, their numbers and types).

The proto, not the TOML, is the source of shapes: it already is the contract every client
compiles, and its field numbers must not be written twice. It is read as text, by a parser of the
plain subset the file uses (top-level messages and enums; scalar, enum and message fields,
`optional`, `repeated`, `oneof`), so the generator stays on the standard library and
`python3 -m tables.gen --check` runs before anything (protoc included) is installed. Anything
outside that subset is refused, naming the line, rather than skipped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .source import SourceError

PROTO = Path("proto/loopwarden/v1/loopwarden.proto")

SCALARS = ("string", "bool", "uint32", "uint64", "int32", "int64", "double", "float", "bytes")
_FIELD = re.compile(r"^(optional |repeated )?([A-Za-z_][\w.]*) ([a-z_][a-z0-9_]*) = (\d+);$")
_OPEN = re.compile(r"^(message|enum|oneof|service) ([A-Za-z_]\w*) \{(\})?$")


@dataclass(frozen=True)
class ProtoField:
    name: str
    number: int
    type: str  # a scalar, or the name of a message or enum of the file
    label: str = ""  # "", "optional" or "repeated"
    oneof: str = ""  # the oneof it is a member of
    doc: str = ""  # its leading comment, joined

    @property
    def scalar(self) -> bool:
        return self.type in SCALARS


@dataclass
class ProtoMessage:
    name: str
    fields: list[ProtoField] = field(default_factory=list)

    def field(self, name: str) -> ProtoField:
        for f in self.fields:
            if f.name == name:
                return f
        raise SourceError(f"{PROTO}: message {self.name} has no field {name}")

    def oneof(self, name: str) -> list[ProtoField]:
        return [f for f in self.fields if f.oneof == name]


@dataclass
class Proto:
    messages: dict[str, ProtoMessage]
    enums: set[str]
    # "Message.field" names the clients' event builders take by hand (tables/loopwarden.toml's
    # [event_builders]); shapes_out.load sets it.
    by_hand: frozenset[str] = frozenset()
    # RunRecord's fields the core fills by hand (the TOML's [record_view]); the others are carried.
    record_by_hand: frozenset[str] = frozenset()

    def message(self, name: str) -> ProtoMessage:
        if name not in self.messages:
            raise SourceError(f"{PROTO}: no message {name}")
        return self.messages[name]


def parse(text: str) -> Proto:
    messages: dict[str, ProtoMessage] = {}
    enums: set[str] = set()
    stack: list[tuple[str, str]] = []  # (what, name) of the open blocks
    doc: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        where = f"{PROTO}:{number}"
        if line.startswith("//"):
            doc.append(line[2:].strip())
            continue
        if not line or line.startswith(("syntax ", "package ", "option ", "import ", "rpc ", "reserved ")):
            doc = []
            continue
        if opened := _OPEN.match(line):
            what, name, closed = opened.groups()
            if what in ("message", "enum") and stack:
                raise SourceError(f"{where}: nested {what} {name}: keep messages and enums top-level")
            if what == "oneof" and (not stack or stack[-1][0] != "message"):
                raise SourceError(f"{where}: oneof {name} outside a message")
            if what == "message":
                messages[name] = ProtoMessage(name)
            elif what == "enum":
                enums.add(name)
            if not closed:
                stack.append((what, name))
            doc = []
            continue
        if line == "}":
            if not stack:
                raise SourceError(f"{where}: unbalanced }}")
            stack.pop()
            doc = []
            continue
        if stack and stack[-1][0] in ("enum", "service"):
            doc = []
            continue
        if not stack:
            raise SourceError(f"{where}: {line!r} outside a message")
        found = _FIELD.match(line)
        if found is None:
            raise SourceError(
                f"{where}: {line!r} is not a field of the plain form `[optional|repeated] TYPE name = N;`")
        label, type_, name, tag = found.groups()
        in_oneof = stack[-1][0] == "oneof"
        owner = next(n for w, n in reversed(stack) if w == "message")
        messages[owner].fields.append(ProtoField(
            name, int(tag), type_, (label or "").strip(), stack[-1][1] if in_oneof else "", " ".join(doc)))
        doc = []
    if stack:
        raise SourceError(f"{PROTO}: {stack[-1][0]} {stack[-1][1]} is not closed")
    for message in messages.values():
        for f in message.fields:
            if not f.scalar and f.type not in messages and f.type not in enums:
                raise SourceError(f"{PROTO}: {message.name}.{f.name}: type {f.type} is not defined in the file")
    return Proto(messages, enums)


def load(root: Path) -> Proto:
    return parse((root / PROTO).read_text(encoding="utf-8"))
