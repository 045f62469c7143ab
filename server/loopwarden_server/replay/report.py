"""The evaluation report people look at: `loopwarden evaluate MANIFEST --html report.html`.

One self-contained HTML file (inline CSS and SVG, no script, nothing fetched when it is opened)
that answers with plots what the text report answers with numbers:

- calls until detection, per expected detector: one dot per looping run, for the first verdict of
  its detector and for its first BLOCK/ABORT;
- the longest repeat stretch of every run, good runs against looping runs (how far the real runs
  stay from the thresholds);
- a threshold sweep: the set replayed in-process at W = 3 … 20 (C = W + 1, everything else as
  configured), counting good runs warned and blocked and loops caught and blocked;
- the closest calls among good runs: the highest W at which each would have been flagged.

The sweep replays the whole set once per W, so it runs only offline (a daemon evaluates on its
own config, which cannot be swept from outside).
"""
from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from typing import cast

from loopwarden.eventformat import EventFormatError, EventKind, parse_event
from loopwarden.replay import ReplayTally

from ..config import default_config_text, load_config_text
from ..config.detection import LoopDetectionSettings
from .charts import LinePanel, Marker, Series, StripRow, histogram_pair, line_panels, strip_plot
from .labelled import EvaluationReport, Label, LabelledSet, score
from .offline import OfflineEngine, quiet_daemon_logs

SWEEP_WARNINGS = tuple(range(3, 21))  # W; C = W + 1
CLOSE_CALLS = 10
STRETCH_CAP = 30  # the histogram's last bin is "30+"

GOOD_COLOR = "#2b6cb0"
LOOP_COLOR = "#dd6b20"
WARN_COLOR = "#b7791f"
BLOCK_COLOR = "#c53030"
CAUGHT_COLOR = "#2f855a"
ENFORCED_COLOR = "#6b46c1"


# ---------------------------------------------------------------------------------------------
# The shape of each run: its longest repeat stretch


@dataclass(frozen=True, slots=True)
class RunShape:
    run_id: str
    calls: int
    longest_repeat: int  # see longest_repeat_stretch
    repeated: str  # the tool(s) of that stretch: "read", or "think ↔ book_reservation"


def canonical_params(params_json: str) -> str:
    if not params_json.strip():
        return "{}"
    try:
        return json.dumps(json.loads(params_json), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return params_json


def longest_repeat_stretch(calls: Sequence[tuple[str, str]]) -> tuple[int, str]:
    """The most consecutive calls that each repeat one of the two calls before them (same tool,
    same arguments), and the tools of that stretch.

    One call made over and over (A A A A: 3) and two calls alternating (A B A B A B: 4) both count;
    a run that never repeats itself scores 0. It is what the repeat and ping-pong detectors look
    for, measured without their thresholds.
    """
    best, best_end, current = 0, -1, 0
    for index, call in enumerate(calls):
        repeats = (index >= 1 and calls[index - 1] == call) or (index >= 2 and calls[index - 2] == call)
        current = current + 1 if repeats else 0
        if current > best:
            best, best_end = current, index
    if not best:
        return 0, ""
    tools = list(dict.fromkeys(tool for tool, _ in calls[best_end - best + 1:best_end + 1]))
    return best, " ↔ ".join(tools)


def run_shapes(labelled_set: LabelledSet) -> dict[str, RunShape]:
    """Every run's tool calls, in order, reduced to its longest repeat stretch."""
    calls: dict[str, list[tuple[str, str]]] = {}
    for event in labelled_set.events(verify=False):  # the evaluation has verified the traces
        try:
            record = parse_event(event.data)
        except EventFormatError:
            continue  # counted as a REJECT by the evaluation already
        if record.kind is not EventKind.TOOL_CALL or not record.run_id.strip():
            continue
        calls.setdefault(record.run_id.strip(), []).append(
            (record.tool_name.strip(), canonical_params(record.params_json)))
    shapes = {}
    for run_id, run_calls in calls.items():
        longest, repeated = longest_repeat_stretch(run_calls)
        shapes[run_id] = RunShape(run_id, len(run_calls), longest, repeated)
    return shapes


# ---------------------------------------------------------------------------------------------
# Threshold sweep


@dataclass(frozen=True, slots=True)
class SweepPoint:
    warning: int
    critical: int
    good_warned: int = 0
    good_blocked: int = 0
    loops: int = 0
    loops_caught: int = 0  # the expected detector fired from the loop's first call on
    loops_enforced: int = 0  # … with a BLOCK or ABORT
    # good run id -> (action, detector) of its first verdict other than ALLOW
    good_flags: dict[str, tuple[str, str]] = field(default_factory=dict)
    error: str = ""  # the config could not be made at this point (e.g. C not below an explicit G)


def sweep_config_text(base_text: str, warning: int, critical: int) -> str:
    """The base config with tools.loopDetection's W and C replaced."""
    import json5

    document = json5.loads(base_text)
    if not isinstance(document, dict):
        raise ValueError("the config is not a JSON5 object")
    tools = document.setdefault("tools", {})
    block = tools.setdefault("loopDetection", {}) if isinstance(tools, dict) else None
    if not isinstance(block, dict):
        raise ValueError("tools.loopDetection is not an object")
    block["warningThreshold"], block["criticalThreshold"] = warning, critical
    return json.dumps(document)


def threshold_sweep(labelled_set: LabelledSet, base_text: str | None = None,
                    warnings: Iterable[int] = SWEEP_WARNINGS) -> list[SweepPoint]:
    """The set replayed in-process at each W (C = W + 1); `base_text` is the config swept (default:
    the embedded one)."""
    from ..config import ConfigError

    base_text = default_config_text() if base_text is None else base_text
    events = [event.data for event in labelled_set.events()]
    good = [label.run_id for label in labelled_set.labels if not label.looping]
    points = []
    for warning in warnings:
        critical = warning + 1
        try:
            config = load_config_text(sweep_config_text(base_text, warning, critical), f"sweep W={warning}")
        except (ConfigError, ValueError) as exc:
            points.append(SweepPoint(warning, critical, error=str(exc)))
            continue
        engine = OfflineEngine(config)
        tally = ReplayTally()
        with quiet_daemon_logs():
            for data in events:
                tally.add(data, engine.judge(data))
        report = score(labelled_set, tally, config.settings_for(""))
        flags = {}
        for run_id in good:
            hit = next((hit for hit in tally.runs[run_id].hits if hit.action != "reject"), None)
            if hit is not None:
                flags[run_id] = (hit.action, hit.detector)
        points.append(SweepPoint(
            warning, critical, good_warned=len(flags), good_blocked=len(report.wrongly_blocked),
            loops=report.looping_runs, loops_caught=report.looping_runs - len(report.missed),
            loops_enforced=sum(1 for loop in report.loops if loop.enforced_after is not None), good_flags=flags))
    return points


# ---------------------------------------------------------------------------------------------
# Closest calls


@dataclass(frozen=True, slots=True)
class CloseCall:
    run_id: str
    longest_repeat: int
    repeated: str
    flagged_at: int | None  # the highest W of the sweep at which the run got any verdict but ALLOW
    action: str = ""  # … that verdict's action and detector
    detector: str = ""


def close_calls(good_ids: Iterable[str], shapes: dict[str, RunShape], sweep: Sequence[SweepPoint],
                limit: int = CLOSE_CALLS) -> list[CloseCall]:
    """Good runs nearest to being flagged: first those the sweep flags at the highest W, then by stretch."""
    calls = []
    for run_id in good_ids:
        shape = shapes.get(run_id, RunShape(run_id, 0, 0, ""))
        flagged = next(((point.warning, point.good_flags[run_id]) for point in sorted(
            sweep, key=lambda p: -p.warning) if run_id in point.good_flags), None)
        calls.append(CloseCall(run_id, shape.longest_repeat, shape.repeated,
                               None if flagged is None else flagged[0],
                               *(flagged[1] if flagged else ("", ""))))
    calls.sort(key=lambda call: (-(call.flagged_at or 0), -call.longest_repeat, call.run_id))
    return calls[:limit]


# ---------------------------------------------------------------------------------------------
# The report


@dataclass
class HtmlReport:
    report: EvaluationReport
    labels: tuple[Label, ...]
    shapes: dict[str, RunShape]
    source: str  # "offline, embedded default config", "daemon at HOST:PORT"
    settings: LoopDetectionSettings | None = None  # known offline
    sweep: list[SweepPoint] | None = None
    sweep_note: str = ""
    version: str = ""
    generated: str = ""


def build_html_report(labelled_set: LabelledSet, report: EvaluationReport, *, source: str,
                      settings: LoopDetectionSettings | None = None, sweep_base_text: str | None = None,
                      sweep: bool = True) -> HtmlReport:
    """Everything the page shows. The sweep runs when `sweep` and the settings are known (offline)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        daemon_version = version("loopwarden")
    except PackageNotFoundError:
        daemon_version = "unknown"
    points, note = None, ""
    if sweep and settings is not None:
        points = threshold_sweep(labelled_set, sweep_base_text)
    elif sweep:
        note = "The threshold sweep replays the set in-process and is left out when evaluating through a daemon."
    return HtmlReport(report, labelled_set.labels, run_shapes(labelled_set), source, settings, points, note,
                      daemon_version, datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def _shown_path(path: str) -> str:
    """A path as a reader would type it: relative to the working directory when under it."""
    import os

    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _figure(figure_id: str, heading: str, chart: str, caption: str) -> str:
    return (f'<figure id="{figure_id}"><h2>{escape(heading)}</h2>{chart}'
            f"<figcaption>{caption}</figcaption></figure>")


def _median(values: Sequence[int]) -> str:
    return f"{statistics.median(values):g}" if values else "-"


def detection_chart(report: EvaluationReport) -> str:
    detectors = list(dict.fromkeys(loop.detector for loop in report.loops))
    rows = []
    for detector in detectors:
        loops = [loop for loop in report.loops if loop.detector == detector]
        detected = [loop for loop in loops if loop.detected_after is not None]
        enforced = [loop for loop in loops if loop.enforced_after is not None]
        kinds = [kind for kind in dict.fromkeys(loop.kind for loop in loops) if kind != detector]
        rows.append(StripRow(
            detector, f"{len(detected)}/{len(loops)} caught" + (f"\n{', '.join(kinds)}" if kinds else ""),
            [[(cast(int, loop.detected_after), f"{loop.run_id}: first {loop.detected_action.upper()} at call "
                                    f"{loop.detected_after}") for loop in detected],
             [(cast(int, loop.enforced_after), f"{loop.run_id}: {loop.detector} blocked or aborted at call "
                                    f"{loop.enforced_after}") for loop in enforced]]))
    series = [Series("first verdict of the expected detector", GOOD_COLOR, ()),
              Series("first BLOCK or ABORT", BLOCK_COLOR, ())]
    return strip_plot("calls-until-detection", "Calls from the loop's first call until detection, per detector",
                      rows, series, "calls since the loop's first call (the first call = 1)")


def stretch_chart(data: HtmlReport) -> str:
    labels = {label.run_id: label for label in data.labels}
    bins = [str(n) for n in range(STRETCH_CAP)] + [f"{STRETCH_CAP}+"]
    good = [0] * len(bins)
    looping = [0] * len(bins)
    for run_id, label in labels.items():
        shape = data.shapes.get(run_id)
        stretch = min(shape.longest_repeat if shape else 0, STRETCH_CAP)
        (looping if label.looping else good)[stretch] += 1
    markers = []
    if data.settings is not None:
        markers = [Marker(data.settings.warning_threshold, f"W = {data.settings.warning_threshold}", WARN_COLOR),
                   Marker(data.settings.critical_threshold, f"C = {data.settings.critical_threshold}", BLOCK_COLOR)]
    return histogram_pair("repeat-stretch", "Longest repeat stretch per run, good runs against looping runs", bins,
                          [Series("good runs", GOOD_COLOR, good), Series("looping runs", LOOP_COLOR, looping)],
                          "longest repeat stretch (consecutive calls repeating one of the two calls before them)",
                          markers)


def sweep_chart(data: HtmlReport) -> str:
    points = [point for point in data.sweep or () if not point.error]
    xs = [point.warning for point in points]
    report = data.report
    markers = []
    if data.settings is not None:
        markers = [Marker(data.settings.warning_threshold, f"configured W = {data.settings.warning_threshold}")]
    panels = [
        LinePanel(f"Good runs (of {report.good_runs})", "good runs", max(
            [5, *(p.good_warned for p in points)]), [
            Series("blocked", BLOCK_COLOR, [p.good_blocked for p in points]),
            Series("warned or blocked", WARN_COLOR, [p.good_warned for p in points], dash="6 4")]),
        LinePanel(f"Loops (of {report.looping_runs})", "looping runs", max(report.looping_runs, 1), [
            Series("blocked or aborted", ENFORCED_COLOR, [p.loops_enforced for p in points]),
            Series("caught", CAUGHT_COLOR, [p.loops_caught for p in points], dash="6 4")]),
    ]
    return line_panels("threshold-sweep", "Threshold sweep: W from 3 to 20 with C = W + 1", xs, panels,
                       "W (C = W + 1)", markers)


def _cards(report: EvaluationReport) -> str:
    cards = [
        ("good runs wrongly blocked", f"{len(report.wrongly_blocked)} / {report.good_runs}",
         bool(report.wrongly_blocked)),
        ("good runs warned", f"{len(report.good_warned)} / {report.good_runs}", False),
        ("loops missed", f"{len(report.missed)} / {report.looping_runs}", bool(report.missed)),
        ("median calls until detection", f"{report.detection.median:g}" if report.detection.n else "-", False),
        ("median calls until block/abort", f"{report.enforcement.median:g}" if report.enforcement.n else "-", False),
        ("result", "PASS" if report.ok else "FAIL", not report.ok),
    ]
    return '<div class="cards">' + "".join(
        f'<div class="card{" bad" if bad else ""}"><div class="value">{escape(value)}</div>'
        f'<div class="label">{escape(label)}</div></div>' for label, value, bad in cards) + "</div>"


def _close_calls_table(data: HtmlReport) -> str:
    good = [label.run_id for label in data.labels if not label.looping]
    calls = close_calls(good, data.shapes, data.sweep or ())
    configured = data.settings.warning_threshold if data.settings else None
    rows = []
    for call in calls:
        if call.flagged_at is None:
            flagged = "never (W ≥ 3)" if data.sweep else "-"
            margin = ""
        else:
            flagged = f"W ≤ {call.flagged_at}: {call.action.upper()} {call.detector}"
            margin = "" if configured is None else str(configured - call.flagged_at)
        rows.append(f"<tr><td><code>{escape(call.run_id)}</code></td><td class=num>{call.longest_repeat}</td>"
                    f"<td>{escape(call.repeated) or '-'}</td><td>{escape(flagged)}</td>"
                    f"<td class=num>{margin}</td></tr>")
    return ('<table id="closest-calls"><thead><tr><th>good run</th><th>longest repeat stretch</th><th>repeated</th>'
            "<th>first flagged in the sweep</th><th>W to spare</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _kinds_table(report: EvaluationReport) -> str:
    rows = []
    for kind in report.kinds:
        predicted = kind.predicted
        rows.append(
            f"<tr><td>{escape(kind.kind)}</td><td>{escape(kind.detector)}</td><td class=num>{kind.runs}</td>"
            f"<td class=num>{kind.detected}</td><td>{escape(str(kind.detection))}</td>"
            f"<td>{'-' if predicted is None else f'{predicted.detection} ({predicted.detection_action})'}</td>"
            f"<td class=num>{kind.enforced}</td><td>{escape(str(kind.enforcement))}</td>"
            f"<td>{'-' if predicted is None or predicted.enforcement is None else predicted.enforcement}</td>"
            f"<td>{'-' if predicted is None else f'{kind.as_predicted}/{kind.runs}'}</td></tr>")
    return ('<table id="loop-kinds"><thead><tr><th>kind</th><th>detector</th><th>runs</th><th>detected</th>'
            "<th>until detection</th><th>predicted</th><th>enforced</th><th>until block/abort</th><th>predicted</th>"
            "<th>as predicted</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _sweep_failures(data: HtmlReport) -> str:
    failed = [point for point in data.sweep or () if point.error]
    if not failed:
        return ""
    return "<p class=note>Left out of the sweep: " + "; ".join(
        f"W = {point.warning}: {escape(point.error)}" for point in failed) + "</p>"


STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', sans-serif; color: #1a202c;
       background: #f7fafc; margin: 0; }
main { max-width: 880px; margin: 0 auto; padding: 24px 28px 48px; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 0 0 8px; }
.meta { color: #718096; font-size: 13px; margin: 0 0 18px; } .meta code { font-size: 12px; }
.cards { display: grid; grid-template-columns: repeat(3, 1fr); gap: 10px; margin-bottom: 22px; }
.card { border: 1px solid #e2e8f0; border-radius: 6px; padding: 10px 14px; }
.card .value { font-size: 22px; font-weight: 600; } .card .label { font-size: 12px; color: #4a5568; }
.card.bad { border-color: #c53030; } .card.bad .value { color: #c53030; }
figure { margin: 0 0 28px; } figcaption { font-size: 13px; color: #4a5568; margin-top: 4px; line-height: 1.45; }
svg { max-width: 100%; height: auto; display: block; }
table { border-collapse: collapse; font-size: 12px; width: 100%; margin-bottom: 8px; }
th, td { text-align: left; padding: 5px 6px; border-bottom: 1px solid #e2e8f0; vertical-align: top; }
td { white-space: nowrap; } td code { font-size: 12px; }
th { background: #edf2f7; font-weight: 600; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
section { margin-bottom: 28px; } .note { font-size: 13px; color: #718096; }
"""


def render_html(data: HtmlReport) -> str:
    """The whole page: one string, no external resource."""
    report = data.report
    settings = data.settings
    thresholds = ""
    if settings is not None:
        thresholds = (f" · W {settings.warning_threshold}, C {settings.critical_threshold}, "
                      f"U {settings.unknown_tool_threshold}, G {settings.global_circuit_breaker_threshold}")
    figures = [
        _figure("calls-until-detection", "Calls until detection, per detector", detection_chart(report),
                "Each looping run is one dot per row: when its expected detector first answered (blue) and first "
                "blocked or aborted (red), counted in tool calls from the injected loop's first call (= 1). "
                "Equal values stack into a column."),
        _figure("repeat-stretch", "Longest repeat stretch: good runs against looping runs", stretch_chart(data),
                "A run's longest repeat stretch is the most consecutive tool calls that each repeat one of the two "
                "calls before them (same tool, same arguments): one call over and over, or two alternating. The "
                "dashed lines are the configured warning (W) and critical (C) thresholds."),
    ]
    if data.sweep:
        figures.append(_figure(
            "threshold-sweep", "Threshold sweep", sweep_chart(data),
            "The set replayed in-process once per W from 3 to 20, with C = W + 1 and everything else as "
            "configured. Left: good runs given any warning or block, and those blocked. Right: loops whose "
            "expected detector fired, and those blocked or aborted." + _sweep_failures(data)))
    close_heading = "Closest calls among good runs"
    close_caption = ("The good runs nearest to being flagged: the highest W of the sweep at which each got a verdict "
                     "other than ALLOW (and from which detector), then the longest repeat stretch. "
                     "&ldquo;W to spare&rdquo; is how far below the configured W that is.")
    if not data.sweep:
        close_caption = ("The good runs with the longest repeat stretches. " + escape(data.sweep_note))
    return "".join([
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>loopwarden evaluation report</title><style>", STYLE, "</style></head><body><main>",
        "<h1>loopwarden evaluation report</h1>",
        f'<p class="meta">labelled set <code>{escape(_shown_path(report.manifest))}</code> · '
        f"{report.good_runs} good runs, "
        f"{report.looping_runs} looping runs · {escape(data.source)}{escape(thresholds)} · loopwarden "
        f"{escape(data.version)} · {escape(data.generated)}</p>",
        _cards(report),
        *figures,
        f'<section><h2>{close_heading}</h2>{_close_calls_table(data)}<p class="note">{close_caption}</p></section>',
        f"<section><h2>Loops by kind</h2>{_kinds_table(report)}"
        '<p class="note">Calls from the loop\'s first call, min / median / max. Predicted: where the effective '
        "thresholds say the kind is caught (offline only).</p></section>",
        "</main></body></html>\n",
    ])


def write_html(path: str, data: HtmlReport) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(render_html(data))
