"""Replaying traces: reading trace files into events, and tallying the verdicts per run.

Shared by `loopwarden replay` against a daemon and by the daemon's in-process (offline) replay
and evaluation, which take the same events and report the same way.
"""
from .observed import Judge, Observed
from .tally import Hit, ReplayTally, RunTally, run_table, summary_line
from .traces import FORMATS, TraceError, TraceEvent, conversation_events, open_text, read_trace

__all__ = [
    "FORMATS", "Hit", "Judge", "Observed", "ReplayTally", "RunTally", "TraceError", "TraceEvent",
    "conversation_events", "open_text", "read_trace", "run_table", "summary_line",
]
