"""The state store's metrics, on the daemon's injected registry (one definition each)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LOAD_SOURCES = ("memory", "store", "new")
OPERATIONS = ("check", "restore", "load", "flush", "final_flush")
FLUSH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class StateMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.flush_seconds = Histogram(
            "loopwarden_state_flush_seconds", "Time one flush of the changed runs to the state store took.",
            buckets=FLUSH_BUCKETS, registry=registry)
        self.runs_flushed = Counter(
            "loopwarden_state_runs_flushed_total",
            "Runs written to (or deleted from) the state store by flushes.", registry=registry)
        self.deltas_written = Counter(
            "loopwarden_state_deltas_written_total",
            "Runs of loopwarden_state_runs_flushed_total written as a delta (what changed since the "
            "run's last full record: a store that keeps deltas, the file store) rather than whole.",
            registry=registry)
        self.runs_loaded = Counter(
            "loopwarden_state_runs_loaded_total",
            "Runs a request named, by where their state came from: memory (held), store (loaded from "
            "the state store: restored at start, or fetched on first event) or new (nowhere: a new run).",
            ["source"], registry=registry)
        self.store_errors = Counter(
            "loopwarden_state_store_errors_total",
            "State store operations that failed (the daemon keeps serving from memory).",
            ["operation"], registry=registry)
        self.dirty_runs = Gauge(
            "loopwarden_state_dirty_runs", "Runs changed since their last flush, waiting to be written.",
            registry=registry)
        self.flush_lag = Gauge(
            "loopwarden_state_flush_lag_seconds",
            "Seconds since the last successful flush while runs wait to be written (0 when none wait).",
            registry=registry)
        self.flush_interval = Gauge(
            "loopwarden_state_flush_interval_seconds", "The configured flush interval (--state-flush-interval).",
            registry=registry)
        self.runs_unmerged = Counter(
            "loopwarden_state_runs_unmerged_total",
            "Runs whose load from the shared state store failed: evaluated from memory and not "
            "written until their stored copy is merged in.", registry=registry)
        self.runs_merged = Counter(
            "loopwarden_state_runs_merged_total",
            "Runs whose stored copy was merged into the copy memory evaluated after a failed load.",
            registry=registry)
        self.unmerged_runs = Gauge(
            "loopwarden_state_unmerged_runs",
            "Runs (and tenants' exemption tables) whose load failed, waiting to be merged before a write.",
            registry=registry)
        self.misrouted_runs = Counter(
            "loopwarden_state_misrouted_runs_total",
            "Runs loaded for an event while another replica's owner lease on them was live in the "
            "shared state store: misrouted events (or the first loads after a failover).", registry=registry)
        self.fenced_writes = Counter(
            "loopwarden_state_fenced_writes_total",
            "Writes of runs another replica owns, by outcome: waiting (its lease is live: kept, "
            "written once it runs out) or dropped (it wrote since: this copy dropped, reloaded on the "
            "next event).", ["outcome"], registry=registry)
        self.store_up = Gauge(
            "loopwarden_state_store_up", "1 while the last state store operation succeeded, else 0.",
            registry=registry)
        # A gauge, not a counter: it is set before the first scrape can see it, and Prometheus
        # takes a counter's first sample as its start, so an increase() would never show it.
        self.damaged_bytes = Gauge(
            "loopwarden_state_file_damaged_bytes",
            "Bytes of the state file that were no intact record (a checksum failed between intact "
            "records) when this process restored it: copied aside to PATH.corrupt-*, and left out "
            "of the log (0: none).", registry=registry)
        for source in LOAD_SOURCES:
            self.runs_loaded.labels(source)
        for operation in OPERATIONS:
            self.store_errors.labels(operation)
        for outcome in ("waiting", "dropped"):
            self.fenced_writes.labels(outcome)
