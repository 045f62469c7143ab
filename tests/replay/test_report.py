"""The HTML evaluation report (`loopwarden evaluate --html`): what it measures, and a page that needs nothing
but itself. tests/replay/test_report_browser.py renders the shipped set's report in Chromium."""
from __future__ import annotations

import json
import pathlib
import re

import pytest

from loopwarden_server.config import default_config_text, load_config_text
from loopwarden_server.replay import evaluate_offline, load_labelled_set
from loopwarden_server.replay.report import (
    SWEEP_WARNINGS, build_html_report, canonical_params, close_calls, longest_repeat_stretch, render_html, run_shapes,
    sweep_config_text, threshold_sweep,
)
from tests.support.cli import loopwarden

RESULT = {"content": [{"type": "text", "text": "same"}], "details": {}}
CHARTS = {"calls-until-detection", "repeat-stretch", "threshold-sweep"}


def pairs(run_id: str, times: int, path: str = "/x", first_seq: int = 1) -> list[dict]:
    events = []
    for n in range(times):
        seq = first_seq + 2 * n
        events += [{"run_id": run_id, "seq": seq, "kind": "tool_call", "tool_name": "read", "params": {"path": path}},
                   {"run_id": run_id, "seq": seq + 1, "kind": "tool_outcome", "tool_name": "read",
                    "params": {"path": path}, "result": RESULT}]
    return events


@pytest.fixture(scope="module")
def small_set(tmp_path_factory) -> pathlib.Path:
    """Two good runs (one reads the same file 5 times, one never repeats) and one loop of 22 identical reads."""
    directory = tmp_path_factory.mktemp("small-set")
    events = pairs("good/five-reads", 5) + [e for n in range(6) for e in pairs("good/distinct", 1, f"/{n}", 1 + 2 * n)]
    events += pairs("loop/reads", 22)
    (directory / "trace.jsonl").write_text("".join(json.dumps(event) + "\n" for event in events))
    (directory / "manifest.json").write_text(json.dumps({
        "format": "loopwarden-labelled-set/1", "traces": [{"path": "trace.jsonl"}],
        "runs": [{"run_id": "good/five-reads", "label": "good"}, {"run_id": "good/distinct", "label": "good"},
                 {"run_id": "loop/reads", "label": "looping", "kind": "generic_repeat", "loop_start_seq": 1}]}))
    return directory / "manifest.json"


class TestLongestRepeatStretch:
    @pytest.mark.parametrize(("calls", "expected"), [
        ("", (0, "")),
        ("ABC", (0, "")),
        ("AAAA", (3, "A")),
        ("ABABAB", (4, "A ↔ B")),
        ("ABACA", (1, "A")),
        ("XAAAYBBBBBZ", (4, "B")),
    ])
    def test_counts_consecutive_repeats_of_the_last_two_calls(self, calls, expected):
        """Each letter is a (tool, arguments) pair; the stretch counts calls repeating one of the two before them."""
        assert expected == longest_repeat_stretch([(letter, "{}") for letter in calls])

    def test_arguments_are_compared_as_json(self, small_set):
        """Key order and spacing do not make two calls different; the looping run's 22 reads are a stretch of 21."""
        shapes = run_shapes(load_labelled_set(small_set))

        assert (4, 0, 21) == (shapes["good/five-reads"].longest_repeat, shapes["good/distinct"].longest_repeat,
                              shapes["loop/reads"].longest_repeat)
        assert canonical_params('{"a": 1, "b": 2}') == canonical_params('{"b":2,"a":1}')
        assert "{}" == canonical_params("")


class TestSweep:
    def test_config_text_replaces_only_w_and_c(self):
        """The swept config keeps every other setting of the base config."""
        base = "{tools: {loopDetection: {enabled: true, historySize: 40}}, loopwarden: {abortAfterBlocks: 3}}"

        settings = load_config_text(sweep_config_text(base, 4, 5)).settings_for("")

        assert (4, 5, 40) == (settings.warning_threshold, settings.critical_threshold, settings.history_size)

    def test_points_count_what_each_threshold_flags(self, small_set):
        """Five identical reads are warned and blocked at W = 3 (C = 4), only warned at W = 4, untouched from 5;
        the 22-read loop is caught and blocked throughout."""
        points = threshold_sweep(load_labelled_set(small_set), warnings=range(3, 7))

        assert [3, 4, 5, 6] == [point.warning for point in points]
        assert [1, 1, 0, 0] == [point.good_warned for point in points]
        assert [1, 0, 0, 0] == [point.good_blocked for point in points]
        assert [(1, 1)] * 4 == [(point.loops_caught, point.loops_enforced) for point in points]
        assert ("warn", "generic_repeat") == points[1].good_flags["good/five-reads"]

    def test_closest_calls_rank_by_the_highest_w_flagged(self, small_set):
        labelled = load_labelled_set(small_set)
        points = threshold_sweep(labelled, warnings=range(3, 7))

        calls = close_calls(["good/distinct", "good/five-reads"], run_shapes(labelled), points)

        assert [("good/five-reads", 4, "warn", "generic_repeat", 4), ("good/distinct", None, "", "", 0)] == [
            (call.run_id, call.flagged_at, call.action, call.detector, call.longest_repeat) for call in calls]

    def test_default_sweep_is_w_three_to_twenty(self):
        assert list(range(3, 21)) == list(SWEEP_WARNINGS)


@pytest.fixture(scope="module")
def page(small_set) -> str:
    """The small set's report page, offline on the embedded default config."""
    labelled = load_labelled_set(small_set)
    config = load_config_text(default_config_text())
    report = evaluate_offline(labelled, config)
    return render_html(build_html_report(labelled, report, source="offline", settings=config.settings_for("")))


class TestPage:
    def test_three_charts_and_the_tables(self, page):
        assert CHARTS == set(re.findall(r'data-chart="([^"]+)"', page))
        assert 'id="closest-calls"' in page and 'id="loop-kinds"' in page

    def test_needs_nothing_but_itself(self, page):
        """No script, no stylesheet or image to fetch, no URL anywhere but the SVG namespace."""
        assert "<script" not in page
        assert [] == re.findall(r'\b(?:src|href)\s*=', page)
        assert "url(" not in page and "@import" not in page
        assert {"http://www.w3.org/2000/svg"} == set(re.findall(r"https?://[^\s\"'<>]+", page))

    def test_every_mark_has_a_tooltip(self, page):
        marks = re.findall(r'class="mark">(<title>)?', page)

        assert marks and all(marks)


class TestCli:
    def test_html_flag_writes_the_page(self, small_set, tmp_path):
        """`evaluate --html FILE` prints the text report as before, exits as before, and writes the page."""
        out = tmp_path / "report.html"

        result = loopwarden("evaluate", str(small_set), "--html", str(out), timeout=120)

        assert 0 == result.returncode, result.stderr
        assert "result: PASS" in result.stdout
        assert f"html report: {out}" == result.stderr.strip()
        assert CHARTS == set(re.findall(r'data-chart="([^"]+)"', out.read_text(encoding="utf-8")))

    def test_through_a_daemon_the_sweep_is_left_out(self, small_set, tmp_path, daemon):
        """Online, the daemon's thresholds are its own: the page has no sweep and says why."""
        out = tmp_path / "report.html"

        result = loopwarden("evaluate", str(small_set), "--address", daemon.grpc_target, "--run-prefix", "html/",
                            "--html", str(out), timeout=120)

        page = out.read_text(encoding="utf-8")
        assert 0 == result.returncode, result.stderr
        assert {"calls-until-detection", "repeat-stretch"} == set(re.findall(r'data-chart="([^"]+)"', page))
        assert "left out when evaluating through a daemon" in page

    def test_unwritable_path_exits_2(self, small_set, tmp_path):
        result = loopwarden("evaluate", str(small_set), "--html", str(tmp_path / "missing" / "report.html"))

        assert 2 == result.returncode
        assert "error: cannot write" in result.stderr
