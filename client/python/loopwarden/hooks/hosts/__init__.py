"""The hook hosts loopwarden serves: one module each, registered in HOSTS (the one list).

A host module defines a `HookHost` subclass (hooks/host.py: its input parsing, its answer format,
its capabilities) and one instance named `HOST`. Registering it here gives it the daemon's endpoint
`/v1/hooks/NAME`, `loopwarden hook NAME`, `loopwarden-hook NAME`'s daemon-down answers (generated:
`python -m tables.gen`) and, when it has an `install` spec, `loopwarden install-hooks NAME`.
"""
from __future__ import annotations

import importlib

from ..host import HookHost

# Module names under hooks/hosts/, in the order hosts are listed (help texts, docs).
MODULES = ("claude_code", "codex", "gemini_cli", "cursor")

HOSTS: tuple[HookHost, ...] = tuple(importlib.import_module(f"{__name__}.{module}").HOST for module in MODULES)
_BY_NAME = {host.name: host for host in HOSTS}


def host(name: str) -> HookHost:
    """The registered host called `name`; KeyError naming the known ones otherwise."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no hook host {name!r}; known: {', '.join(_BY_NAME)}") from None


def names() -> tuple[str, ...]:
    return tuple(_BY_NAME)
