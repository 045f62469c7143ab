"""Labelled sets: runs marked good or looping, replayed and scored.

A labelled set is a manifest (JSON) naming trace files and labelling runs in them:

    {"format": "loopwarden-labelled-set/1",
     "traces": [{"path": "positives.jsonl.gz", "format": "events", "sha256": "<of the uncompressed text>"}, ...],
     "runs": [{"run_id": "...", "label": "good"},
              {"run_id": "...", "label": "looping", "kind": "generic_repeat", "detector": "generic_repeat",
               "loop_start_seq": 25}, ...]}

Trace paths are relative to the manifest. `loop_start_seq` is the seq of the injected loop's
first tool_call; "calls until detection" counts tool calls from that one (= 1) up to the call
whose verdict (or whose outcome's verdict) first came from the expected detector.

Scoring: a good run is *wrongly blocked* when any of its verdicts is BLOCK or ABORT (warnings are
counted separately); a looping run is *missed* when its expected detector never fired from the
loop's first call on. Under shadow mode the action that would have been enforced is scored.
"""
from __future__ import annotations

import hashlib
import json
import os
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loopwarden.replay import FORMATS, Observed, ReplayTally, RunTally, TraceEvent, open_text, read_trace

from ..config import Config
from ..config.detection import LoopDetectionSettings
from .offline import OfflineEngine, quiet_daemon_logs

MANIFEST_FORMAT = "loopwarden-labelled-set/1"
LABELS = ("good", "looping")
ENFORCING = ("block", "abort")


class LabelledSetError(ValueError):
    """A manifest that cannot be used (unreadable, malformed, or naming traces that are missing or changed)."""


# ---------------------------------------------------------------------------------------------
# Loop kinds and what the thresholds predict for them


@dataclass(frozen=True, slots=True)
class Prediction:
    """Where the thresholds say a loop of this kind is caught, counted in calls from its first call."""

    detection: int  # first verdict of the expected detector
    detection_action: str
    enforcement: int | None  # first BLOCK/ABORT of the expected detector (None: never enforced)


@dataclass(frozen=True, slots=True)
class LoopKind:
    name: str
    detector: str
    description: str
    predict: Callable[[LoopDetectionSettings], Prediction | None]


def _rolling(settings: LoopDetectionSettings, switch: bool, needed_history: int) -> bool:
    return settings.enabled is True and switch and settings.history_size >= needed_history


def _predict_repeat(settings: LoopDetectionSettings) -> Prediction | None:
    # Row 8 warns once W identical calls are in history (the (W+1)-th call); row 7 blocks once C
    # of them returned the same result (the (C+1)-th).
    w, c = settings.warning_threshold, settings.critical_threshold
    if not _rolling(settings, settings.generic_repeat, c):
        return None
    return Prediction(w + 1, "warn", c + 1)


def _predict_poll(settings: LoopDetectionSettings) -> Prediction | None:
    w, c = settings.warning_threshold, settings.critical_threshold
    if not _rolling(settings, settings.known_poll_no_progress, c):
        return None
    return Prediction(w + 1, "warn", c + 1)


def _predict_ping_pong(settings: LoopDetectionSettings) -> Prediction | None:
    # The count includes the current call: the W-th call of the alternation is warned and, with
    # stable results on both sides, the C-th is blocked.
    w, c = settings.warning_threshold, settings.critical_threshold
    if not _rolling(settings, settings.ping_pong, c - 1):
        return None
    return Prediction(w, "warn", c)


def _predict_unknown_tool(settings: LoopDetectionSettings) -> Prediction | None:
    u = settings.unknown_tool_threshold
    if not _rolling(settings, True, u):
        return None
    return Prediction(u + 1, "block", u + 1)


def _predict_post_compaction(settings: LoopDetectionSettings) -> Prediction | None:
    # The N-th identical outcome after the compaction retry aborts the run.
    if not settings.compaction_guard_on:
        return None
    n = settings.compaction_window_size
    return Prediction(n, "abort", n)


LOOP_KINDS: dict[str, LoopKind] = {kind.name: kind for kind in (
    LoopKind("generic_repeat", "generic_repeat",
             "the same call with the same result, repeated past the critical threshold", _predict_repeat),
    LoopKind("process_poll", "known_poll_no_progress",
             "`process` polls of a background exec whose result never changes", _predict_poll),
    LoopKind("command_status_poll", "known_poll_no_progress",
             "`command_status` polls of a background command whose output never changes", _predict_poll),
    LoopKind("ping_pong", "ping_pong",
             "two calls alternating, each with a stable result", _predict_ping_pong),
    LoopKind("unknown_tool", "unknown_tool_repeat",
             "retries of a tool the agent does not have (`Tool foo not found`)", _predict_unknown_tool),
    LoopKind("post_compaction", "post_compaction_guard",
             "after a compaction retry, the same (tool, args, result) again and again", _predict_post_compaction),
)}


# ---------------------------------------------------------------------------------------------
# Manifest


@dataclass(frozen=True, slots=True)
class TraceRef:
    path: Path
    format: str = "events"
    sha256: str | None = None  # of the (uncompressed) text


@dataclass(frozen=True, slots=True)
class Label:
    run_id: str
    label: str
    kind: str = ""
    detector: str = ""
    loop_start_seq: int = 0

    @property
    def looping(self) -> bool:
        return self.label == "looping"


@dataclass(frozen=True)
class LabelledSet:
    manifest: Path
    traces: tuple[TraceRef, ...]
    labels: tuple[Label, ...]

    def events(self, verify: bool = True) -> Iterator[TraceEvent]:
        """Every event of every trace, after checking each trace is the one the labels were made for."""
        for trace in self.traces:
            if verify:
                check_trace(trace)
            yield from read_trace(trace.path, trace.format)


def text_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a trace's text (decompressed for `.gz`, so the digest does not depend on zlib)."""
    digest = hashlib.sha256()
    with open_text(path) as handle:
        for chunk in iter(lambda: handle.read(1 << 20), ""):
            digest.update(chunk.encode("utf-8"))
    return digest.hexdigest()


def check_trace(trace: TraceRef) -> None:
    if not trace.path.is_file():
        raise LabelledSetError(f"trace file missing: {trace.path}")
    if trace.sha256 is not None and text_sha256(trace.path) != trace.sha256:
        raise LabelledSetError(f"trace file changed since the labels were made: {trace.path} "
                               f"(sha256 is not {trace.sha256}); regenerate the labelled set")


def load_labelled_set(path: str | os.PathLike[str]) -> LabelledSet:
    manifest = Path(path)
    try:
        document = json.loads(manifest.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LabelledSetError(f"{manifest}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise LabelledSetError(f"{manifest}: not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != MANIFEST_FORMAT:
        raise LabelledSetError(f"{manifest}: not a labelled set (expected \"format\": \"{MANIFEST_FORMAT}\")")
    traces = tuple(_trace_ref(entry, manifest, i) for i, entry in enumerate(_list(document, "traces", manifest)))
    labels = tuple(_label(entry, manifest, i) for i, entry in enumerate(_list(document, "runs", manifest)))
    seen: set[str] = set()
    for label in labels:
        if label.run_id in seen:
            raise LabelledSetError(f"{manifest}: run {label.run_id!r} is labelled twice")
        seen.add(label.run_id)
    return LabelledSet(manifest, traces, labels)


def _list(document: dict, key: str, manifest: Path) -> list:
    value = document.get(key)
    if not isinstance(value, list):
        raise LabelledSetError(f"{manifest}: `{key}` must be a list")
    return value


def _trace_ref(entry: Any, manifest: Path, index: int) -> TraceRef:
    where = f"{manifest}: traces[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
        raise LabelledSetError(f"{where}: needs a `path` string")
    trace_format = entry.get("format", "events")
    if trace_format not in FORMATS:
        raise LabelledSetError(f"{where}: format must be one of {', '.join(FORMATS)}")
    sha = entry.get("sha256")
    if sha is not None and not isinstance(sha, str):
        raise LabelledSetError(f"{where}: sha256 must be a string")
    return TraceRef(Path(os.path.normpath(manifest.parent / entry["path"])), trace_format, sha)


def _label(entry: Any, manifest: Path, index: int) -> Label:
    where = f"{manifest}: runs[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("run_id"), str) or not entry["run_id"].strip():
        raise LabelledSetError(f"{where}: needs a `run_id` string")
    label = entry.get("label")
    if label not in LABELS:
        raise LabelledSetError(f"{where}: label must be one of {', '.join(LABELS)}")
    if label == "good":
        return Label(entry["run_id"].strip(), label)
    kind = entry.get("kind", "")
    detector = entry.get("detector") or (LOOP_KINDS[kind].detector if kind in LOOP_KINDS else "")
    start = entry.get("loop_start_seq")
    if not isinstance(detector, str) or not detector:
        raise LabelledSetError(f"{where}: a looping run needs its expected `detector` (or a known `kind`)")
    if isinstance(start, bool) or not isinstance(start, int):
        raise LabelledSetError(f"{where}: a looping run needs `loop_start_seq`, the seq of the loop's first tool call")
    return Label(entry["run_id"].strip(), label, str(kind), detector, start)


# ---------------------------------------------------------------------------------------------
# Scoring


@dataclass(frozen=True, slots=True)
class Stats:
    n: int = 0
    min: int | None = None
    median: float | None = None
    max: int | None = None

    @classmethod
    def of(cls, values: Iterable[int]) -> Stats:
        values = sorted(values)
        if not values:
            return cls()
        return cls(len(values), values[0], statistics.median(values), values[-1])

    def __str__(self) -> str:
        if not self.n:
            return "-"
        return f"{self.min} / {self.median:g} / {self.max}"


@dataclass(frozen=True, slots=True)
class LoopResult:
    run_id: str
    kind: str
    detector: str  # expected
    loop_start_seq: int
    detected_after: int | None  # calls from the loop's first call to the expected detector's first verdict
    detected_action: str
    enforced_after: int | None  # … to its first BLOCK/ABORT
    first_detector: str  # the detector of the first non-allow verdict from the loop's first call on
    flagged_before_loop: int  # non-allow verdicts before the loop started


@dataclass(frozen=True, slots=True)
class KindSummary:
    kind: str
    detector: str
    runs: int
    detected: int
    detection: Stats
    enforced: int
    enforcement: Stats
    predicted: Prediction | None
    as_predicted: int  # runs detected and enforced exactly where the thresholds predict


@dataclass
class EvaluationReport:
    manifest: str
    good_runs: int
    looping_runs: int
    wrongly_blocked: list[str]
    good_warned: list[str]
    missed: list[str]
    other_detector_first: list[str]
    flagged_before_loop: list[str]
    rejected_events: int
    unlabelled_runs: int
    detection: Stats
    enforcement: Stats
    kinds: list[KindSummary]
    loops: list[LoopResult] = field(repr=False, default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing wrongly blocked, nothing missed, nothing rejected as malformed input."""
        return not self.wrongly_blocked and not self.missed and not self.rejected_events

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        return data


def replay_labelled_set(labelled_set: LabelledSet, judge: Callable[[Mapping[str, Any]], Observed]) -> ReplayTally:
    """Replay every trace of the set through `judge` (the daemon or an OfflineEngine)."""
    tally = ReplayTally()
    for event in labelled_set.events():
        tally.add(event.data, judge(event.data))
    return tally


def evaluate_offline(labelled_set: LabelledSet, config: Config) -> EvaluationReport:
    """Replay the set through an in-process engine on `config` and score it (global agent settings)."""
    engine = OfflineEngine(config)
    with quiet_daemon_logs():
        tally = replay_labelled_set(labelled_set, engine.judge)
    return score(labelled_set, tally, config.settings_for(""))


def score(labelled_set: LabelledSet, tally: ReplayTally,
          settings: LoopDetectionSettings | None = None) -> EvaluationReport:
    """The report for a replayed set; `settings` (when known) adds what the thresholds predict."""
    missing = [label.run_id for label in labelled_set.labels if label.run_id not in tally.runs]
    if missing:
        raise LabelledSetError(f"{labelled_set.manifest}: {len(missing)} labelled run(s) are in no trace, "
                               f"e.g. {missing[0]!r}")
    good = [label for label in labelled_set.labels if not label.looping]
    looping = [label for label in labelled_set.labels if label.looping]
    loops = [_loop_result(label, tally.runs[label.run_id], labelled_set.manifest) for label in looping]
    good_runs = [tally.runs[label.run_id] for label in good]
    labelled_ids = {label.run_id for label in labelled_set.labels}
    kinds = []
    for kind in dict.fromkeys(label.kind for label in looping):
        results = [loop for loop in loops if loop.kind == kind]
        known = LOOP_KINDS.get(kind)
        predicted = known.predict(settings) if known and settings else None
        kinds.append(KindSummary(
            kind=kind, detector=results[0].detector, runs=len(results),
            detected=sum(1 for loop in results if loop.detected_after is not None),
            detection=Stats.of(loop.detected_after for loop in results if loop.detected_after is not None),
            enforced=sum(1 for loop in results if loop.enforced_after is not None),
            enforcement=Stats.of(loop.enforced_after for loop in results if loop.enforced_after is not None),
            predicted=predicted,
            as_predicted=0 if predicted is None else sum(
                1 for loop in results
                if (loop.detected_after, loop.detected_action, loop.enforced_after)
                == (predicted.detection, predicted.detection_action, predicted.enforcement)),
        ))
    return EvaluationReport(
        manifest=str(labelled_set.manifest),
        good_runs=len(good),
        looping_runs=len(looping),
        wrongly_blocked=[run.run_id for run in good_runs if any(run.counts.get(a, 0) for a in ENFORCING)],
        good_warned=[run.run_id for run in good_runs if run.counts.get("warn", 0)],
        missed=[loop.run_id for loop in loops if loop.detected_after is None],
        other_detector_first=[loop.run_id for loop in loops
                              if loop.first_detector and loop.first_detector != loop.detector],
        flagged_before_loop=[loop.run_id for loop in loops if loop.flagged_before_loop],
        rejected_events=sum(run.counts.get("reject", 0) for run in tally.runs.values()
                            if run.run_id in labelled_ids),
        unlabelled_runs=len(tally.runs.keys() - labelled_ids),
        detection=Stats.of(loop.detected_after for loop in loops if loop.detected_after is not None),
        enforcement=Stats.of(loop.enforced_after for loop in loops if loop.enforced_after is not None),
        kinds=kinds,
        loops=loops,
    )


def _loop_result(label: Label, run: RunTally, manifest: Path) -> LoopResult:
    start = run.call_at_seq.get(label.loop_start_seq)
    if start is None:
        raise LabelledSetError(f"{manifest}: run {label.run_id!r} has no tool_call with seq "
                               f"{label.loop_start_seq} (its loop_start_seq)")
    start_event, start_call = start
    during = [hit for hit in run.hits if hit.event >= start_event and hit.action != "reject"]
    expected = [hit for hit in during if hit.detector == label.detector]
    first = expected[0] if expected else None
    enforced = next((hit for hit in expected if hit.action in ENFORCING), None)
    return LoopResult(
        run_id=label.run_id, kind=label.kind, detector=label.detector, loop_start_seq=label.loop_start_seq,
        detected_after=None if first is None else first.call - start_call + 1,
        detected_action="" if first is None else first.action,
        enforced_after=None if enforced is None else enforced.call - start_call + 1,
        first_detector=during[0].detector if during else "",
        flagged_before_loop=sum(1 for hit in run.hits if hit.event < start_event and hit.action != "reject"),
    )


def format_report(report: EvaluationReport) -> list[str]:
    """The report as text lines: the headline figures, then one row per loop kind."""
    lines = [
        f"labelled set: {report.manifest}",
        f"runs: {report.good_runs} good, {report.looping_runs} looping"
        + (f" ({report.unlabelled_runs} unlabelled runs replayed and ignored)" if report.unlabelled_runs else ""),
        f"good runs wrongly blocked (any BLOCK/ABORT): {len(report.wrongly_blocked)}",
        f"good runs warned: {len(report.good_warned)}",
        f"loops missed (expected detector never fired): {len(report.missed)}",
        f"loops first flagged by another detector: {len(report.other_detector_first)}",
        f"looping runs flagged before their loop started: {len(report.flagged_before_loop)}",
        f"events rejected as malformed: {report.rejected_events}",
        f"calls until detection (min / median / max): {report.detection}",
        f"calls until block/abort (min / median / max): {report.enforcement}",
        "",
    ]
    header = ("kind", "detector", "runs", "detected", "calls until detection", "predicted",
              "enforced", "calls until block/abort", "predicted", "as predicted")
    rows = [header]
    for kind in report.kinds:
        predicted = kind.predicted
        rows.append((
            kind.kind, kind.detector, str(kind.runs), str(kind.detected), str(kind.detection),
            "-" if predicted is None else f"{predicted.detection} ({predicted.detection_action})",
            str(kind.enforced), str(kind.enforcement),
            "-" if predicted is None or predicted.enforcement is None else str(predicted.enforcement),
            "-" if predicted is None else f"{kind.as_predicted}/{kind.runs}",
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    for title, run_ids in (("wrongly blocked", report.wrongly_blocked), ("warned", report.good_warned),
                           ("missed", report.missed)):
        if run_ids:
            lines += ["", f"{title}: " + ", ".join(run_ids[:20]) + (" …" if len(run_ids) > 20 else "")]
    lines += ["", "result: " + ("PASS" if report.ok else "FAIL")]
    return lines
