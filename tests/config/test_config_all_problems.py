"""Every problem of a config at once, each with its line: the loader goes on past a problem, the
daemon's start and reload refuse such a file as before, with all of them in one message."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from loopwarden_server.config import ConfigError, ConfigErrors, load_config_text
from loopwarden_server.config.positions import key_lines
from loopwarden_server.config.watch import ConfigWatcher

SEVERAL = Path(__file__).parent / "fixtures" / "several"


def test_the_loader_names_every_problem_with_its_line():
    with pytest.raises(ConfigErrors) as caught:
        load_config_text((SEVERAL / "three_mistakes.json5").read_text())
    errors = caught.value.errors
    assert [(error.line, error.path) for error in errors] == [
        (6, "tools.loopDetection.criticalThreshold"), (7, "tools.loopDetection.historySize"),
        (11, "loopwarden.shadowMod")]
    assert isinstance(caught.value, ConfigError) and caught.value.path == errors[0].path
    assert str(caught.value).startswith("3 problems: line 6: tools.loopDetection.criticalThreshold: must be greater")
    assert "\n" not in str(caught.value)


def test_one_problem_is_still_one_config_error():
    with pytest.raises(ConfigError) as caught:
        load_config_text("{\n  tools: { loopDetection: { historySize: 0 } },\n}")
    assert type(caught.value) is ConfigError
    assert (caught.value.line, str(caught.value)) == (
        2, "tools.loopDetection.historySize: must be a positive integer, got 0")


def test_a_reload_refuses_the_file_with_every_problem(tmp_path):
    path = tmp_path / "loopwarden.json5"
    path.write_text("{}")
    watcher = ConfigWatcher(str(path), clock=time.monotonic)
    watcher.load_initial()
    path.write_text((SEVERAL / "three_mistakes.json5").read_text())
    reload = watcher.poll(force=True)
    assert reload.config is None
    assert reload.error.startswith("3 problems: line 6: ")
    assert 'line 11: loopwarden.shadowMod: unknown key; did you mean "shadowMode"?' in reload.error


def test_key_lines_walks_json5():
    text = """// a comment with { braces }
{
  /* block
     comment */ tools: {
    'quoted': "a \\" string", bare: [1, {x: +Infinity}, 0x1F,],
  },
  "two words": { "inner key": null },
}"""
    lines = key_lines(text)
    assert lines["tools"] == 4
    assert lines["tools.quoted"] == lines["tools.bare"] == lines["tools.bare[1].x"] == 5
    assert lines["two words"] == 7
    assert lines['two words["inner key"]'] == lines["two words.inner key"] == 7
