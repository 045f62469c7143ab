"""loopwarden's hook entries merged into a host's config, or taken out of it, leaving everything else
as it was: other keys, other events, other hooks of the same event, and their order.

An entry is loopwarden's when its command runs loopwarden (hosts.is_loopwarden_command). Installing
replaces loopwarden's entry of an event in place, keeping keys a person added to it (a
`statusMessage`; `onFailure` and Cursor's `failClosed` are --fail-closed's to set or clear), or
appends one; removing takes out only loopwarden's entries, and the matcher groups and events they
leave empty. Both work on a copy and never change their input; a config of the wrong shape raises
ConfigShapeError naming the field.
"""
from __future__ import annotations

import copy
from typing import Literal, overload

from .hosts import Event, Host, is_loopwarden_command


class ConfigShapeError(ValueError):
    """The config is JSON, but not shaped as the host reads it: nothing is changed."""


def _ours(handler: object) -> bool:
    return isinstance(handler, dict) and is_loopwarden_command(handler.get("command"))


@overload
def _hooks_of(config: object, *, create: Literal[True]) -> dict: ...
@overload
def _hooks_of(config: object, *, create: bool) -> dict | None: ...
def _hooks_of(config: object, *, create: bool) -> dict | None:
    if not isinstance(config, dict):
        raise ConfigShapeError("the file holds a JSON " + type(config).__name__ + ", not an object")
    hooks = config.get("hooks")
    if hooks is None:
        if not create:
            return None
        hooks = config["hooks"] = {}
    if not isinstance(hooks, dict):
        raise ConfigShapeError(f"`hooks` is a JSON {type(hooks).__name__}, not an object of events")
    return hooks


def _entries_of(hooks: dict, event: str) -> list:
    entries = hooks[event]
    if not isinstance(entries, list):
        raise ConfigShapeError(f"`hooks.{event}` is a JSON {type(entries).__name__}, not a list")
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ConfigShapeError(f"`hooks.{event}[{index}]` is a JSON {type(entry).__name__}, not an object")
    return entries


def _handlers_of(group: dict, where: str) -> list:
    handlers = group.get("hooks", [])
    if not isinstance(handlers, list):
        raise ConfigShapeError(f"`{where}.hooks` is a JSON {type(handlers).__name__}, not a list")
    return handlers


def check_shape(host: Host, config: object) -> None:
    """Raise ConfigShapeError for a config loopwarden could not merge into safely."""
    hooks = _hooks_of(config, create=False)
    if hooks is None:
        return
    for event in hooks:
        entries = _entries_of(hooks, event)
        if host.grouped:
            for index, group in enumerate(entries):
                _handlers_of(group, f"hooks.{event}[{index}]")


def _strip_event(host: Host, hooks: dict, event: str) -> None:
    """Take loopwarden's entries out of one event, and the groups and event they leave empty."""
    entries = _entries_of(hooks, event)
    kept = []
    for index, entry in enumerate(entries):
        if not host.grouped:
            if not _ours(entry):
                kept.append(entry)
            continue
        handlers = _handlers_of(entry, f"hooks.{event}[{index}]")
        others = [handler for handler in handlers if not _ours(handler)]
        if len(others) == len(handlers):
            kept.append(entry)
        elif others:
            kept.append({**entry, "hooks": others})
    if kept:
        hooks[event] = kept
    elif entries:  # emptied by loopwarden's removal (an event the person left empty stays)
        del hooks[event]


def remove(host: Host, config: dict) -> dict:
    """A copy of `config` without loopwarden's entries."""
    result = copy.deepcopy(config)
    check_shape(host, result)
    hooks = _hooks_of(result, create=False)
    if hooks is None:
        return result
    for event in list(hooks):
        _strip_event(host, hooks, event)
    if not hooks and config.get("hooks"):  # loopwarden's were the only hooks
        del result["hooks"]
    return result


def _managed_keys(host: Host) -> set[str]:
    """The keys of an entry that loopwarden decides; any other key a person added to it stays."""
    keys = {"command", "type", "timeout"}
    if host.fail_closed_key is not None:  # set by --fail-closed, taken out without it
        keys.add(host.fail_closed_key[0])
    return keys


def _merged(host: Host, old: dict, new: dict) -> dict:
    """loopwarden's entry, keeping the keys a person added to the entry it replaces."""
    managed = _managed_keys(host)
    return {**new, **{key: value for key, value in old.items() if key not in managed and key not in new}}


def _install_event(host: Host, hooks: dict, event: Event, handler: dict) -> None:
    if event.name not in hooks:
        hooks[event.name] = []
    entries = _entries_of(hooks, event.name)
    if not host.grouped:
        positions = [index for index, entry in enumerate(entries) if _ours(entry)]
        if not positions:
            entries.append(handler)
            return
        entries[positions[0]] = _merged(host, entries[positions[0]], handler)
        hooks[event.name] = [entry for index, entry in enumerate(entries) if index not in positions[1:]]
        return
    group_of_ours = None
    for index, group in enumerate(entries):
        if any(_ours(item) for item in _handlers_of(group, f"hooks.{event.name}[{index}]")):
            group_of_ours = index
            break
    wanted = {"matcher": event.matcher} if event.matcher is not None else {}
    if group_of_ours is None:
        entries.append({**wanted, "hooks": [handler]})
        return
    kept = []
    for index, group in enumerate(entries):
        handlers = group.get("hooks", [])
        if index != group_of_ours:
            others = [item for item in handlers if not _ours(item)]
            if others or not handlers:
                kept.append(group if len(others) == len(handlers) else {**group, "hooks": others})
            continue
        first = next(position for position, item in enumerate(handlers) if _ours(item))
        rest = [_merged(host, item, handler) if position == first else item
                for position, item in enumerate(handlers) if position == first or not _ours(item)]
        if all(_ours(item) for item in rest):  # loopwarden's own group: its matcher is loopwarden's too
            extra = {key: value for key, value in group.items() if key not in ("matcher", "hooks")}
            kept.append({**wanted, **extra, "hooks": rest})
        else:  # a person's group that also runs loopwarden: keep their matcher
            kept.append({**group, "hooks": rest})
    hooks[event.name] = kept


def install(host: Host, config: dict, entries: list[tuple[Event, dict]]) -> dict:
    """A copy of `config` with loopwarden's `entries` (hosts.plan) in it, and none of loopwarden's
    entries on events the plan has not (an older install's, or a fallback's PostToolBatch)."""
    result = copy.deepcopy(config)
    check_shape(host, result)
    for key, value in host.skeleton.items():
        result.setdefault(key, value)
    hooks = _hooks_of(result, create=True)
    planned = {event.name for event, _ in entries}
    for name in list(hooks):
        if name not in planned:
            _strip_event(host, hooks, name)
    for event, handler in entries:
        _install_event(host, hooks, event, handler)
    return result
