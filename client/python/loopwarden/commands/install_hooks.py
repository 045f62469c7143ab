"""`loopwarden install-hooks HOST` (claude-code, codex, gemini-cli, cursor, ...): write loopwarden's hooks
into the host's config file (or take them out with --remove), showing the change first.

The entries run the compiled `loopwarden-hook` next to this `loopwarden` (`make serve` installs both
in the clone's .venv/bin), by its absolute path; without it, `loopwarden hook` by its absolute path,
the Python fallback, which is said. The file is merged into, not replaced (hookinstall.merge), and
written only after the diff is confirmed (or with --yes), atomically, with a .bak of the old file.
A second run with the same flags changes nothing and says so.

The compiled entries carry the URL of the daemon's hook listener explicitly (hooks.target): the one
`--url` names, else the one LOOPWARDEN_HOOKS_LISTEN or HOOKS_PORT (`make serve`'s) moves the daemon
to, else the default. A hook without it posts to 127.0.0.1:50052, and a daemon moved elsewhere
would never see a call: each would run unchecked. Before writing, that URL is asked whether a
loopwarden daemon answers there (--no-check skips it, for a daemon not started yet).

Exit status: 0 written, nothing to change, or --dry-run; 1 not confirmed; 2 an error (bad flags, a
file that is not JSON or not shaped as the host reads it, no daemon at the hook URL), with nothing
written.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import sysconfig

from ..hookinstall import files, target
from ..hookinstall.hosts import HOOK_COMMAND, HOSTS, HookCommand, Host, plan
from ..hookinstall.merge import ConfigShapeError, install, remove
from .common import EXIT_ERROR

EXIT_NOT_CONFIRMED = 1


def add(commands) -> None:
    parser = commands.add_parser(
        "install-hooks", help="write loopwarden's hooks into Claude Code's, Codex's, Gemini CLI's or Cursor's config",
        description="Merge loopwarden's hook entries into the host's config file (other settings and hooks stay "
                    "as they are), after showing the diff.")
    parser.add_argument("host", choices=list(HOSTS), metavar="HOST", help=", ".join(HOSTS))
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--project", dest="user", action="store_false",
                       help="the project's config in the current directory (default): "
                            + ", ".join(host.project_file for host in HOSTS.values()))
    scope.add_argument("--user", dest="user", action="store_true",
                       help="your own config: ~/.claude/settings.json ($CLAUDE_CONFIG_DIR), ~/.codex/hooks.json "
                            "($CODEX_HOME), ~/.gemini/settings.json, ~/.cursor/hooks.json")
    parser.add_argument("--remove", action="store_true", help="take loopwarden's entries out instead")
    confirm = parser.add_mutually_exclusive_group()
    confirm.add_argument("--yes", "-y", action="store_true", help="write without asking")
    confirm.add_argument("--dry-run", action="store_true", help="print the diff only; write nothing")
    parser.add_argument("--agent", default="", metavar="ID",
                        help="agent id for the daemon's per-agent config, passed to every hook (--agent)")
    parser.add_argument("--url", default="", metavar="URL",
                        help="the daemon's hook listener for loopwarden-hook (default: LOOPWARDEN_HOOKS_LISTEN, "
                             "else 127.0.0.1:$HOOKS_PORT, else http://127.0.0.1:50052)")
    parser.add_argument("--no-check", dest="check", action="store_false",
                        help="write the hook URL without asking whether a loopwarden daemon answers on it")
    parser.add_argument("--address", default="", metavar="HOST:PORT",
                        help="the daemon's gRPC address, for the `loopwarden hook` fallback only")
    parser.add_argument("--fail-closed", action="store_true",
                        help="deny tool calls the daemon cannot check, and (Claude Code, Cursor) block them "
                             "when the hook itself fails")
    parser.add_argument("--bin-dir", type=pathlib.Path, default=None, metavar="DIR",
                        help="where loopwarden-hook (or loopwarden) is installed (default: the directory of this "
                             "loopwarden)")
    parser.set_defaults(handler=run, user=False)


def default_bin_dir() -> pathlib.Path:
    """The directory of the running `loopwarden` (where `make serve` puts loopwarden-hook beside it)."""
    launched = pathlib.Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if launched is not None and launched.name == "loopwarden" and launched.is_file():
        return pathlib.Path(os.path.abspath(launched.parent))
    return pathlib.Path(sysconfig.get_path("scripts"))


def _executable(path: pathlib.Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def hook_command(bin_dir: pathlib.Path) -> HookCommand:
    """loopwarden-hook in `bin_dir`; else `loopwarden hook` there; else this interpreter's `-m loopwarden hook`."""
    bin_dir = pathlib.Path(os.path.abspath(bin_dir))
    compiled = bin_dir / HOOK_COMMAND
    if _executable(compiled):
        return HookCommand((str(compiled),), compiled=True)
    python_form = bin_dir / "loopwarden"
    if _executable(python_form):
        return HookCommand((str(python_form), "hook"), compiled=False)
    return HookCommand((os.path.abspath(sys.executable), "-m", "loopwarden", "hook"), compiled=False)


def flags_for(args: argparse.Namespace, command: HookCommand, url: str = "") -> list[str]:
    flags = []
    if args.agent:
        flags += ["--agent", args.agent]
    if command.compiled and url:
        flags += ["--url", url]
    if not command.compiled and args.address:
        flags += ["--address", args.address]
    if args.fail_closed:
        flags.append("--fail-closed")
    return flags


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _confirm(path: pathlib.Path) -> bool:
    try:
        answer = input(f"Write {path}? [y/N] ")
    except EOFError:
        print()
        return False
    return answer.strip().lower() in ("y", "yes")


def run(args: argparse.Namespace) -> int:
    args.written = False
    try:
        return _run(args)
    except BrokenPipeError:
        # Whoever read the output went away (`--dry-run | head`): the rest has no reader, and the
        # interpreter's own flush at exit must not fail on it either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if args.written or args.dry_run:
            return 0
        print("error: the output was closed before the diff was shown; nothing was written", file=sys.stderr)
        return EXIT_ERROR


def _run(args: argparse.Namespace) -> int:
    host: Host = HOSTS[args.host]
    if args.url and not args.url.startswith("http://"):
        return _error(f"--url must be the daemon's plain http:// hook listener (loopwarden-hook speaks no TLS), "
                      f"got {args.url!r}")
    path = host.config_path(user=args.user, project_dir=pathlib.Path.cwd())
    try:
        current = files.read(path)
    except files.ConfigFileError as exc:
        return _error(str(exc))

    command = hook_command(args.bin_dir or default_bin_dir())
    url = ""
    plugin = host.enabled_plugin(current.config)
    if plugin is not None and not args.remove:
        print(f"warning: {path} also turns on loopwarden's {host.title} plugin ({plugin}): {host.title} will run "
              f"both for every hook. The daemon still counts each call once (by the host's tool_use_id), but each "
              f"call costs two hook processes: keep one (`claude plugin disable {plugin}`, or not these hooks)")
    if not args.remove:
        if command.compiled:
            print(f"hooks run {command.argv[0]}")
            try:
                chosen = target.choose(args.url)
            except target.TargetError as exc:
                return _error(str(exc))
            url = chosen.url
            print(f"hooks post to {chosen.url} ({chosen.why})")
            if args.check:
                problem = target.probe(chosen.url, host.name)
                if problem is not None:
                    message = (f"no loopwarden daemon answers on {chosen.url}: {problem}. Start it "
                               f"(`make serve`), or name the one that runs with --url, LOOPWARDEN_HOOKS_LISTEN or "
                               f"HOOKS_PORT; --no-check writes the URL anyway")
                    if not args.dry_run:
                        return _error(message + "; nothing was written")
                    print(f"warning: {message}")
        else:
            print(f"note: {HOOK_COMMAND} is not in {args.bin_dir or default_bin_dir()} (`make serve` builds it): the "
                  f"hooks run `{' '.join(command.argv)}`, the Python fallback (an interpreter per hook"
                  + (", and no PostToolBatch" if any(e.compiled_only for e in host.events) else "") + ")")
            if args.url:
                print("note: --url is loopwarden-hook's; the fallback asks the daemon over gRPC (--address)")
    try:
        if args.remove:
            wanted = remove(host, current.config)  # type: ignore[arg-type]
        else:
            entries = plan(host, command, flags_for(args, command, url), fail_closed=args.fail_closed)
            wanted = install(host, current.config, entries)  # type: ignore[arg-type]
    except ConfigShapeError as exc:
        return _error(f"{path}: {exc}; nothing was written")

    if wanted == current.config and (current.exists or args.remove):
        what = "has no loopwarden hooks" if args.remove else "already has loopwarden's hooks"
        print(f"nothing to change: {path} {what}")
        return 0
    text = files.edit(current.text, wanted)
    sys.stdout.write(files.unified_diff(path, current.text, text))
    if args.dry_run:
        print(f"(dry run: {path} not written)")
        return 0
    if not args.yes and not _confirm(path):
        print(f"not written: {path} (run with --yes to write without asking)")
        return EXIT_NOT_CONFIRMED
    try:
        backup = files.write(path, text, existed=current.exists)
    except OSError as exc:
        return _error(f"{path}: cannot be written: {exc}")
    args.written = True
    print(f"wrote {path}" + (f" (the old file is {backup})" if backup else ""))
    if not args.remove:
        print(f"{host.title} reads it when a session starts: start a new session for the hooks to run")
        if host.next_step:
            print(f"then: {host.next_step}")
    return 0
