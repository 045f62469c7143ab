"""The line of every key of a JSON5 text, by the dotted path the loader names it with.

The JSON5 parser gives values without positions, so a refused key's line is found by walking the
text once more: comments, strings (both quotes, escapes, line continuations), bare keys, numbers
and literals, nested objects and arrays with trailing commas. Only text the parser has already
accepted is walked (it runs on refusal, after a successful parse), so this walker needs no error
handling of its own: it stops quietly at anything it does not expect.

Paths are spelled as the loader spells them: `a.b.c` for object keys (a key at the top level
alone), `a[0]` for array items, and a key that is not a plain identifier also as `a["some key"]`
(the loader's spelling of such agent ids).
"""
from __future__ import annotations

import json
import re

_PLAIN = re.compile(r"[A-Za-z0-9_-]+")
_ATOM = re.compile(r"[^\s,:\]\}/]+")


class _Walker:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.line = 1
        self.lines: dict[str, int] = {}

    def _advance(self, to: int) -> None:
        self.line += self.text.count("\n", self.at, to)
        self.at = to

    def _skip(self) -> None:
        """Whitespace and comments."""
        text = self.text
        while self.at < len(text):
            char = text[self.at]
            if char.isspace() or char == "\ufeff":
                self._advance(self.at + 1)
            elif text.startswith("//", self.at):
                end = text.find("\n", self.at)
                self._advance(len(text) if end < 0 else end)
            elif text.startswith("/*", self.at):
                end = text.find("*/", self.at + 2)
                self._advance(len(text) if end < 0 else end + 2)
            else:
                return

    def _string(self) -> str:
        quote = self.text[self.at]
        out = []
        index = self.at + 1
        while index < len(self.text) and self.text[index] != quote:
            if self.text[index] == "\\":
                out.append(self.text[index:index + 2])
                index += 2
            else:
                out.append(self.text[index])
                index += 1
        raw = "".join(out)
        self._advance(min(index + 1, len(self.text)))
        try:  # the common escapes, as the parser reads them; anything odd stays as written
            return json.loads('"' + raw.replace('"', '\\"').replace("\\'", "'") + '"')
        except ValueError:
            return raw

    def _key(self) -> str:
        if self.text[self.at] in "\"'":
            return self._string()
        match = _ATOM.match(self.text, self.at)
        end = match.end() if match else self.at + 1
        key = self.text[self.at:end]
        self._advance(end)
        return key

    def value(self, path: str) -> None:
        self._skip()
        if self.at >= len(self.text):
            return
        char = self.text[self.at]
        if char == "{":
            self._advance(self.at + 1)
            while True:
                self._skip()
                if self.at >= len(self.text) or self.text[self.at] == "}":
                    self._advance(self.at + 1)
                    return
                line = self.line
                key = self._key()
                for child in _children(path, key):
                    self.lines.setdefault(child, line)
                self._skip()
                if self.text[self.at:self.at + 1] != ":":
                    return
                self._advance(self.at + 1)
                self.value(_children(path, key)[0])
                self._skip()
                if self.text[self.at:self.at + 1] == ",":
                    self._advance(self.at + 1)
        elif char == "[":
            self._advance(self.at + 1)
            index = 0
            while True:
                self._skip()
                if self.at >= len(self.text) or self.text[self.at] == "]":
                    self._advance(self.at + 1)
                    return
                self.lines.setdefault(f"{path}[{index}]", self.line)
                self.value(f"{path}[{index}]")
                index += 1
                self._skip()
                if self.text[self.at:self.at + 1] == ",":
                    self._advance(self.at + 1)
        elif char in "\"'":
            self._string()
        else:
            match = _ATOM.match(self.text, self.at)
            self._advance(match.end() if match else self.at + 1)


def _children(path: str, key: str) -> list[str]:
    """The spellings of `key` under `path`, the dotted one first."""
    dotted = key if not path else f"{path}.{key}"
    if _PLAIN.fullmatch(key) or not path:
        return [dotted]
    return [dotted, f"{path}[{json.dumps(key, ensure_ascii=False)}]"]


def key_lines(text: str) -> dict[str, int]:
    """{dotted path: line (1-based) where its key, or its array item, starts} for `text`."""
    walker = _Walker(text)
    try:
        walker.value("")
    except (IndexError, RecursionError):  # past the end, or nested deeper than is worth a line
        pass
    return walker.lines
