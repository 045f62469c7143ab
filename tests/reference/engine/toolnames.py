"""Tool-name normalisation (spec section 3): every comparison uses the normalised name.

Before the documented rules (trim, lower-case, aliases), a name is folded to its Unicode NFKC
form and stripped of format characters (zero-width spaces and joiners, the BOM, bidi marks:
category Cf), so `ｒｅａｄ` and `re\u200bad` are the tool `read`. Otherwise rotating spellings of one
tool would dodge every per-tool count.
"""
from __future__ import annotations

import unicodedata

_ALIASES = {"bash": "exec", "apply-patch": "apply_patch"}
_normalize = unicodedata.normalize
_category = unicodedata.category


def _fold_unicode(raw: str) -> str:
    folded = _normalize("NFKC", raw)
    return "".join(char for char in folded if _category(char) != "Cf")


def normalize_tool_name(raw: str) -> str:
    """NFKC, drop format characters, trim, lower-case, fold known aliases; empty becomes "tool"."""
    if not raw.isascii():
        raw = _fold_unicode(raw)
    name = raw.strip().lower()
    if not name:
        return "tool"
    return _ALIASES.get(name, name)
