"""A config's new JSON written as edits to the file's own text, not as a re-serialised file.

A person's settings file is theirs: its indentation, key order, line breaks and compact one-line
arrays stay as they wrote them. Only the values that change are touched: members and items
loopwarden adds are inserted in the indentation of their siblings (or the file's, one level in),
a new key first in its object, on lines of its own, a new array item last. Ones it takes out are
cut with exactly the separator an insertion adds, so `--remove` after an install gives back the
file byte for byte.

`patch` parses the old text with the offsets of every value, compares the old and new JSON, and
edits the spans that differ; a change it cannot express as such edits re-renders just that value.
Its result is checked by parsing it: if it does not hold the wanted JSON, the caller re-renders the
whole file (files.render), which is correct if less polite.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_SPACE = re.compile(r"[ \t\n\r]*")
_BLANKS = re.compile(r"[ \t]*")
_DECODER = json.JSONDecoder()


@dataclass
class _Node:
    start: int
    end: int
    value: object
    # Objects: (key, offset of the key's opening quote, node); arrays: (None, offset, node).
    children: list[tuple[str | None, int, _Node]] = field(default_factory=list)
    kind: str = "scalar"  # "object", "array" or "scalar"


def _skip(text: str, index: int) -> int:
    return _SPACE.match(text, index).end()  # type: ignore[union-attr]


def _parse(text: str, index: int) -> _Node:
    index = _skip(text, index)
    char = text[index:index + 1]
    if char == "{":
        node = _Node(index, index, {}, kind="object")
        cursor = _skip(text, index + 1)
        if text[cursor] == "}":
            node.end = cursor + 1
            return node
        while True:
            key_start = cursor
            key, cursor = json.decoder.scanstring(text, cursor + 1)  # type: ignore[attr-defined]
            cursor = _skip(text, cursor)
            assert text[cursor] == ":"
            child = _parse(text, cursor + 1)
            node.children.append((key, key_start, child))
            node.value[key] = child.value  # type: ignore[index]
            cursor = _skip(text, child.end)
            if text[cursor] == "}":
                node.end = cursor + 1
                return node
            assert text[cursor] == ","
            cursor = _skip(text, cursor + 1)
    if char == "[":
        node = _Node(index, index, [], kind="array")
        cursor = _skip(text, index + 1)
        if text[cursor] == "]":
            node.end = cursor + 1
            return node
        while True:
            child = _parse(text, cursor)
            node.children.append((None, child.start, child))
            node.value.append(child.value)  # type: ignore[attr-defined]
            cursor = _skip(text, child.end)
            if text[cursor] == "]":
                node.end = cursor + 1
                return node
            assert text[cursor] == ","
            cursor = _skip(text, cursor + 1)
    value, end = _DECODER.raw_decode(text, index)
    return _Node(index, end, value)


def _line_indent(text: str, offset: int) -> str:
    line_start = text.rfind("\n", 0, offset) + 1
    return _BLANKS.match(text, line_start).group(0)  # type: ignore[union-attr]


class _Editor:
    def __init__(self, text: str, unit: str) -> None:
        self.text = text
        self.unit = unit
        self.multiline_file = "\n" in text.strip()
        self.newline = "\r\n" if "\r\n" in text else "\n"  # the file's own line ends for the lines added
        self.edits: list[tuple[int, int, int, str]] = []  # (start, end, order, replacement)

    def edit(self, start: int, end: int, replacement: str) -> None:
        self.edits.append((start, end, len(self.edits), replacement))

    def apply(self) -> str:
        text = self.text
        for start, end, _, replacement in sorted(self.edits, key=lambda e: (e[0], e[2]), reverse=True):
            text = text[:start] + replacement + text[end:]
        return text

    # -- rendering ---------------------------------------------------------------------------------
    def _multiline(self, node: _Node) -> bool:
        if node.children:
            return "\n" in self.text[node.start:node.children[0][1]]
        return self.multiline_file

    def _child_indent(self, node: _Node) -> str:
        if node.children and self._multiline(node):
            first = node.children[0][1]
            return self.text[self.text.rfind("\n", 0, first) + 1:first]
        return _line_indent(self.text, node.start) + self.unit

    def _colon(self, node: _Node) -> str:
        if node.kind == "object" and node.children:
            key_start, child = node.children[0][1], node.children[0][2]
            key_end = json.decoder.scanstring(self.text, key_start + 1)[1]  # type: ignore[attr-defined]
            return self.text[key_end:child.start]
        return ": "

    def render(self, value: object, indent: str, multiline: bool) -> str:
        if not multiline:
            return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        return json.dumps(value, indent=self.unit, ensure_ascii=False).replace("\n", self.newline + indent)

    def _member(self, node: _Node, key: str | None, value: object, indent: str, multiline: bool) -> str:
        rendered = self.render(value, indent, multiline)
        if key is None:
            return rendered
        return json.dumps(key, ensure_ascii=False) + self._colon(node) + rendered

    def replace(self, node: _Node, value: object) -> None:
        multiline = "\n" in self.text[node.start:node.end] or (
            node.kind == "scalar" and self.multiline_file and isinstance(value, (dict, list)) and bool(value))
        self.edit(node.start, node.end, self.render(value, _line_indent(self.text, node.start), multiline))

    # -- containers --------------------------------------------------------------------------------
    def container(self, node: _Node, kept: list[int], added: list[tuple[str | None, object]]) -> None:
        """Keep the children at `kept` (original indexes, in order), drop the others, append `added`."""
        children = node.children
        multiline = self._multiline(node)
        indent = self._child_indent(node)
        if not kept and children and not added:  # every child goes: the empty container, `{}` or `[]`
            self.edit(node.start + 1, node.end - 1, "")
            return
        separator = ("," + self.newline + indent) if multiline else ", "
        pieces = [self._member(node, key, value, indent, multiline) for key, value in added]
        if not kept:  # an empty container, or one whose children all go: its inside is the added ones
            closing = self.newline + _line_indent(self.text, node.start) if multiline else ""
            opening = self.newline + indent if multiline else ""
            self.edit(node.start + 1, node.end - 1, opening + separator.join(pieces) + closing)
            return
        last_kept = kept[-1] if kept else None
        for index in range(len(children)):
            if index in kept:
                continue
            if last_kept is not None and index > last_kept:
                continue  # the trailing run is cut below, as one span
            self.edit(children[index][1], children[index + 1][1], "")
        if last_kept is not None and last_kept < len(children) - 1:
            self.edit(children[last_kept][2].end, children[-1][2].end, "")
        if not pieces:
            return
        if node.kind == "object":
            # New members go first, each on lines of its own: the diff is only added lines (appending
            # would add a comma to the person's last line), and the order of keys means nothing to a host.
            first = children[0][1]
            if multiline:
                line_start = self.text.rfind("\n", 0, first) + 1
                self.edit(line_start, line_start, "".join(indent + piece + "," + self.newline for piece in pieces))
            else:
                self.edit(first, first, "".join(piece + ", " for piece in pieces))
        else:  # new items go last: a person's hooks of an event keep coming first
            self.edit(children[-1][2].end, children[-1][2].end, "".join(separator + piece for piece in pieces))

    def diff(self, node: _Node, new: object) -> None:
        old = node.value
        if old == new:
            return
        if node.kind == "object" and isinstance(new, dict):
            keys = [key for key, _, _ in node.children]
            if len(set(keys)) != len(keys):  # duplicate keys: no span is "the" value
                self.replace(node, new)
                return
            common = [key for key in new if key in old]  # type: ignore[operator]
            added = [key for key in new if key not in old]  # type: ignore[operator]
            in_old_order = [key for key in keys if key in new]
            if common != in_old_order:
                self.replace(node, new)
                return
            kept = [index for index, key in enumerate(keys) if key in new]
            self.container(node, kept, [(key, new[key]) for key in added])
            for key, _, child in node.children:
                if key in new:
                    self.diff(child, new[key])
            return
        if node.kind == "array" and isinstance(new, list):
            old_items = [child.value for _, _, child in node.children]
            if new[:len(old_items)] == old_items:
                self.container(node, list(range(len(old_items))), [(None, item) for item in new[len(old_items):]])
                return
            kept = []
            position = 0
            for index, item in enumerate(old_items):
                if position < len(new) and new[position] == item:
                    kept.append(index)
                    position += 1
            if position == len(new):  # the new list is the old one with items taken out
                self.container(node, kept, [])
                return
            if len(new) == len(old_items):
                for (_, _, child), item in zip(node.children, new):
                    self.diff(child, item)
                return
        self.replace(node, new)


def patch(text: str, new: object, unit: int | str) -> str | None:
    """`text` edited to hold `new`; None when the text cannot be parsed here (the caller re-renders)."""
    try:
        root = _parse(text, 0)
    except (ValueError, AssertionError, IndexError):
        return None
    editor = _Editor(text, unit if isinstance(unit, str) else " " * unit)
    editor.diff(root, new)
    return editor.apply()
