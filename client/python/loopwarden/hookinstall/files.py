"""A host's config file read, shown as a diff, and written without ever leaving it half written.

A file that is not JSON is refused (with its line and column), never overwritten: it may be a
person's work in progress. Writing goes to a temporary file in the same directory that is then
renamed over the old one (a rename is atomic on one file system), after the old file is copied to
`<name>.bak`, so a crash leaves the old file or the new one, and the old one is kept either way.
A file that exists is edited, not re-serialised (textedit): only what changes is touched, in the
file's own indentation. A new file is written with two spaces and a final newline.
"""
from __future__ import annotations

import difflib
import json
import os
import pathlib
import re
import shutil
import tempfile
from dataclasses import dataclass

from . import textedit


class ConfigFileError(ValueError):
    """The file cannot be read as a config: nothing is written."""


@dataclass(frozen=True)
class ConfigFile:
    path: pathlib.Path
    text: str | None  # None: the file does not exist yet
    config: dict | list | str | int | float | bool | None

    @property
    def exists(self) -> bool:
        return self.text is not None


def read(path: pathlib.Path) -> ConfigFile:
    """The file's text and its JSON ({} for a file that does not exist or holds only whitespace)."""
    try:
        # newline="": the file's own line ends (CRLF too) are kept, not translated, and written back as they were
        with path.open(encoding="utf-8", newline="") as source:
            text = source.read()
    except FileNotFoundError:
        return ConfigFile(path, None, {})
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"{path}: cannot be read: {exc}") from None
    if not text.strip():
        return ConfigFile(path, text, {})
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigFileError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); nothing was written. Fix the file "
            f"(comments are not JSON), or move it away, and run again") from None
    return ConfigFile(path, text, config)


def indentation(text: str | None) -> int | str:
    """The indentation of the file's first indented line (a tab, or a number of spaces); 2 by default."""
    match = re.search(r"^([ \t]+)\S", text or "", re.M)
    if match is None:
        return 2
    return "\t" if match.group(1).startswith("\t") else len(match.group(1))


def render(config: object, like: str | None) -> str:
    return json.dumps(config, indent=indentation(like), ensure_ascii=False) + "\n"


def edit(old: str | None, config: object) -> str:
    """The text of `old` changed to hold `config`, changing nothing else; re-rendered whole when the
    edit cannot be made (a new or blank file, or an edit that would not read back as `config`)."""
    if old is None or not old.strip():
        return render(config, old)
    edited = textedit.patch(old, config, indentation(old))
    if edited is not None:
        try:
            if json.loads(edited) == config:
                return edited
        except json.JSONDecodeError:
            pass
    return render(config, old)


def unified_diff(path: pathlib.Path, old: str | None, new: str) -> str:
    old_lines = (old or "").splitlines(keepends=True)
    if old_lines and not old_lines[-1].endswith("\n"):
        old_lines[-1] += "\n"
    return "".join(difflib.unified_diff(old_lines, new.splitlines(keepends=True),
                                        fromfile=str(path) if old is not None else "/dev/null", tofile=str(path)))


def backup_path(path: pathlib.Path) -> pathlib.Path:
    return path.with_name(path.name + ".bak")


def write(path: pathlib.Path, text: str, *, existed: bool) -> pathlib.Path | None:
    """Write `text` to `path` atomically; returns the backup of the old file (None for a new file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    mode = None
    if existed:
        backup = backup_path(path)
        shutil.copy2(path, backup)
        mode = path.stat().st_mode & 0o7777
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        # mkstemp creates 0600; keep the old file's mode, or the umask's default for a new one.
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        pathlib.Path(temporary).unlink(missing_ok=True)
        raise
    return backup
