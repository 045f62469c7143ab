"""The hosts `loopwarden install-hooks` configures: every registered hook host
(loopwarden.hooks.hosts) that declares an `install` (hookinstall.spec.HookConfig: where it keeps
its hook config, which of its hook events loopwarden answers, the entry it writes for each).

The events are the ones each host's guide (docs/integrations/) wires, the ones its host module
reads; an event the module does not read would only cost a process.
"""
from __future__ import annotations

import dataclasses
import pathlib
import shlex
from dataclasses import dataclass

from ..hooks import hosts as hook_hosts
from .spec import HOOK_TIMEOUT_SECONDS, PLUGIN_NAME, Event, HookConfig

__all__ = ["HOOK_TIMEOUT_SECONDS", "HOSTS", "PLUGIN_NAME", "Event", "Host", "HookCommand", "is_loopwarden_command",
           "plan"]


@dataclass(frozen=True)
class Host(HookConfig):
    """A host's hook config with its name (`install-hooks NAME`, `loopwarden-hook NAME`) and title."""
    name: str = ""
    title: str = ""


def _host(name: str, title: str, config: HookConfig) -> Host:
    return Host(name=name, title=title,
                **{item.name: getattr(config, item.name) for item in dataclasses.fields(HookConfig)})


HOSTS: dict[str, Host] = {host.name: _host(host.name, host.title, host.install)
                          for host in hook_hosts.HOSTS if host.install is not None}


@dataclass(frozen=True)
class HookCommand:
    """The command every entry runs, before the dialect: loopwarden-hook, or `loopwarden hook`."""
    argv: tuple[str, ...]
    compiled: bool

    def for_host(self, host: Host, flags: list[str]) -> str:
        return shlex.join([*self.argv, host.name, *flags])


HOOK_COMMAND = "loopwarden-hook"
LAUNCHER = "run-loopwarden-hook"  # the Claude Code plugin's launcher (integrations/claude-code/scripts)


def is_loopwarden_command(command: object) -> bool:
    """Whether a hook command runs loopwarden: loopwarden-hook, `loopwarden hook`, `python -m loopwarden
    hook` or the plugin's launcher, by any path. What --remove takes out and a new install replaces."""
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if not argv:
        return False
    name = pathlib.PurePath(argv[0]).name
    if name in (HOOK_COMMAND, LAUNCHER):
        return True
    if name == "loopwarden":
        return argv[1:2] == ["hook"]
    if name.startswith("python"):
        return argv[1:4] == ["-m", "loopwarden", "hook"]
    return False


def plan(host: Host, command: HookCommand, flags: list[str], *, fail_closed: bool) -> list[tuple[Event, dict]]:
    """Each event loopwarden answers for the host, with the entry it gets."""
    text = command.for_host(host, flags)
    return [(event, host.handler(text, event, fail_closed=fail_closed))
            for event in host.events if command.compiled or not event.compiled_only]
