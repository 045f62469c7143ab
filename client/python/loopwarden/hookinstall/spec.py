"""The shape of a host's hook config as `loopwarden install-hooks` writes it: the data each host
module (loopwarden.hooks.hosts) declares as its `install`, and the entries it makes.

Commands are absolute paths, quoted for the shell that runs them: a host runs hooks with its own
PATH, where a bare `loopwarden-hook` may be "not found" (exit 127) and the call then runs unchecked.
"""
from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass, field

# Seconds a host waits for a hook before counting it failed: above loopwarden-hook's own --timeout
# (5 s) so that a slow daemon gets loopwarden's "not checked" answer, not the host's failure.
HOOK_TIMEOUT_SECONDS = 10
PLUGIN_NAME = "loopwarden"  # the Claude Code plugin's name (integrations/claude-code/.claude-plugin)


@dataclass(frozen=True)
class Event:
    """One hook event of a host: its name and the tool matcher of its entry (None: the entry has none)."""
    name: str
    matcher: str | None = None
    # Only the compiled loopwarden-hook forwards it usefully (the Python form answers it {} unread).
    compiled_only: bool = False
    # The event that runs before a tool: the one fail-closed settings of the host apply to.
    before_tool: bool = False


@dataclass(frozen=True)
class HookConfig:
    """Where a host keeps its hook config and the entries loopwarden writes there: a host module's
    `install` (loopwarden.hooks.hosts), which `install-hooks` reads."""
    project_file: str    # relative to the project directory
    user_dir_env: str | None  # the variable that moves the host's user directory, if it has one
    user_dir: str        # the user directory, relative to the home directory
    user_file: str       # relative to the user directory
    events: tuple[Event, ...]
    # Claude Code, Codex and Gemini CLI group handlers under a matcher ({"matcher", "hooks": [...]});
    # Cursor lists the handlers of an event directly.
    grouped: bool = True
    timeout: int | None = HOOK_TIMEOUT_SECONDS  # in the host's unit; None: the entry sets none
    # Keys a new config file starts with (Cursor's format version).
    skeleton: Mapping[str, object] = field(default_factory=dict)
    # The key and value that make the host fail closed when the hook itself fails (cannot start,
    # times out), set on the before-tool entry under --fail-closed; None where the host has none.
    fail_closed_key: tuple[str, object] | None = None
    # What the person still has to do in the host before the hooks run, said after writing.
    next_step: str = ""
    # The config key that turns plugins on ({"name@marketplace": true}), where the host has plugins
    # and loopwarden ships one (integrations/claude-code): with it on too, the host runs both.
    plugins_key: str | None = None

    def enabled_plugin(self, config: object) -> str | None:
        """The id of loopwarden's plugin when `config` turns it on (only `true` does), else None."""
        if self.plugins_key is None or not isinstance(config, Mapping):
            return None
        plugins = config.get(self.plugins_key)
        if not isinstance(plugins, Mapping):
            return None
        return next((key for key, on in plugins.items()
                     if isinstance(key, str) and key.split("@", 1)[0] == PLUGIN_NAME and on is True), None)

    def config_path(self, *, user: bool, project_dir: pathlib.Path, environ: Mapping[str, str] | None = None,
                    home: pathlib.Path | None = None) -> pathlib.Path:
        """The config file of the project (`--project`) or of the user (`--user`)."""
        if not user:
            return project_dir / self.project_file
        environ = os.environ if environ is None else environ
        moved = environ.get(self.user_dir_env) if self.user_dir_env else None
        base = pathlib.Path(moved).expanduser() if moved else (home or pathlib.Path.home()) / self.user_dir
        return base / self.user_file

    def handler(self, command: str, event: Event, *, fail_closed: bool) -> dict:
        """The entry that runs `command` for `event`, in the host's format."""
        entry: dict = {"command": command} if not self.grouped else {"type": "command", "command": command}
        if self.timeout is not None:
            entry["timeout"] = self.timeout
        if fail_closed and event.before_tool and self.fail_closed_key is not None:
            key, value = self.fail_closed_key
            entry[key] = value
        return entry


ALL_TOOLS = "*"  # the matcher of every tool
