"""The documentation holds together: README.md is a front door of at most 250 lines that links every
page of the manual in docs/, every relative link of README.md, docs/ and the per-package READMEs
resolves (a file that exists, and a heading that exists for a `#anchor`), and the README defines
the terms it was once measured using before their definition."""
from __future__ import annotations

import os
import pathlib
import re
import unicodedata

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
SKIPPED_DIRS = {".git", ".venv", "node_modules", ".pytest_cache", "target", ".hypothesis"}
MAX_README_LINES = 250

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)


def markdown_files() -> list[pathlib.Path]:
    """README.md, every page under docs/, and every README.md of the repository's packages."""
    found = {README, *DOCS.rglob("*.md")}
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [name for name in subfolders if name not in SKIPPED_DIRS]
        if "README.md" in files:
            found.add(pathlib.Path(folder) / "README.md")
    return sorted(found)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code spans blanked out."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, INLINE_CODE.sub("", line)))
    return lines


def links(path: pathlib.Path) -> list[tuple[int, str]]:
    return [(number, match.group(1)) for number, line in prose_lines(path.read_text(encoding="utf-8"))
            for match in LINK.finditer(line)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup and punctuation dropped, lower case, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = text.replace("`", "").lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(path: pathlib.Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    seen: dict[str, int] = {}
    found = set(HTML_ANCHOR.findall(text))
    for _number, line in prose_lines(text.replace("`", "\x00")):  # keep code spans in headings
        heading = HEADING.match(line.replace("\x00", "`"))
        if heading is None:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def is_external(target: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith("//")


def broken_links(path: pathlib.Path) -> list[str]:
    broken = []
    for number, target in links(path):
        if is_external(target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(REPO)}:{number}: {target}"
        if not resolved.exists():
            broken.append(f"{where} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{where} (no heading #{anchor} in {resolved.relative_to(REPO)})")
    return broken


def linked_pages(path: pathlib.Path) -> set[pathlib.Path]:
    """The files under docs/ that `path` links to (relative links only)."""
    pages = set()
    for _number, target in links(path):
        file_part = target.partition("#")[0]
        if file_part and not is_external(target):
            resolved = (path.parent / file_part).resolve()
            if resolved.is_dir():
                resolved = resolved / "README.md"
            if DOCS in resolved.parents and resolved.exists():
                pages.add(resolved)
    return pages


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_relative_link_resolves(path):
    """Every relative link (and image) names a file that exists and, for `#anchor`, a heading in it."""
    assert [] == broken_links(path)


def test_the_checker_sees_a_broken_link_and_a_broken_anchor(tmp_path):
    """The check is real: a missing file and a missing heading are both reported, code is skipped."""
    (tmp_path / "there.md").write_text("# A heading: with `code`\n")
    page = tmp_path / "page.md"
    page.write_text("[a](there.md#a-heading-with-code) [b](missing.md) [c](there.md#nope)\n"
                    "`[d](ignored.md)`\n```\n[e](ignored.md)\n```\n")
    global REPO  # report paths relative to the temporary tree
    saved, REPO = REPO, tmp_path
    try:
        broken = broken_links(page)
    finally:
        REPO = saved
    assert ["page.md:1: missing.md (no such file)",
            "page.md:1: there.md#nope (no heading #nope in there.md)"] == broken


def test_readme_is_a_front_door_of_at_most_250_lines():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail to docs/"


def test_readme_links_every_page_of_the_manual():
    """At least four pages under docs/, and README.md links each of them."""
    pages = {path.resolve() for path in DOCS.rglob("*.md")}
    assert len(pages) >= 4
    assert [] == sorted(str(page.relative_to(REPO)) for page in pages - linked_pages(README))


def test_every_manual_page_points_at_the_glossary():
    """Each page of docs/ (but the glossary) links the glossary, where its terms are defined."""
    glossary = (DOCS / "glossary.md").resolve()
    missing = [str(page.relative_to(REPO)) for page in sorted(DOCS.rglob("*.md"))
               if page.resolve() != glossary and glossary not in linked_pages(page)]
    assert [] == missing


# A term the README once used before defining it, and words its definition must sit next to.
DEFINED_TERMS = {
    r"OpenClaw": "open-source agent",
    r"(?<![-\w])W(?![-\w])": "warning threshold",
    r"(?<![-\w])C(?![-\w])": "critical threshold",
    r"\bdecade\b": "multiple of ten",
    r"\bannounced\b": "shown to the agent",
    r"\bdetector\b": "the rule that",
}


@pytest.mark.parametrize("term", DEFINED_TERMS)
def test_readme_defines_a_term_where_it_first_uses_it(term):
    """The first use of each term in the README's prose is where it is defined."""
    prose = "\n".join(line for _number, line in prose_lines(README.read_text(encoding="utf-8")))
    first = re.search(term, prose)
    assert first is not None, f"{term} is not used"
    around = prose[max(0, first.start() - 250):first.end() + 250]
    assert DEFINED_TERMS[term] in around, f"the first {first.group(0)!r} is not where it is defined"
