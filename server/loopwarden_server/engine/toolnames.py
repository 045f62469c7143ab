"""Tool-name normalisation (spec section 3): every comparison uses the normalised name."""
from __future__ import annotations

_ALIASES = {"bash": "exec", "apply-patch": "apply_patch"}


def normalize_tool_name(raw: str) -> str:
    """Trim, lower-case, fold known aliases; an empty name becomes "tool"."""
    name = raw.strip().lower()
    if not name:
        return "tool"
    return _ALIASES.get(name, name)
