//! What one request or event is answered with: an `Answer`, its `Summary` (counter deltas,
//! latency, log lines, evictions), `Verdict`s, and the `Pending` request a lazy call sets aside.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::engine::Action;
use crate::pb;
use crate::service::{self, Decision, EventRef, Refusal, Side, Summary};

/// One metric increment: `count` more on counter `counter` (an index into COUNTERS) with the
/// labels `first`, `second` (the counter's own, "" where it has fewer) and `agent`.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
pub(super) struct CounterDelta {
    pub(super) counter: u8,
    pub(super) first: &'static str,
    pub(super) second: &'static str,
    pub(super) agent: String,
    pub(super) count: u64,
}

/// A decision worth a log line: its level (logging's numbers), message and structured fields.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
pub(super) struct DecisionLog {
    pub(super) level: u8,
    pub(super) message: String,
    pub(super) extra: Py<PyDict>,
}

/// One decision as Python reads it. `detector` and `level` are "" on a plain verdict.
#[pyclass(module = "loopwarden_core", name = "Verdict", frozen, get_all)]
pub(super) struct PyVerdict {
    pub(super) seq: u64,
    pub(super) run_id: String,
    pub(super) agent_id: String,
    pub(super) action: &'static str,
    pub(super) detector: &'static str,
    pub(super) level: &'static str,
    pub(super) count: u32,
    pub(super) message: String,
    pub(super) warning_key: String,
    pub(super) announce: bool,
    pub(super) paired_tool_name: String,
    pub(super) error_code: &'static str,
    pub(super) tool_name: String,
    pub(super) decision_id: String,
    pub(super) evidence_seqs: Vec<u64>,
    pub(super) evidence_call_ids: Vec<String>,
    pub(super) loop_started_seq: u64,
    pub(super) shadow_action: Option<&'static str>,
    /// The event's kind and tool call id, for span events in the GenAI conventions (tracing.py).
    pub(super) kind: &'static str,
    pub(super) tool_call_id: String,
}

pub(super) fn label(name: &'static str) -> &'static str {
    if name == "none" { "" } else { name }
}

pub(super) fn py_verdict(d: &Decision, event: &EventRef) -> PyVerdict {
    let v = &d.verdict;
    PyVerdict {
        seq: d.seq,
        run_id: d.run_id.clone(),
        agent_id: event.agent_id.to_string(),
        action: v.action.name(),
        detector: label(v.detector.name()),
        level: label(v.level.name()),
        count: v.count,
        message: v.message.clone(),
        warning_key: v.warning_key.clone(),
        announce: v.announce,
        paired_tool_name: v.paired_tool_name.clone(),
        error_code: v.error_code,
        tool_name: v.tool_name.clone(),
        decision_id: d.decision_id.clone(),
        evidence_seqs: v.evidence_seqs.clone(),
        evidence_call_ids: v.evidence_call_ids.clone(),
        loop_started_seq: v.evidence_seqs.first().copied().unwrap_or(0),
        shadow_action: v.shadow_action.map(Action::name),
        kind: service::kind_name(&event.kind),
        tool_call_id: event.tool_call_id().to_string(),
    }
}

/// A decision a tracer reports: anything but a plain ALLOW (warnings, blocks, aborts, rejects,
/// shadow verdicts: every one that carries a decision id or another action).
pub(super) fn reportable(d: &Decision) -> bool {
    d.verdict.action != Action::Allow || !d.decision_id.is_empty()
}

/// What one request did besides its verdicts: metric increments, latency, log lines, evictions.
#[pyclass(module = "loopwarden_core", name = "Summary", frozen, get_all)]
pub(super) struct PySummary {
    pub(super) counters: Py<PyList>,
    pub(super) latency_buckets: Vec<u64>,
    pub(super) latency_sum: f64,
    pub(super) logs: Py<PyList>,
    pub(super) evictions: Vec<&'static str>,
    /// Events of a lazily loaded request whose run was already in memory (runs_loaded{memory}).
    pub(super) held_runs: u64,
    /// With `report`: the request's decisions other than a plain ALLOW, for span events.
    pub(super) reported: Py<PyList>,
}

pub(super) fn log_extra<'py>(py: Python<'py>, line: &service::LogLine) -> PyResult<Bound<'py, PyDict>> {
    let v = &line.verdict;
    let extra = PyDict::new(py);
    extra.set_item("decision_id", &line.decision_id)?;
    extra.set_item("tenant", &line.tenant)?;
    extra.set_item("run_id", &line.run_id)?;
    if line.message.starts_with("internal error") {
        extra.set_item("seq", line.seq)?;
        extra.set_item("kind", line.kind)?;
    } else {
        extra.set_item("agent_id", &line.agent_id)?;
        extra.set_item("session_id", &line.session_id)?;
        extra.set_item("seq", line.seq)?;
        extra.set_item("tool", &v.tool_name)?;
        extra.set_item("action", v.action.name())?;
        extra.set_item("detector", v.detector.name())?;
        extra.set_item("count", v.count)?;
        extra.set_item("warning_key", &v.warning_key)?;
        extra.set_item("error_code", v.error_code)?;
        extra.set_item("evidence_seqs", v.evidence_seqs.clone())?;
        extra.set_item("loop_started_seq", v.evidence_seqs.first().copied().unwrap_or(0))?;
    }
    Ok(extra)
}

pub(super) fn py_summary(py: Python<'_>, summary: Summary, reported: Vec<PyVerdict>) -> PyResult<Py<PySummary>> {
    let counters = PyList::empty(py);
    for (code, labels, agent, count) in summary.counters {
        counters.append(CounterDelta { counter: code, first: labels[0], second: labels[1], agent, count })?;
    }
    let logs = PyList::empty(py);
    for line in &summary.logs {
        let extra = log_extra(py, line)?.unbind();
        logs.append(DecisionLog { level: line.level, message: line.message.clone(), extra })?;
    }
    let traced = PyList::empty(py);
    for verdict in reported {
        traced.append(verdict)?;
    }
    Py::new(py, PySummary {
        counters: counters.unbind(),
        latency_buckets: summary.latency_buckets,
        latency_sum: summary.latency_sum,
        logs: logs.unbind(),
        evictions: summary.evictions,
        held_runs: summary.held_runs,
        reported: traced.unbind(),
    })
}

/// Which answer a request wants: Evaluate's response bytes, Check's, or a hook's one Verdict.
#[derive(Clone, Copy)]
pub(super) enum Form {
    Evaluate,
    Check,
    Decide,
}

/// A decoded request waiting for its runs to be loaded from a shared state store: `resume` it
/// once they are, and it is evaluated without being decoded again.
#[pyclass(module = "loopwarden_core", frozen)]
pub(super) struct Pending {
    pub(super) form: Form,
    pub(super) events: Vec<pb::Event>,
    pub(super) side: Side,
}

/// The core's answer to one request or event. Exactly one of these holds:
/// - `response` (Evaluate/Check bytes) or `verdict` (`decide`), with `summary`;
/// - `refusal`: "undecodable", "too_many_events" or "missing_event", nothing evaluated;
/// - `missing_runs` (lazy only): runs to load first, then `Evaluator.resume(pending, ...)`.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
pub(super) struct Answer {
    pub(super) response: Option<Py<PyBytes>>,
    pub(super) verdict: Option<Py<PyVerdict>>,
    pub(super) refusal: &'static str,
    pub(super) missing_runs: Vec<MissingRun>,
    pub(super) pending: Option<Py<Pending>>,
    pub(super) summary: Option<Py<PySummary>>,
}

/// A run a lazy request names that memory lacks: load it (stored under its tree's `root`'s key)
/// before the request is resumed.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
#[derive(Clone)]
pub(super) struct MissingRun {
    pub(super) run_id: String,
    pub(super) root: String,
}

#[pymethods]
impl MissingRun {
    /// `root` defaults to the run itself (a root run).
    #[new]
    #[pyo3(signature = (run_id, root = None))]
    fn new(run_id: String, root: Option<String>) -> MissingRun {
        let root = root.unwrap_or_else(|| run_id.clone());
        MissingRun { run_id, root }
    }
}

impl Answer {
    pub(super) fn refused(reason: &'static str) -> Answer {
        Answer { response: None, verdict: None, refusal: reason, missing_runs: Vec::new(), pending: None, summary: None }
    }
}

pub(super) fn refusal_reason(r: Refusal) -> &'static str {
    match r {
        Refusal::Undecodable => "undecodable",
        Refusal::TooManyEvents => "too_many_events",
        Refusal::NotLoaded(_) => "not_loaded",
    }
}
