"""The config file the daemon runs on, and noticing when it changes.

Start and every reload parse the file with `load_config_bytes`, exactly what `check-config` uses,
so a file `check-config` accepts is accepted on reload and one it refuses is refused with the
same message. A change is noticed by stat (see filewatch) and then confirmed by content digest:
a `touch` or a ConfigMap resync with identical content is not a reload.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from ..filewatch import FileWatch
from .loader import ConfigError, load_config_bytes
from .model import Config


@dataclass(frozen=True, slots=True)
class Reload:
    """What one look at the file found: a new config, or why it was refused."""

    config: Config | None = None
    error: str = ""


class ConfigWatcher:
    def __init__(self, path: str, *, clock: Callable[[], float]) -> None:
        self.path = path
        # No rate limit of its own: the daemon's poll loop (--config-poll) paces the checks.
        self._watch = FileWatch((path,), clock=clock, interval=0.0)
        self._digest = ""

    def load_initial(self) -> Config:
        """Raises OSError (unreadable) or ConfigError (invalid)."""
        raw = self._read()
        config = load_config_bytes(raw, self.path)
        self._digest = hashlib.sha256(raw).hexdigest()
        self._watch.loaded()
        return config

    def poll(self, *, force: bool = False) -> Reload | None:
        """None: nothing to do. A file that cannot be read is tried again at every poll."""
        if force:
            self._watch.force()
        if not self._watch.changed():
            return None
        try:
            raw = self._read()
        except OSError as exc:
            return Reload(error=f"cannot read {self.path}: {exc.strerror or exc}")
        self._watch.loaded()
        digest = hashlib.sha256(raw).hexdigest()
        if digest == self._digest and not force:
            return None
        try:
            config = load_config_bytes(raw, self.path)
        except ConfigError as exc:
            return Reload(error=str(exc))
        self._digest = digest
        return Reload(config=config)

    def _read(self) -> bytes:
        with open(self.path, "rb") as handle:
            return handle.read()
