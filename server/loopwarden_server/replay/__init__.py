"""Offline replay and evaluation: the daemon's engine in-process, and labelled sets scored with it.

A library the `loopwarden replay --offline` and `loopwarden evaluate` commands call. It drives the
daemon's own compiled core, never grpc or the transport, so offline verdicts are the daemon's
verdicts. Reading traces and tallying verdicts is the client's (`loopwarden.replay`): a replay
against a daemon needs no daemon code.
"""
from .labelled import (
    LOOP_KINDS, EvaluationReport, KindSummary, Label, LabelledSet, LabelledSetError, LoopKind, LoopResult,
    Prediction, Stats, TraceRef, evaluate_offline, format_report, load_labelled_set, replay_labelled_set, score,
    text_sha256,
)
from .offline import OfflineEngine, quiet_daemon_logs, silence_decision_logs

__all__ = [
    "EvaluationReport", "KindSummary", "LOOP_KINDS", "Label", "LabelledSet", "LabelledSetError",
    "LoopKind", "LoopResult", "OfflineEngine", "Prediction", "Stats", "TraceRef", "evaluate_offline",
    "format_report", "load_labelled_set", "quiet_daemon_logs", "replay_labelled_set", "score",
    "silence_decision_logs", "text_sha256",
]
