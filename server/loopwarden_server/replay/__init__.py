"""Trace replay and evaluation: importers, the in-process (offline) engine, per-run tallies, labelled sets.

A library the `loopwarden replay` and `loopwarden evaluate` commands call. It drives the daemon's
own service layer, never grpc or the transport, so offline verdicts are the daemon's verdicts.
"""
from .labelled import (
    LOOP_KINDS, EvaluationReport, KindSummary, Label, LabelledSet, LabelledSetError, LoopKind, LoopResult,
    Prediction, Stats, TraceRef, evaluate_offline, format_report, load_labelled_set, replay_labelled_set, score,
    text_sha256,
)
from .offline import Observed, OfflineEngine, event_input, quiet_daemon_logs
from .tally import Hit, ReplayTally, RunTally, run_table, summary_line
from .traces import FORMATS, TraceError, TraceEvent, conversation_events, read_trace

__all__ = [
    "EvaluationReport", "FORMATS", "Hit", "KindSummary", "LOOP_KINDS", "Label", "LabelledSet", "LabelledSetError",
    "LoopKind", "LoopResult", "Observed", "OfflineEngine", "Prediction", "ReplayTally", "RunTally", "Stats",
    "TraceError", "TraceEvent", "TraceRef", "conversation_events", "evaluate_offline", "event_input",
    "format_report", "load_labelled_set", "quiet_daemon_logs", "read_trace", "replay_labelled_set", "run_table",
    "score", "summary_line", "text_sha256",
]
