"""The four hosts `loopwarden install-hooks` configures: where each keeps its hook config, which of
its hook events loopwarden answers, and the entry it writes for each.

The events are the ones each host's guide (docs/integrations/) wires, the same ones the daemon's
dialect maps (hooks/protocol.py); an event the dialect does not map would only cost a process.
Commands are absolute paths, quoted for the shell that runs them: a host runs hooks with its own
PATH, where a bare `loopwarden-hook` may be "not found" (exit 127) and the call then runs unchecked.
"""
from __future__ import annotations

import os
import pathlib
import shlex
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
class Host:
    name: str            # the dialect: `loopwarden-hook NAME`, `install-hooks NAME`
    title: str           # as people write it
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


_ALL_TOOLS = "*"

HOSTS: dict[str, Host] = {host.name: host for host in (
    Host(
        name="claude-code", title="Claude Code",
        project_file=".claude/settings.json", user_dir_env="CLAUDE_CONFIG_DIR", user_dir=".claude",
        user_file="settings.json",
        events=(
            Event("PreToolUse", _ALL_TOOLS, before_tool=True),
            Event("PostToolUse", _ALL_TOOLS),
            Event("PostToolUseFailure", _ALL_TOOLS),
            Event("PostToolBatch", compiled_only=True),
            Event("PreCompact"),
            Event("UserPromptSubmit"),
            Event("SessionEnd"),
            Event("SubagentStart"),
            Event("SubagentStop"),
            Event("PermissionDenied", _ALL_TOOLS),
        ),
        # A hook that cannot run blocks the call, as an exit code 2 would (Claude Agent SDK types).
        fail_closed_key=("onFailure", "block"),
        plugins_key="enabledPlugins",
    ),
    Host(
        # Codex reads hooks.json next to config.toml: ~/.codex (or $CODEX_HOME) and a trusted
        # project's .codex (codex-rs/hooks/src/engine/discovery.rs). Its tool hooks fire for shell
        # commands, apply_patch and MCP tools, the matcher the Codex guide gives.
        name="codex", title="Codex",
        project_file=".codex/hooks.json", user_dir_env="CODEX_HOME", user_dir=".codex", user_file="hooks.json",
        next_step="Codex runs a hook only once you have reviewed it: start codex, which lists the hooks that need "
                  "review, and trust them (codex exec runs no unreviewed hook)",
        events=(
            Event("PreToolUse", "Bash|apply_patch|mcp__.*", before_tool=True),
            Event("PostToolUse", "Bash|apply_patch|mcp__.*"),
            Event("PreCompact"),
            Event("UserPromptSubmit"),  # a new prompt lifts a block (a user turn)
            Event("SubagentStart"),  # a sub-agent's child run exists before its first call
        ),
    ),
    Host(
        name="gemini-cli", title="Gemini CLI",
        project_file=".gemini/settings.json", user_dir_env=None, user_dir=".gemini", user_file="settings.json",
        events=(
            Event("BeforeTool", ".*", before_tool=True),
            Event("AfterTool", ".*"),
            Event("PreCompress"),
            Event("BeforeAgent"),
            Event("SessionEnd"),
        ),
        timeout=HOOK_TIMEOUT_SECONDS * 1000,  # Gemini CLI's hook timeout is in milliseconds
    ),
    Host(
        name="cursor", title="Cursor",
        project_file=".cursor/hooks.json", user_dir_env=None, user_dir=".cursor", user_file="hooks.json",
        events=(
            Event("preToolUse", before_tool=True),
            Event("postToolUse"),
            Event("postToolUseFailure"),
            Event("preCompact"),
            Event("beforeSubmitPrompt"),
            Event("sessionEnd"),
        ),
        grouped=False,
        timeout=None,  # the entry's documented fields are `command` (and failClosed)
        skeleton={"version": 1},
        fail_closed_key=("failClosed", True),
    ),
)}


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
