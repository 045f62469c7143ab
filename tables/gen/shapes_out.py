"""The event shapes, generated from proto/loopwarden/v1/loopwarden.proto (proto_source.py).

One event, spelled out, is the union of the Event envelope's fields and every kind message's
fields, by name: `tool_call_id` is one field whether a ToolCall, a ToolOutcome or an Approval
carries it (a name two messages give different types is refused). How each field crosses is
decided by its proto type alone:

- a scalar is carried as it is;
- an enum is spelled as the config spells it (a string) and converted by a hand-written function
  named after the field (`tool_class`, `scope`) in the file that receives it;
- the string members of a oneof are optional strings, combined by a hand-written function named
  after the oneof (`outcome`);
- a field of a kind message whose type is a message of scalars (ModelOutput.usage, a Usage) is
  *embedded*: its message's fields join the flat ones (sharing names with that message's own
  kind), the message is present when any of them is set, and the wire reader reads it in place
  as a `<Type>Ref` (a second copy of it is left to prost, which merges).

So a new scalar field of a kind message needs no hand-written line on these paths.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from .proto_source import Proto, ProtoField, ProtoMessage
from .proto_source import load as load_proto
from .regions import comment, replace
from .source import SOURCE, SourceError

EVENT = "Event"
KIND_ONEOF = "kind"

_RUST = {"string": "String", "bool": "bool", "uint32": "u32", "uint64": "u64", "int32": "i32", "int64": "i64",
         "double": "f64", "float": "f32"}
_PYTHON = {"string": "str", "bool": "bool", "uint32": "int", "uint64": "int", "int32": "int", "int64": "int",
           "double": "float", "float": "float"}
_PYTHON_ZERO = {"str": '""', "bool": "False", "int": "0", "float": "0.0"}


@dataclass(frozen=True)
class Flat:
    """One field of an event spelled out."""

    name: str
    form: str  # "scalar", "enum" (spelled as a string) or "member" (of a oneof: an optional string)
    type: str  # the proto type
    messages: tuple[str, ...]  # where it comes from: "Event" or kind messages

    @property
    def rust(self) -> str:
        if self.form == "enum":
            return "String"
        if self.form == "member":
            return "Option<String>"
        return _RUST[self.type]

    @property
    def python(self) -> str:
        if self.form == "enum":
            return "str"
        if self.form == "member":
            return "str | None"
        return _PYTHON[self.type]

    @property
    def python_default(self) -> str:
        return "None" if self.form == "member" else _PYTHON_ZERO[self.python]


@dataclass(frozen=True)
class Kind:
    name: str  # the Event.kind member's name: "tool_call"
    message: ProtoMessage


def kinds(proto: Proto) -> list[Kind]:
    return [Kind(f.name, proto.message(f.type)) for f in proto.message(EVENT).oneof(KIND_ONEOF)]


def embedded(proto: Proto, f: ProtoField) -> ProtoMessage | None:
    """The message of an embedded field (a singular message-typed field, not in a oneof); None
    for any other field."""
    if f.label or f.oneof or f.type not in proto.messages:
        return None
    return proto.message(f.type)


def _form(proto: Proto, where: str, f: ProtoField) -> str:
    if f.label == "repeated":
        raise SourceError(f"{where}.{f.name}: a repeated field has no flat form; carry it by hand")
    if f.oneof:
        if f.type != "string":
            raise SourceError(f"{where}.{f.name}: only string members of a oneof have a flat form")
        return "member"
    if f.type in proto.enums:
        return "enum"
    if f.scalar and f.type in _RUST:
        return "scalar"
    raise SourceError(f"{where}.{f.name}: type {f.type} has no flat form; carry it by hand")


def flat_fields(proto: Proto) -> list[Flat]:
    """The envelope's fields, then each kind's in kind order, once per name."""
    found: dict[str, Flat] = {}
    sources = [(EVENT, [f for f in proto.message(EVENT).fields if f.oneof != KIND_ONEOF])]
    for k in kinds(proto):
        sources.append((k.message.name, [f for f in k.message.fields if embedded(proto, f) is None]))
        for f in k.message.fields:
            inner = embedded(proto, f)
            if inner is not None:
                sources.append((f"{k.message.name}.{f.name}", inner.fields))
    for where, fields in sources:
        for f in fields:
            flat = Flat(f.name, _form(proto, where, f), f.type, (where,))
            known = found.get(f.name)
            if known is None:
                found[f.name] = flat
            elif (known.form, known.type) != (flat.form, flat.type):
                raise SourceError(f"{where}.{f.name}: {flat.type} here, {known.type} in {known.messages[0]}")
            else:
                found[f.name] = Flat(f.name, known.form, known.type, known.messages + (where,))
    return list(found.values())


# ---------------------------------------------------------------- the core's Python face

CORE_EVENT_PATH = "core/src/python/event_gen.rs"


def _rust_value(proto: Proto, kind: Kind, f: ProtoField) -> str | None:
    """The expression that fills `f` of the kind message from `e` (an EventFields); None for a
    oneof member (its oneof is filled once, from all its members)."""
    if f.oneof:
        return None
    if f.type in proto.enums:
        return f"convert::{f.name}(&e.{f.name})? as i32"
    inner = embedded(proto, f)
    if inner is not None:
        values = ", ".join(f"{g.name}: {_rust_value(proto, kind, g)}" for g in inner.fields)
        return f"Some(pb::{inner.name} {{ {values} }}).filter(|m| *m != pb::{inner.name}::default())"
    return f"e.{f.name}"


def render_core_event(proto: Proto) -> str:
    flat = flat_fields(proto)
    out = [
        "// @generated by `python3 -m tables.gen` from proto/loopwarden/v1/loopwarden.proto: do not edit.",
        "//! An event as `Evaluator.decide` reads it: the attributes of one Python object (the client's",
        "//! EventRecord, or anything with the same attributes), and the protobuf Event built from them",
        "//! without a round trip. Enums arrive as the config spells them and oneofs as their members;",
        "//! convert.rs converts them.",
        "",
        "use pyo3::prelude::*;",
        "",
        "use super::convert;",
        "use crate::pb;",
        "",
        "/// Every field of every kind, once per name; `kind` is the Event.kind member's name.",
        "#[derive(FromPyObject)]",
        "pub(super) struct EventFields {",
        "    pub(super) kind: Option<String>,",
    ]
    out += [f"    pub(super) {f.name}: {f.rust}," for f in flat]
    out += [
        "}",
        "",
        "/// The event of `e.kind` (None for a kind that is no Event.kind member: REJECTed downstream).",
        "pub(super) fn event_from(e: EventFields) -> PyResult<pb::Event> {",
        "    use pb::event::Kind;",
        "    let kind = match e.kind.as_deref().unwrap_or(\"\") {",
    ]
    for kind in kinds(proto):
        values = []
        for f in kind.message.fields:
            value = _rust_value(proto, kind, f)
            if value is not None:
                values.append(f"{f.name}: {value}")
        for oneof in dict.fromkeys(f.oneof for f in kind.message.fields if f.oneof):
            members = ", ".join(f"e.{f.name}" for f in kind.message.oneof(oneof))
            values.append(f"{oneof}: convert::{oneof}({members})")
        body = ", ".join(values)
        message = kind.message.name
        out.append(f'        "{kind.name}" => Some(Kind::{message}(pb::{message} {{ {body} }})),'.replace("{  }", "{}"))
    envelope = [f for f in proto.message(EVENT).fields if f.oneof != KIND_ONEOF]
    out += [
        "        _ => None,",
        "    };",
        "    Ok(pb::Event { " + ", ".join(f"{f.name}: e.{f.name}" for f in envelope) + ", kind })",
        "}",
        "",
    ]
    return "\n".join(out)


# ---------------------------------------------------------------- the core's .pyi

PYI_PATH = "core/loopwarden_core.pyi"


def update_pyi(proto: Proto, text: str) -> str:
    # Read-only, so a frozen dataclass (the client's EventRecord) is one.
    fields = [("kind", "str | None")] + [(f.name, f.python) for f in flat_fields(proto)]
    body = [line for name, type_ in fields for line in ("    @property", f"    def {name}(self) -> {type_}: ...")]
    return replace(text, "event-like", body, path=PYI_PATH)


# ---------------------------------------------------------------- the Python client's EventRecord

EVENTFORMAT_PATH = "client/python/loopwarden/eventformat.py"


def update_eventformat(proto: Proto, text: str) -> str:
    body = []
    for f in flat_fields(proto):
        where = ", ".join(f.messages)
        body.append(f"    {f.name}: {f.python} = {f.python_default}  # {where}")
    return replace(text, "event-record", body, path=EVENTFORMAT_PATH)


# ---------------------------------------------------------------- the core's in-place wire reader

WIRE_PATH = "core/src/service/wire/event_gen.rs"

# How the in-place reader reads a field of each proto type: (wire type, expression, borrowed type).
_WIRE = {
    "string": (2, "r.str()?", "&'a str"),
    "bool": (0, "r.varint()? != 0", "bool"),
    "uint64": (0, "r.varint()?", "u64"),
    "uint32": (0, "r.varint()? as u32", "u32"),  # as prost reads a uint32
    "int64": (0, "r.varint()? as i64", "i64"),
    "int32": (0, "r.varint()? as i32", "i32"),
    "double": (1, "f64::from_bits(r.fixed64()?)", "f64"),
}
_WIRE_ZERO = {"&'a str": '""', "bool": "false", "u64": "0", "u32": "0", "i64": "0", "i32": "0", "f64": "0.0"}


def _zero(borrowed: str) -> str:
    return "None" if borrowed.startswith("Option<") else _WIRE_ZERO[borrowed]


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def _embedded_messages(proto: Proto) -> list[ProtoMessage]:
    """The messages some kind embeds, once each, in kind order."""
    found: dict[str, ProtoMessage] = {}
    for k in kinds(proto):
        for f in k.message.fields:
            inner = embedded(proto, f)
            if inner is not None:
                found.setdefault(inner.name, inner)
    return list(found.values())


def _ref_pascal(name: str) -> str:
    return "".join(part.title() for part in name.split("_"))


def _wire(proto: Proto, where: str, f: ProtoField) -> tuple[int, str, str]:
    if f.label == "repeated":
        raise SourceError(f"{where}.{f.name}: a repeated field is not read in place; extend shapes_out._WIRE")
    if f.type in proto.enums:
        return 0, "r.varint()? as i32", "i32"  # as prost reads an enum: its wire value
    if embedded(proto, f) is not None:
        return 2, f"{_snake(f.type)}_fields(r.bytes()?)?", f"Option<{f.type}Ref<'a>>"
    if f.type not in _WIRE:
        raise SourceError(f"{where}.{f.name}: type {f.type} is not read in place; extend shapes_out._WIRE")
    return _WIRE[f.type]


def _oneofs(message: ProtoMessage) -> list[str]:
    return list(dict.fromkeys(f.oneof for f in message.fields if f.oneof))


def render_wire(proto: Proto) -> str:
    envelope = [f for f in proto.message(EVENT).fields if f.oneof != KIND_ONEOF]
    out = [
        "// @generated by `python3 -m tables.gen` from proto/loopwarden/v1/loopwarden.proto: do not edit.",
        "//! The shapes of wire.rs: `EventRef`, its `KindRef`, the view of an owned `pb::Event`, and the",
        "//! in-place reader of each message (the plain form: each known field with its own wire type;",
        "//! anything else answers None and is left to prost). Enums are their wire values.",
        "",
        "use super::Reader;",
        "use crate::carried_gen::Carried;",
        "use crate::pb;",
        "",
    ]
    for k in kinds(proto):
        for oneof in _oneofs(k.message):
            members = k.message.oneof(oneof)
            out += [f"/// {k.message.name}.{oneof}.",
                    "#[derive(Clone, Copy, Debug, PartialEq)]",
                    f"pub enum {_ref_pascal(oneof)}Ref<'a> {{"]
            out += [f"    {_ref_pascal(f.name)}(&'a str)," for f in members]
            out += ["}", ""]
    for inner in _embedded_messages(proto):
        out += [f"/// A {inner.name} embedded in a kind message, borrowed.",
                "#[derive(Clone, Copy, Debug, PartialEq)]",
                f"pub struct {inner.name}Ref<'a> {{"]
        out += [f"    pub {g.name}: {_wire(proto, inner.name, g)[2]}," for g in inner.fields]
        out += ["}", ""]
    out += ["/// The event's kind: each kind message's fields, borrowed.",
            "#[derive(Clone, Copy, Debug, PartialEq)]",
            "pub enum KindRef<'a> {"]
    for k in kinds(proto):
        if not k.message.fields:
            out.append(f"    {k.message.name},")
            continue
        fields = []
        for f in k.message.fields:
            if not f.oneof:
                fields.append(f"{f.name}: {_wire(proto, k.message.name, f)[2]}")
        fields += [f"{o}: Option<{_ref_pascal(o)}Ref<'a>>" for o in _oneofs(k.message)]
        out.append(f"    {k.message.name} {{ {', '.join(fields)} }},")
    out += ["}", "",
            "/// An event, borrowed from the request bytes (or from an owned `pb::Event`).",
            "#[derive(Clone, Copy, Debug, PartialEq, Default)]",
            "pub struct EventRef<'a> {"]
    out += [f"    pub {f.name}: {_wire(proto, EVENT, f)[2]}," for f in envelope]
    out += ["    pub kind: Option<KindRef<'a>>,", "}", ""]
    # The owned event seen through the same type.
    out += ["impl<'a> From<&'a pb::Event> for EventRef<'a> {",
            "    fn from(e: &'a pb::Event) -> EventRef<'a> {",
            "        EventRef { "
            + ", ".join(f"{f.name}: {'&' if f.type == 'string' else ''}e.{f.name}" for f in envelope)
            + ", kind: kind_ref(&e.kind) }",
            "    }", "}", "",
            "/// The event kind's name as the contract spells it (metrics labels, logs, span events).",
            "pub fn kind_name(kind: &Option<KindRef>) -> &'static str {",
            "    match kind {"]
    for k in kinds(proto):
        pattern = k.message.name if not k.message.fields else k.message.name + " { .. }"
        out.append(f'        Some(KindRef::{pattern}) => "{k.name}",')
    out += ['        None => "unknown",', "    }", "}", "",
            "/// The borrowed view of an owned kind.",
            "pub fn kind_ref(kind: &Option<pb::event::Kind>) -> Option<KindRef<'_>> {",
            "    use pb::event::Kind;",
            "    Some(match kind.as_ref()? {"]
    for k in kinds(proto):
        name = k.message.name
        if not k.message.fields:
            out.append(f"        Kind::{name}(_) => KindRef::{name},")
            continue
        values = []
        for f in k.message.fields:
            if f.oneof:
                continue
            held = embedded(proto, f)
            if held is None:
                values.append(f"{f.name}: {'&' if f.type == 'string' else ''}m.{f.name}")
                continue
            held_values = ", ".join(f"{g.name}: {'&' if g.type == 'string' else ''}v.{g.name}" for g in held.fields)
            values.append(f"{f.name}: m.{f.name}.as_ref().map(|v| {held.name}Ref {{ {held_values} }})")
        for oneof in _oneofs(k.message):
            module = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
            arms = " ".join(f"pb::{module}::{_ref_pascal(oneof)}::{_ref_pascal(f.name)}(v) => "
                            f"{_ref_pascal(oneof)}Ref::{_ref_pascal(f.name)}(v),"
                            for f in k.message.oneof(oneof))
            values.append(f"{oneof}: m.{oneof}.as_ref().map(|v| match v {{ {arms} }})")
        out.append(f"        Kind::{name}(m) => KindRef::{name} {{ {', '.join(values)} }},")
    out += ["    })", "}", ""]
    # What a tool call carries into its record (carried_gen.rs).
    names = [f.name for f in carried(proto)]
    out += ["impl EventRef<'_> {",
            "    /// What the event carries into its record (nothing unless it is a tool call).",
            "    pub fn carried(&self) -> Carried {"]
    if names:
        carried_values = ", ".join(f"{n}: *{n}" for n in names)
        out += ["        match &self.kind {",
                f"            Some(KindRef::ToolCall {{ {', '.join(names)}, .. }}) => Carried {{ {carried_values} }},",
                "            _ => Carried::default(),",
                "        }"]
    else:
        out.append("        Carried {}")
    out += ["    }", "}", ""]
    # One reader per kind message.
    for k in kinds(proto):
        name = k.message.name
        out.append(f"/// {name}'s fields; None for anything else.")
        out.append(f"pub(super) fn {k.name}_message(data: &[u8]) -> Option<KindRef<'_>> {{")
        if not k.message.fields:
            out += [f"    data.is_empty().then_some(KindRef::{name})", "}", ""]
            continue
        plain = [f for f in k.message.fields if not f.oneof]
        for f in plain:
            out.append(f"    let mut {f.name} = {_zero(_wire(proto, name, f)[2])};")
        for oneof in _oneofs(k.message):
            out.append(f"    let mut {oneof} = None;")
        out += ["    let mut r = Reader { data, pos: 0 };", "    while !r.done() {", "        match r.key()? {"]
        for f in sorted(k.message.fields, key=lambda f: f.number):
            wire, read, _ = _wire(proto, name, f)
            if f.oneof:
                out.append(f"            ({f.number}, {wire}) => {f.oneof} = "
                           f"Some({_ref_pascal(f.oneof)}Ref::{_ref_pascal(f.name)}({read})),")
            elif embedded(proto, f) is not None:
                # Twice is prost's to merge: left to it.
                out.append(f"            ({f.number}, {wire}) if {f.name}.is_none() => {f.name} = Some({read}),")
            else:
                out.append(f"            ({f.number}, {wire}) => {f.name} = {read},")
        names = [f.name for f in plain] + _oneofs(k.message)
        out += ["            _ => return None,", "        }", "    }",
                f"    Some(KindRef::{name} {{ {', '.join(names)} }})", "}", ""]
    for inner in _embedded_messages(proto):
        out.append(f"/// A {inner.name} embedded in a kind message; None for anything else.")
        out.append(f"fn {_snake(inner.name)}_fields(data: &[u8]) -> Option<{inner.name}Ref<'_>> {{")
        for g in inner.fields:
            out.append(f"    let mut {g.name} = {_zero(_wire(proto, inner.name, g)[2])};")
        out += ["    let mut r = Reader { data, pos: 0 };", "    while !r.done() {", "        match r.key()? {"]
        for g in sorted(inner.fields, key=lambda g: g.number):
            wire, read, _ = _wire(proto, inner.name, g)
            out.append(f"            ({g.number}, {wire}) => {g.name} = {read},")
        out += ["            _ => return None,", "        }", "    }",
                f"    Some({inner.name}Ref {{ {', '.join(g.name for g in inner.fields)} }})", "}", ""]
    # The event itself.
    out += ["/// One Event's fields, each kind at most once (prost merges a repeated kind: its case); None",
            "/// for anything else.",
            "pub(super) fn event(data: &[u8]) -> Option<EventRef<'_>> {",
            "    let mut e = EventRef::default();",
            "    let mut r = Reader { data, pos: 0 };",
            "    while !r.done() {",
            "        let (field, wire) = r.key()?;",
            "        match (field, wire) {"]
    for f in envelope:
        wire, read, _ = _wire(proto, EVENT, f)
        out.append(f"            ({f.number}, {wire}) => e.{f.name} = {read},")
    members = proto.message(EVENT).oneof(KIND_ONEOF)
    tags = [f.number for f in members]
    contiguous = tags == list(range(tags[0], tags[0] + len(tags)))
    numbers = f"{tags[0]}..={tags[-1]}" if contiguous else " | ".join(str(n) for n in tags)
    out += [f"            ({numbers}, 2) => {{",
            "                if e.kind.is_some() {",
            "                    return None;",
            "                }",
            "                let body = r.bytes()?;",
            "                e.kind = Some(match field {"]
    for i, f in enumerate(members):
        head = "_" if i == len(members) - 1 else str(f.number)
        out.append(f"                    {head} => {f.name}_message(body)?,")
    out += ["                });", "            }", "            _ => return None,", "        }", "    }",
            "    Some(e)", "}", ""]
    out += render_wire_random(proto)
    return "\n".join(out)


_RANDOM = {
    "string": "text(next)",
    "bool": "next().is_multiple_of(2)",
    "uint64": "[0, 1, 127, 128, u64::MAX, next()][(next() % 6) as usize]",
    "uint32": "[0, 1, 60, u32::MAX][(next() % 4) as usize]",
    "int64": "next() as i64",
    "int32": "next() as i32",
    "double": "[0.0, 0.25, 1e-9, f64::MAX][(next() % 4) as usize]",
}


def _random_value(proto: Proto, f: ProtoField) -> str:
    return "(next() % 5) as i32" if f.type in proto.enums else _RANDOM[f.type]


def render_wire_random(proto: Proto) -> list[str]:
    """A random owned event of every shape, for the reader's agreement tests with prost."""
    out = ["/// A random event: every kind (or none), every field from values that stress its encoding.",
           "#[cfg(test)]",
           "pub(super) fn random_event(next: &mut dyn FnMut() -> u64) -> pb::Event {",
           "    use pb::event::Kind;",
           "    fn text(next: &mut dyn FnMut() -> u64) -> String {",
           r"""        let pieces = ["", "a", "run-1", "\u{e9}", "{\"k\": [1, 2]}", "\u{1F600}", " ", "x\ny"];""",
           "        (0..next() % 4).map(|_| pieces[(next() % pieces.len() as u64) as usize]).collect()",
           "    }",
           f"    let kind = match next() % {len(kinds(proto)) + 1} {{"]
    for i, k in enumerate(kinds(proto)):
        name = k.message.name
        values = []
        for f in k.message.fields:
            if f.oneof:
                continue
            inner = embedded(proto, f)
            if inner is not None:
                inner_values = ", ".join(f"{g.name}: {_random_value(proto, g)}" for g in inner.fields)
                present = f"Some(pb::{inner.name} {{ {inner_values} }})"
                values.append(f"{f.name}: match next() % 2 {{ 0 => None, _ => {present} }}")
                continue
            values.append(f"{f.name}: {_random_value(proto, f)}")
        for oneof in _oneofs(k.message):
            module = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
            members = k.message.oneof(oneof)
            arms = " ".join(f"{j + 1} => Some(pb::{module}::{_ref_pascal(oneof)}::{_ref_pascal(f.name)}(text(next))),"
                            for j, f in enumerate(members[:-1]))
            last = members[-1]
            values.append(f"{oneof}: match next() % {len(members) + 1} {{ 0 => None, {arms} "
                          f"_ => Some(pb::{module}::{_ref_pascal(oneof)}::{_ref_pascal(last.name)}(text(next))) }}")
        body = f" {{ {', '.join(values)} }}" if values else " {}"
        out.append(f"        {i} => Some(Kind::{name}(pb::{name}{body})),")
    envelope = [f for f in proto.message(EVENT).fields if f.oneof != KIND_ONEOF]
    out += ["        _ => None,", "    };",
            "    pb::Event { " + ", ".join(f"{f.name}: {_RANDOM[f.type]}" for f in envelope) + ", kind }",
            "}", ""]
    return out


# ---------------------------------------------------------------- the clients' event builders

def load(root: Path) -> Proto:
    """The proto's shapes, with the fields the clients' builders take by hand (the TOML's
    [event_builders])."""
    proto = load_proto(root)
    raw = tomllib.loads((root / SOURCE).read_text(encoding="utf-8")).get("event_builders", {})
    by_hand = frozenset(raw.get("by_hand", ()))
    known = {f"{m.name}.{f.name}" for m in [proto.message(EVENT), *(k.message for k in kinds(proto))] for f in m.fields}
    for name in sorted(by_hand - known):
        raise SourceError(f"event_builders.by_hand: {name} is not a field of Event or of a kind message")
    proto.by_hand = by_hand
    view = tomllib.loads((root / SOURCE).read_text(encoding="utf-8")).get("record_view", {})
    proto.record_by_hand = frozenset(view.get("by_hand", ()))
    for name in sorted(proto.record_by_hand - {f.name for f in proto.message(RECORD).fields}):
        raise SourceError(f"record_view.by_hand: {name} is not a field of {RECORD}")
    carried(proto)  # refuses a field that cannot be carried
    return proto


def extra_fields(proto: Proto, message: ProtoMessage) -> list[ProtoField]:
    """`message`'s fields its builders take generically: those not in by_hand (scalars only)."""
    found = []
    for f in message.fields:
        if message.name == EVENT and f.oneof == KIND_ONEOF or f"{message.name}.{f.name}" in proto.by_hand:
            continue
        if f.oneof or f.label or f.type not in _PYTHON or f.type.startswith("int"):
            raise SourceError(f"{message.name}.{f.name}: a builder cannot carry a {f.type} "
                              f"{'oneof member' if f.oneof else 'field'} as it is: write its argument by hand "
                              "and list it in [event_builders] by_hand")
        found.append(f)
    return found


def _typed_dict(name: str, base: str, doc: str, fields: list[ProtoField]) -> list[str]:
    out = [f"class {name}({base}, total=False):", f'    """{doc}"""']
    if fields:
        out.append("")
    for f in fields:
        out += comment(f.doc, "    # ") if f.doc else []
        out.append(f"    {f.name}: {_PYTHON[f.type]}")
    return out + ["", ""]


PY_EXTRA_PATH = "client/python/loopwarden/_event_extra.py"


def render_python_extra(proto: Proto) -> str:
    out = [
        "# @generated by `python3 -m tables.gen` from proto/loopwarden/v1/loopwarden.proto: do not edit.",
        '"""The event fields the builders (`_wire.py`, `LoopwardenClient`\'s verbs) and `parse_event` take',
        "generically: every field of Event and of its kind messages not in tables/loopwarden.toml's",
        '[event_builders] by_hand, carried as it is. A new scalar field of the proto lands here."""',
        "from __future__ import annotations",
        "",
        "from typing import TypedDict",
        "",
        "",
    ]
    envelope = extra_fields(proto, proto.message(EVENT))
    out += _typed_dict("EnvelopeExtra", "TypedDict", "Event's fields beyond those every builder names.", envelope)
    for k in kinds(proto):
        out += _typed_dict(f"{k.message.name}Extra", "EnvelopeExtra",
                           f"{k.message.name}'s fields beyond those its builder names (and Event's).",
                           extra_fields(proto, k.message))
    out.append("# Event's generic fields, and each kind's own: field -> proto type (parse_event reads by type).")
    out.append("ENVELOPE_EXTRA: dict[str, str] = {" + ", ".join(f'"{f.name}": "{f.type}"' for f in envelope) + "}")
    out.append("KIND_EXTRA: dict[str, dict[str, str]] = {")
    for k in kinds(proto):
        fields = ", ".join(f'"{f.name}": "{f.type}"' for f in extra_fields(proto, k.message))
        out.append(f'    "{k.name}": {{{fields}}},')
    out += ["}", ""]
    return "\n".join(out)


def _extra_by_name(proto: Proto) -> list[tuple[ProtoField, list[str]]]:
    """Every generic field once per name, with the messages that carry it (Event first)."""
    found: dict[str, tuple[ProtoField, list[str]]] = {}
    for message in [proto.message(EVENT), *(k.message for k in kinds(proto))]:
        for f in extra_fields(proto, message):
            found.setdefault(f.name, (f, []))[1].append(message.name)
    return list(found.values())


_GO = {"string": "string", "bool": "bool", "uint32": "uint32", "uint64": "uint64", "double": "float64",
       "float": "float32"}
_GO_INITIALISMS = {"id": "ID", "json": "JSON", "usd": "USD", "url": "URL", "ttl": "TTL"}


def _go_name(name: str) -> str:
    return "".join(_GO_INITIALISMS.get(part, part.title()) for part in name.split("_"))


def _proto_go_name(name: str) -> str:  # protoc-gen-go's spelling
    return "".join(part.title() for part in name.split("_"))


def _lower_first(name: str) -> str:
    return name[:1].lower() + name[1:]


GO_EXTRA_PATH = "client/go/loopwarden/events_gen.go"


def render_go_extra(proto: Proto) -> str:
    fields = _extra_by_name(proto)
    out = [
        "// Code generated by `python3 -m tables.gen` from proto/loopwarden/v1/loopwarden.proto. DO NOT EDIT.",
        "",
        "package loopwarden",
        "",
        'import pb "github.com/loopwarden/loopwarden/client/go/loopwardenv1"',
        "",
        "// extraFields are the event fields without an option of their own (tables/loopwarden.toml's",
        "// [event_builders]): each has a generated With option and is carried as it is.",
        "type extraFields struct {",
    ]
    out += [f"\t{_lower_first(_go_name(f.name))} {_GO[f.type]}" for f, _ in fields]
    out += ["}", ""]
    for f, messages in fields:
        name = _go_name(f.name)
        where = ", ".join(f"{m}.{f.name}" for m in messages)
        doc = f"With{name} sets {where}" + (f": {f.doc[:1].lower()}{f.doc[1:]}" if f.doc else ".")
        out += comment(doc, "// ", width=100)
        out += [f"func With{name}({_lower_first(name)} {_GO[f.type]}) EventOption {{",
                f"\treturn eventOption(func(f *eventFields) {{ f.extra.{_lower_first(name)} = {_lower_first(name)} }})",
                "}", ""]
    targets = [(EVENT, "envelope", proto.message(EVENT))] + [
        (k.message.name, _lower_first(k.message.name), k.message) for k in kinds(proto)]
    for message_name, method, message in targets:
        own = extra_fields(proto, message)
        out.append(f"// {method} sets {message_name}'s generic fields.")
        if not own:
            out += [f"func (extraFields) {method}(*pb.{message_name}) {{}}", ""]
            continue
        out.append(f"func (x extraFields) {method}(m *pb.{message_name}) {{")
        out += [f"\tm.{_proto_go_name(f.name)} = x.{_lower_first(_go_name(f.name))}" for f in own]
        out += ["}", ""]
    return "\n".join(out)


_NODE = {"string": ("string", "''"), "bool": ("boolean", "false"), "uint32": ("number", "0"),
         "uint64": ("number", "0"), "double": ("number", "0"), "float": ("number", "0")}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


NODE_EVENTS_PATH = "client/node/src/events.js"
NODE_TYPES_EXTRA_PATH = "client/node/src/types.js"


def update_node_types_extra(proto: Proto, text: str) -> str:
    body = ["/**",
            " * The event fields without an option of their own (tables/loopwarden.toml's [event_builders]):",
            " * each is carried as it is into the Event or its kind message.",
            " * @typedef {object} EventExtra"]
    for f, messages in _extra_by_name(proto):
        where = ", ".join(f"{m}.{f.name}" for m in messages)
        tag = f"@property {{{_NODE[f.type][0]}}} [{_camel(f.name)}] {where}" + (f": {f.doc}" if f.doc else "")
        body += comment(tag, " * ")
    body.append(" */")
    return replace(text, "event-extra", body, path=NODE_TYPES_EXTRA_PATH)


def update_node_events(proto: Proto, text: str) -> str:
    body = []
    targets = [(EVENT, "envelope", proto.message(EVENT))] + [
        (k.message.name, _lower_first(_proto_go_name(k.name)), k.message) for k in kinds(proto)]
    for message_name, name, message in targets:
        values = [f"{_camel(f.name)}: opts.{_camel(f.name)} ?? {_NODE[f.type][1]}"
                  for f in extra_fields(proto, message)]
        if values:
            body.append(f"/** {message_name}'s generic fields, from `opts`. @param {{EventExtra}} opts */")
            body.append(f"const {name}Extra = (opts) => ({{ {', '.join(values)} }});")
        else:
            body.append(f"/** {message_name}'s generic fields: none yet. */")
            body.append(f"const {name}Extra = (/** @type {{EventExtra}} */ _opts) => ({{}});")
    return replace(text, "event-extra", body, path=NODE_EVENTS_PATH)


# ---------------------------------------------------------------- fields a record carries

RECORD = "RunRecord"
CALL = "ToolCall"
_CARRIED_RUST = {"bool": "bool", "uint32": "u32", "uint64": "u64", "double": "f64"}


def carried(proto: Proto) -> list[ProtoField]:
    """ToolCall's fields a run's records carry into RunRecord: every RunRecord field not filled
    by hand ([record_view] by_hand), each a ToolCall field of the same name and type."""
    call = {f.name: f for f in proto.message(CALL).fields}
    found = []
    for f in proto.message(RECORD).fields:
        if f.name in proto.record_by_hand:
            continue
        source = call.get(f.name)
        if source is None or source.type != f.type or f.label or f.oneof:
            raise SourceError(f"{RECORD}.{f.name}: not a {CALL} field of the same type, so not carried; fill it "
                              "by hand (inspection.rs) and list it in [record_view] by_hand")
        if f.type not in _CARRIED_RUST:
            raise SourceError(f"{RECORD}.{f.name}: a {f.type} is not carried (numbers and bools are); fill it "
                              "by hand and list it in [record_view] by_hand")
        found.append(source)
    return found


CARRIED_PATH = "core/src/carried_gen.rs"


def render_carried(proto: Proto) -> str:
    fields = carried(proto)
    names = [f.name for f in fields]
    out = [
        "// @generated by `python3 -m tables.gen` from proto/loopwarden/v1/loopwarden.proto: do not edit.",
        "//! The ToolCall fields a run's records carry into InspectRun's RunRecord: every RunRecord field",
        "//! not in tables/loopwarden.toml's [record_view] by_hand. A record keeps them in its rare extras",
        "//! (intern.rs: nothing while they are all zero), stores them (state.proto's Carried) and",
        "//! inspection.rs shows them.",
        "",
        "use crate::state_pb as stored;",
        "",
        "#[derive(Clone, Copy, Debug, Default, PartialEq)]",
        "pub struct Carried {",
    ]
    for f in fields:
        out += comment(f.doc, "    /// ") if f.doc else []
        out.append(f"    pub {f.name}: {_CARRIED_RUST[f.type]},")
    this = ", ".join(f"{n}: self.{n}" for n in names)
    other = ", ".join(f"{n}: m.{n}" for n in names)
    out += [
        "}",
        "",
        "impl Carried {",
        "    pub fn is_empty(&self) -> bool {",
        "        *self == Carried::default()",
        "    }",
        "",
        "    /// The stored form; None while empty, so a record that carries nothing stores no bytes for it.",
        "    pub fn stored(&self) -> Option<stored::Carried> {",
        f"        (!self.is_empty()).then_some(stored::Carried {{ {this} }})",
        "    }",
        "",
        "    pub fn from_stored(m: Option<&stored::Carried>) -> Carried {",
        f"        m.map_or_else(Carried::default, |{'m' if names else '_m'}| Carried {{ {other} }})",
        "    }",
        "}",
        "",
    ]
    return "\n".join(out).replace("{  }", "{}").replace("pub struct Carried {\n}", "pub struct Carried {}")


STATE_PROTO_PATH = "core/proto/loopwarden/state/v1/state.proto"


def update_state_proto(proto: Proto, text: str) -> str:
    """state.proto's Carried: each carried field with its ToolCall field number (stable as the
    wire's is)."""
    # The blank line detaches the begin marker: it is no doc comment of the generated code.
    body = ["", "// The ToolCall fields the record carries into InspectRun (core/src/carried_gen.rs).",
            "message Carried {"]
    for f in carried(proto):
        body.append(f"  {f.type} {f.name} = {f.number};")
    body.append("}")
    return replace(text, "carried", body, path=STATE_PROTO_PATH)


INSPECTION_PATH = "core/src/python/inspection.rs"


def update_inspection_carried(proto: Proto, text: str) -> str:
    body = [f"                {f.name}: r.carried().{f.name}," for f in carried(proto)]
    return replace(text, "record-view-carried", body, path=INSPECTION_PATH)
