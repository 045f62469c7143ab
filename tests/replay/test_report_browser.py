"""The shipped labelled set's HTML report, opened in headless Chromium as a person would open it:
it draws its three plots and its tables, logs no error, fetches nothing, fits the page width, and
its screenshot is the one committed under docs/ (refresh it with LOOPWARDEN_UPDATE_SCREENSHOTS=1).

Chromium is Debian's `chromium` (scripts/install-test-tools.sh installs it). Where it is missing,
the test fails in CI and is skipped, with the install line, elsewhere.
"""
from __future__ import annotations

import os
import pathlib
import shutil

import pytest

from tests.support.browser import INSTALL_HINT, Chromium, find_chromium
from tests.support.cli import loopwarden

REPO = pathlib.Path(__file__).resolve().parents[2]
MANIFEST = REPO / "tests" / "replay" / "labelled" / "manifest.json"
SCREENSHOT = REPO / "docs" / "evaluation-report.png"
WIDTH = 960
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"chromium is not installed: {INSTALL_HINT}", pytrace=False)
        pytest.skip(f"chromium is not installed: {INSTALL_HINT}")
    return path


@pytest.fixture(scope="module")
def report_page(tmp_path_factory) -> pathlib.Path:
    """`loopwarden evaluate` of the shipped set with --html (offline, with its threshold sweep)."""
    out = tmp_path_factory.mktemp("report") / "evaluation-report.html"
    result = loopwarden("evaluate", str(MANIFEST), "--html", str(out), timeout=300)
    assert 0 == result.returncode, result.stderr
    return out


@pytest.fixture(scope="module")
def rendered(chromium, report_page, tmp_path_factory):
    """(visit, facts read from the page's DOM, screenshot path)."""
    shot = tmp_path_factory.mktemp("screenshot") / "evaluation-report.png"
    with Chromium(chromium) as browser:
        visit = browser.visit(report_page.as_uri(), width=WIDTH)
        facts = browser.evaluate("""(() => {
            const charts = {};
            for (const svg of document.querySelectorAll('svg[data-chart]')) {
                const box = svg.getBoundingClientRect();
                charts[svg.dataset.chart] = {marks: svg.querySelectorAll('.mark').length,
                                             width: box.width, height: box.height,
                                             title: svg.querySelector('title').textContent};
            }
            const rows = id => [...document.querySelectorAll('#' + id + ' tbody tr')]
                .map(tr => [...tr.cells].map(td => td.textContent.trim()));
            return {charts, closest: rows('closest-calls'), kinds: rows('loop-kinds'),
                    cards: [...document.querySelectorAll('.card')].map(c => c.textContent.trim()),
                    scrollWidth: document.documentElement.scrollWidth,
                    title: document.title};
        })()""")
        browser.screenshot(str(shot), width=WIDTH)
    if os.environ.get("LOOPWARDEN_UPDATE_SCREENSHOTS"):
        shutil.copyfile(shot, SCREENSHOT)
    return visit, facts, shot


@pytest.mark.system  # headless Chromium from Debian's packages: make test, not make test-fast
class TestInChromium:
    def test_no_console_errors_and_nothing_fetched(self, rendered, report_page):
        """The page logs no error and requests nothing but itself (no network at view time)."""
        visit, _facts, _shot = rendered

        assert [] == visit.console_errors
        assert [report_page.as_uri()] == visit.requests
        assert [] == visit.failed_requests

    def test_the_three_plots_are_drawn(self, rendered):
        """Calls until detection (two dots per looping run: 144 loops), the repeat-stretch histograms and the
        threshold sweep (four series of 18 points, W = 3 … 20) are drawn at a readable size."""
        _visit, facts, _shot = rendered
        charts = facts["charts"]

        assert {"calls-until-detection", "repeat-stretch", "threshold-sweep"} == set(charts)
        assert 2 * 144 == charts["calls-until-detection"]["marks"]
        assert charts["repeat-stretch"]["marks"] >= 10
        assert 4 * 18 == charts["threshold-sweep"]["marks"]
        assert all(chart["width"] > 0.8 * WIDTH - 100 and chart["height"] > 200 for chart in charts.values())

    def test_closest_calls_table_names_the_run_that_trips_first(self, rendered):
        """The good run nearest to a flag is the documented one: tau-airline-9-t2-109, a ping-pong warned at
        W ≤ 7, three below the configured W."""
        _visit, facts, _shot = rendered
        run_id, stretch, repeated, flagged, spare = facts["closest"][0]

        assert 10 == len(facts["closest"])
        assert ("tau-airline-9-t2-109", "W ≤ 7: WARN ping_pong", "3") == (run_id, flagged, spare)
        assert "book_reservation" in repeated and int(stretch) > 0

    def test_headline_and_kinds_table(self, rendered):
        _visit, facts, _shot = rendered

        assert "loopwarden evaluation report" == facts["title"]
        assert "0 / 200good runs wrongly blocked" == facts["cards"][0]
        assert "PASSresult" == facts["cards"][-1]
        assert 6 == len(facts["kinds"])

    def test_fits_the_width(self, rendered):
        """Nothing overflows sideways at 960 px."""
        _visit, facts, _shot = rendered

        assert facts["scrollWidth"] <= WIDTH

    def test_screenshot_is_taken_and_committed(self, rendered):
        """The whole page is screenshotted; docs/ holds a screenshot of it, which the replay guide shows."""
        _visit, _facts, shot = rendered

        assert shot.read_bytes().startswith(PNG_SIGNATURE) and shot.stat().st_size > 50_000
        assert SCREENSHOT.read_bytes().startswith(PNG_SIGNATURE)
        assert "](evaluation-report.png)" in (REPO / "docs" / "replay-evaluation.md").read_text(encoding="utf-8")
