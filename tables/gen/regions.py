"""Generated regions inside hand-written files, between a begin and an end marker line."""
from __future__ import annotations

import re
import textwrap


class RegionError(ValueError):
    pass


def replace(text: str, name: str, body: list[str], *, path: str) -> str:
    """`text` with the lines between the markers of region `name` replaced by `body`.

    A marker is any line containing `generated:NAME:begin` / `generated:NAME:end` (in whatever
    comment syntax the file uses); the marker lines themselves are kept as they are.
    """
    pattern = re.compile(
        rf"(^[^\n]*generated:{re.escape(name)}:begin[^\n]*\n)(.*?)(^[^\n]*generated:{re.escape(name)}:end)",
        re.S | re.M)
    found = pattern.findall(text)
    if len(found) != 1:
        raise RegionError(f"{path}: expected one region generated:{name} (begin and end markers), found {len(found)}")
    inner = "".join(line + "\n" for line in body)
    return pattern.sub(lambda m: m.group(1) + inner + m.group(3), text)


def comment(text: str, prefix: str, *, first: str | None = None, width: int = 100) -> list[str]:
    """`text` wrapped to `width` columns as comment lines: each starts with `prefix` (the first
    with `first` when given, e.g. helm-docs' `# -- `)."""
    head = prefix if first is None else first
    lines = textwrap.wrap(text, width - max(len(prefix), len(head)))
    return [(head if i == 0 else prefix) + line for i, line in enumerate(lines)]
