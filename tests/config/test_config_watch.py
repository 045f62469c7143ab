"""ConfigWatcher and the FileWatch under it: change by stat, confirmed by content; a file that could
not be read is tried again on every poll; reload errors are the same as check-config's."""
from __future__ import annotations

import os

from loopwarden_server.config.check import main as check_config
from loopwarden_server.config.watch import ConfigWatcher
from loopwarden_server.filewatch import FileWatch

ENABLED = "{tools: {loopDetection: {enabled: true}}}"
TIGHT = "{tools: {loopDetection: {enabled: true, warningThreshold: 2, criticalThreshold: 3}}}"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def replace(path, text: str | bytes) -> None:
    """Atomic replace, as an editor or a ConfigMap swap does (a new inode every time)."""
    tmp = path.with_suffix(".tmp")
    (tmp.write_bytes if isinstance(text, bytes) else tmp.write_text)(text)
    os.replace(tmp, path)


class TestFileWatch:
    def test_reports_a_change_once_after_loaded(self, tmp_path):
        path = tmp_path / "f"
        path.write_text("a")
        clock = Clock()
        watch = FileWatch([str(path)], clock=clock, interval=1.0)

        replace(path, "b")
        clock.now += 1.0
        first = watch.changed()
        watch.loaded()
        clock.now += 1.0

        assert (True, False) == (first, watch.changed())

    def test_rate_limited(self, tmp_path):
        """Within the interval no stat is taken: the change shows only once the interval passed."""
        path = tmp_path / "f"
        path.write_text("a")
        clock = Clock()
        watch = FileWatch([str(path)], clock=clock, interval=1.0)

        replace(path, "b")
        clock.now += 0.5
        early = watch.changed()
        clock.now += 0.5

        assert (False, True) == (early, watch.changed())

    def test_unloaded_change_is_reported_again(self, tmp_path):
        """A change the caller could not take in (no `loaded()`) is reported at every later check."""
        path = tmp_path / "f"
        path.write_text("a")
        clock = Clock()
        watch = FileWatch([str(path)], clock=clock, interval=1.0)
        replace(path, "b")

        seen = []
        for _ in range(3):
            clock.now += 1.0
            seen.append(watch.changed())

        assert [True, True, True] == seen

    def test_a_deleted_file_is_a_change_and_so_is_its_return(self, tmp_path):
        """Deleting the file is reported (the token must fail closed); restoring it is reported again."""
        path = tmp_path / "f"
        path.write_text("a")
        clock = Clock()
        watch = FileWatch([str(path)], clock=clock, interval=1.0)

        path.unlink()
        clock.now += 1.0
        gone = watch.changed()
        watch.loaded()
        path.write_text("b")
        clock.now += 1.0

        assert (True, True) == (gone, watch.changed())


class TestConfigWatcher:
    def test_new_content_reloads_same_content_does_not(self, tmp_path):
        path = tmp_path / "c.json5"
        path.write_text(ENABLED)
        watcher = ConfigWatcher(str(path), clock=Clock())
        watcher.load_initial()

        replace(path, ENABLED)  # new inode, same bytes
        unchanged = watcher.poll()
        replace(path, TIGHT)
        reload = watcher.poll()

        assert unchanged is None
        assert 2 == reload.config.settings_for("").warning_threshold

    def test_unreadable_file_is_retried_every_poll(self, tmp_path, monkeypatch):
        """A config changed while unreadable reloads as soon as it can be read, with no further change
        of its stat. (The read fails through the watcher's own reader: as root, no file mode can make
        a file unreadable.)"""
        path = tmp_path / "c.json5"
        path.write_text(ENABLED)
        watcher = ConfigWatcher(str(path), clock=Clock())
        watcher.load_initial()
        replace(path, TIGHT)
        real_read = watcher._read
        failures = iter([PermissionError(13, "Permission denied"), PermissionError(13, "Permission denied")])

        def flaky_read() -> bytes:
            failure = next(failures, None)
            if failure is not None:
                raise failure
            return real_read()

        monkeypatch.setattr(watcher, "_read", flaky_read)
        failed = [watcher.poll(), watcher.poll()]
        reload = watcher.poll()

        assert [("cannot read", None)] * 2 == [(f.error[:11], f.config) for f in failed]
        assert 2 == reload.config.settings_for("").warning_threshold
        assert watcher.poll() is None

    def test_refused_reload_has_check_configs_message(self, tmp_path, capsys):
        """A non-UTF-8 file is refused on reload with the same message check-config prints."""
        path = tmp_path / "c.json5"
        path.write_text(ENABLED)
        watcher = ConfigWatcher(str(path), clock=Clock())
        watcher.load_initial()

        replace(path, b"{tools: {\xff}}")
        reload = watcher.poll()
        check_config([str(path)])

        assert reload.config is None
        assert f"error: {reload.error}" == capsys.readouterr().err.strip()

    def test_force_reloads_identical_content(self, tmp_path):
        """SIGHUP (force) re-parses even an unchanged file."""
        path = tmp_path / "c.json5"
        path.write_text(ENABLED)
        watcher = ConfigWatcher(str(path), clock=Clock())
        watcher.load_initial()

        assert watcher.poll() is None
        assert watcher.poll(force=True).config is not None
