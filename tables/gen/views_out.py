"""The views InspectRun gives, generated from their proto messages (proto_source.py).

A view message's scalar fields are carried as they are from the core's view object to the
message (the daemon) and from the message to each client's view (Python, Go, Node), so a field
added to the message is in every view once the core fills it. What fills it, the core's reading
of its own state, stays hand-written (core/src/python/inspection.rs).
"""
from __future__ import annotations

from .proto_source import Proto, ProtoMessage
from .regions import comment, replace
from .source import SourceError

RECORD = "RunRecord"

_RUST = {"string": "String", "bool": "bool", "uint32": "u32", "uint64": "u64", "double": "f64"}
_PYTHON = {"string": "str", "bool": "bool", "uint32": "int", "uint64": "int", "double": "float"}
_GO = {"string": "string", "bool": "bool", "uint32": "uint32", "uint64": "uint64", "double": "float64"}
_NODE = {"string": "string", "bool": "boolean", "uint32": "number", "uint64": "number", "double": "number"}
_GO_INITIALISMS = {"id": "ID", "json": "JSON", "usd": "USD", "url": "URL"}


def _view(proto: Proto, name: str) -> ProtoMessage:
    message = proto.message(name)
    for f in message.fields:
        if f.label or f.oneof or f.type not in _RUST:
            raise SourceError(f"{name}.{f.name}: a view carries plain scalars only ({f.type}); carry it by hand")
    return message


def _doc(text: str) -> str:
    return text or "(undocumented in the proto)"


def _go_name(name: str) -> str:
    return "".join(_GO_INITIALISMS.get(part, part.title()) for part in name.split("_"))


def _proto_go_name(name: str) -> str:  # protoc-gen-go's spelling (no initialisms)
    return "".join(part.title() for part in name.split("_"))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


_MARK = "(proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)"

# ---------------------------------------------------------------- the core's RecordView

INSPECTION_PATH = "core/src/python/inspection.rs"


def update_inspection(proto: Proto, text: str) -> str:
    body = []
    for f in _view(proto, RECORD).fields:
        body += comment(_doc(f.doc), "    /// ")
        body.append(f"    pub(super) {f.name}: {_RUST[f.type]},")
    return replace(text, "record-view", body, path=INSPECTION_PATH)


PYI_PATH = "core/loopwarden_core.pyi"


def update_pyi(proto: Proto, text: str) -> str:
    body = [f"    {f.name}: {_PYTHON[f.type]}" for f in _view(proto, RECORD).fields]
    return replace(text, "record-view", body, path=PYI_PATH)


# ---------------------------------------------------------------- the daemon: view -> message

CONVERT_PATH = "server/loopwarden_server/transport/convert.py"


def update_convert(proto: Proto, text: str) -> str:
    fields = _view(proto, RECORD).fields
    args = ", ".join(f"{f.name}=view.{f.name}" for f in fields)
    body = ["def run_record(view: RecordView) -> pb.RunRecord:",
            f'    """The core\'s view of one record as {RECORD}: every field as it is."""',
            *_wrap_call("    return pb.RunRecord(", args, ")")]
    return replace(text, "run-record", body, path=CONVERT_PATH)


def _wrap_call(head: str, args: str, tail: str, width: int = 120) -> list[str]:
    """`head args tail`, the arguments wrapped under the opening parenthesis."""
    indent = " " * len(head)
    lines, line = [], head
    for i, arg in enumerate(args.split(", ")):
        piece = arg + ("," if i < len(args.split(", ")) - 1 else tail)
        candidate = line + ("" if line == head or line == indent else " ") + piece
        if len(candidate) > width and line not in (head, indent):
            lines.append(line)
            line = indent + piece
        else:
            line = candidate
    lines.append(line)
    return lines


# ---------------------------------------------------------------- the Python client

TYPES_PATH = "client/python/loopwarden/types.py"


def update_types(proto: Proto, text: str) -> str:
    body = []
    for f in _view(proto, RECORD).fields:
        body += comment(_doc(f.doc), "    # ")
        body.append(f"    {f.name}: {_PYTHON[f.type]}")
    return replace(text, "run-record", body, path=TYPES_PATH)


WIRE_PATH = "client/python/loopwarden/_wire.py"


def update_wire(proto: Proto, text: str) -> str:
    args = ", ".join(f"{f.name}=message.{f.name}" for f in _view(proto, RECORD).fields)
    body = ["def run_record_from_message(message: pb.RunRecord) -> RunRecord:",
            *_wrap_call("    return RunRecord(", args, ")")]
    return replace(text, "run-record", body, path=WIRE_PATH)


# ---------------------------------------------------------------- Go

GO_PATH = "client/go/loopwarden/types.go"


def update_go(proto: Proto, text: str) -> str:
    fields = _view(proto, RECORD).fields
    # A blank line after the begin marker keeps it out of the type's doc comment.
    struct = ["", "// RunRecord is one entry of a run's history.", "type RunRecord struct {"]
    for f in fields:
        doc = _doc(f.doc)
        struct += comment(f"{_go_name(f.name)} is {doc[:1].lower()}{doc[1:]}", "\t// ", width=96)
        struct.append(f"\t{_go_name(f.name)} {_GO[f.type]}")
    struct += ["}", ""]  # gofmt: a blank line before the end marker
    text = replace(text, "run-record", struct, path=GO_PATH)
    width = max(len(_go_name(f.name)) for f in fields) + 1  # gofmt aligns the values
    convert = ["func runRecordFromMessage(m *pb.RunRecord) RunRecord {", "\treturn RunRecord{"]
    convert += [f"\t\t{(_go_name(f.name) + ':').ljust(width)} m.Get{_proto_go_name(f.name)}()," for f in fields]
    convert += ["\t}", "}", ""]
    return replace(text, "run-record-from-message", convert, path=GO_PATH)


# ---------------------------------------------------------------- Node

NODE_TYPES_PATH = "client/node/src/types.js"
NODE_INSPECTION_PATH = "client/node/src/inspection.js"


def update_node_types(proto: Proto, text: str) -> str:
    body = ["/**", " * One entry of a run's history.", " * @typedef {object} RunRecord"]
    for f in _view(proto, RECORD).fields:
        body += comment(f"@property {{{_NODE[f.type]}}} {_camel(f.name)} {_doc(f.doc)}", " * ")
    body.append(" */")
    return replace(text, "run-record", body, path=NODE_TYPES_PATH)


def update_node_inspection(proto: Proto, text: str) -> str:
    values = []
    for f in _view(proto, RECORD).fields:
        value = f"message.{_camel(f.name)}"
        values.append(f"{_camel(f.name)}: {'Number(' + value + ')' if f.type == 'uint64' else value}")
    body = ["/** @param {any} message @returns {RunRecord} */",
            "function runRecordFromMessage(message) {",
            "  return {",
            *[f"    {value}," for value in values],
            "  };",
            "}"]
    return replace(text, "run-record", body, path=NODE_INSPECTION_PATH)
