//! The Python face: `loopwarden_core.Core` (one call per request or hook event) and the typed
//! objects it answers with, described for type checkers in `loopwarden_core.pyi`.
//!
//! Design. Python never sees the core's internals, and the core never sees a Python config
//! object: the daemon hands over compiled settings dicts once per (re)load, and per request it
//! gets back frozen objects with named fields (an `Answer`, its `Summary`, `Verdict`s, a
//! `RunView`), never positional tuples. Vocabulary the two sides share (detector ids, actions,
//! counter codes) is exported from here, so Python has no second spelling of it.

// Python keyword arguments are this face's API: a struct per call would be a second spelling of them.
#![allow(clippy::too_many_arguments)]

use prost::Message;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::engine::{args_hash_text, result_hash_text, Action, Detector, Level, Settings};
use crate::fingerprint::Catalog;
use crate::json::{canonical, decode, JsonError};
use crate::pb;
use crate::service::{self, counter, Config, Core, Decision, EventRef, Limits, Refusal, Side, Summary};

fn json_error(e: JsonError) -> PyErr {
    match e {
        JsonError::Invalid(m) => PyValueError::new_err(("invalid", m)),
        JsonError::TooDeep(m) => PyValueError::new_err(("too_deep", m)),
    }
}

// ------------------------------------------------------------------ shared vocabulary

/// Counter codes in code order: `COUNTERS[code]` names the Prometheus counter a delta goes to.
const COUNTERS: [(u8, &str); 12] = [
    (counter::EVENTS, "events"),
    (counter::REJECTED, "rejected"),
    (counter::VERDICTS, "verdicts"),
    (counter::RETRIED, "retried"),
    (counter::SHADOW, "shadow"),
    (counter::WARNINGS, "warnings"),
    (counter::BLOCKS, "blocks"),
    (counter::ESCALATION_ABORTS, "escalation_aborts"),
    (counter::GUARD_ABORTS, "guard_aborts"),
    (counter::ASKS, "asks"),
    (counter::APPROVALS, "approvals"),
    (counter::LIMIT_ABORTS, "limit_aborts"),
];

/// Every detector id a verdict can carry (the `none` of a plain verdict aside).
fn detectors() -> &'static [Detector] {
    &Detector::ALL[1..]
}

const ACTIONS: [Action; 6] = [Action::Allow, Action::Warn, Action::Block, Action::Abort, Action::Reject, Action::Ask];

// ------------------------------------------------------------------ pure functions (parity tests)

/// The canonical bytes of a JSON text (what every digest is taken over).
#[pyfunction]
#[pyo3(signature = (text, max_depth = 64))]
fn canonical_json<'py>(py: Python<'py>, text: &str, max_depth: usize) -> PyResult<Bound<'py, PyBytes>> {
    let value = decode(text, max_depth).map_err(json_error)?;
    Ok(PyBytes::new(py, &canonical(&value)))
}

fn params_value(params_json: &str) -> PyResult<crate::json::Value<'_>> {
    if params_json.trim().is_empty() {
        Ok(crate::json::Value::Object(vec![]))
    } else {
        decode(params_json, 64).map_err(json_error)
    }
}

#[pyfunction]
fn args_digest<'py>(py: Python<'py>, tool_name: &str, params_json: &str) -> PyResult<Bound<'py, PyBytes>> {
    Ok(PyBytes::new(py, &crate::fingerprint::args_digest(tool_name, &params_value(params_json)?)))
}

/// (status, digest, unknown tool name) of an outcome: status 0 = nothing recorded.
#[pyfunction]
#[pyo3(signature = (tool_name, params_json, result_json, error, provider_send_tools = vec![], extra_poll_tools = vec![]))]
fn outcome_fingerprint<'py>(
    py: Python<'py>, tool_name: &str, params_json: &str, result_json: Option<&str>, error: Option<&str>,
    provider_send_tools: Vec<String>, extra_poll_tools: Vec<String>,
) -> PyResult<(u8, Bound<'py, PyBytes>, Option<String>)> {
    let params = params_value(params_json)?;
    let has_result = error.is_none() && matches!(result_json, Some(r) if !r.is_empty());
    let result = if has_result { Some(decode(result_json.unwrap_or(""), 64).map_err(json_error)?) } else { None };
    let raw = error.or(result_json);
    let wrapped = matches!(raw, Some(r) if r.contains(crate::fingerprint::MARKER));
    let catalog = Catalog { provider_send_tools, extra_poll_tools };
    let fp = crate::fingerprint::outcome_fingerprint(tool_name, &params, result.as_ref(), error, &catalog, wrapped);
    Ok((fp.status, PyBytes::new(py, &fp.digest), fp.unknown_tool_name))
}

/// A `loopwarden.toolRules` JSON path parsed into its steps (a member name, or None for `[*]`);
/// ValueError saying what is wrong. The config loader validates and compiles paths with it.
#[pyfunction]
fn parse_json_path(text: &str) -> PyResult<Vec<Option<String>>> {
    let steps = crate::tool_rules::parse_path(text).map_err(PyValueError::new_err)?;
    Ok(steps
        .into_iter()
        .map(|step| match step {
            crate::tool_rules::Step::Key(k) => Some(String::from_utf8_lossy(&k).into_owned()),
            crate::tool_rules::Step::Each => None,
        })
        .collect())
}

/// A tool name as every rule compares it (NFKC, format characters stripped, case, aliases).
#[pyfunction]
fn normalize_tool_name(raw: &str) -> String {
    crate::toolnames::normalize_tool_name(raw)
}

// ------------------------------------------------------------------ compiled settings

fn get<'py, T: FromPyObject<'py>>(d: &Bound<'py, PyDict>, key: &str, default: T) -> PyResult<T> {
    match d.get_item(key)? {
        Some(v) => v.extract(),
        None => Ok(default),
    }
}

fn settings_from(d: &Bound<'_, PyDict>) -> PyResult<Settings> {
    crate::tables::settings_from_dict(d)
}

fn limits_from(d: &Bound<'_, PyDict>) -> PyResult<Limits> {
    let base = Limits::default();
    Ok(Limits {
        max_params_bytes: get(d, "max_params_bytes", base.max_params_bytes)?,
        max_result_bytes: get(d, "max_result_bytes", base.max_result_bytes)?,
        max_run_id_chars: get(d, "max_run_id_chars", base.max_run_id_chars)?,
        max_tool_name_chars: get(d, "max_tool_name_chars", base.max_tool_name_chars)?,
        max_agent_id_chars: get(d, "max_agent_id_chars", base.max_agent_id_chars)?,
        max_session_id_chars: get(d, "max_session_id_chars", base.max_session_id_chars)?,
        max_tool_call_id_chars: get(d, "max_tool_call_id_chars", base.max_tool_call_id_chars)?,
        max_json_depth: get(d, "max_json_depth", base.max_json_depth)?,
        max_events_per_request: get(d, "max_events_per_request", base.max_events_per_request)?,
    })
}

// ------------------------------------------------------------------ the typed answers

/// One metric increment: `count` more on counter `counter` (an index into COUNTERS) with the
/// labels `first`, `second` (the counter's own, "" where it has fewer) and `agent`.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
struct CounterDelta {
    counter: u8,
    first: &'static str,
    second: &'static str,
    agent: String,
    count: u64,
}

/// A decision worth a log line: its level (logging's numbers), message and structured fields.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
struct DecisionLog {
    level: u8,
    message: String,
    extra: Py<PyDict>,
}

/// One decision as Python reads it. `detector` and `level` are "" on a plain verdict.
#[pyclass(module = "loopwarden_core", name = "Verdict", frozen, get_all)]
struct PyVerdict {
    seq: u64,
    run_id: String,
    agent_id: String,
    action: &'static str,
    detector: &'static str,
    level: &'static str,
    count: u32,
    message: String,
    warning_key: String,
    announce: bool,
    paired_tool_name: String,
    error_code: &'static str,
    tool_name: String,
    decision_id: String,
    evidence_seqs: Vec<u64>,
    evidence_call_ids: Vec<String>,
    loop_started_seq: u64,
    shadow_action: Option<&'static str>,
    /// The event's kind and tool call id, for span events in the GenAI conventions (tracing.py).
    kind: &'static str,
    tool_call_id: String,
}

fn label(name: &'static str) -> &'static str {
    if name == "none" { "" } else { name }
}

fn py_verdict(d: &Decision, event: &EventRef) -> PyVerdict {
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
fn reportable(d: &Decision) -> bool {
    d.verdict.action != Action::Allow || !d.decision_id.is_empty()
}

/// What one request did besides its verdicts: metric increments, latency, log lines, evictions.
#[pyclass(module = "loopwarden_core", name = "Summary", frozen, get_all)]
struct PySummary {
    counters: Py<PyList>,
    latency_buckets: Vec<u64>,
    latency_sum: f64,
    logs: Py<PyList>,
    evictions: Vec<&'static str>,
    /// Events of a lazily loaded request whose run was already in memory (runs_loaded{memory}).
    held_runs: u64,
    /// With `report`: the request's decisions other than a plain ALLOW, for span events.
    reported: Py<PyList>,
}

fn log_extra<'py>(py: Python<'py>, line: &service::LogLine) -> PyResult<Bound<'py, PyDict>> {
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

fn py_summary(py: Python<'_>, summary: Summary, reported: Vec<PyVerdict>) -> PyResult<Py<PySummary>> {
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
enum Form {
    Evaluate,
    Check,
    Decide,
}

/// A decoded request waiting for its runs to be loaded from a shared state store: `resume` it
/// once they are, and it is evaluated without being decoded again.
#[pyclass(module = "loopwarden_core", frozen)]
struct Pending {
    form: Form,
    events: Vec<pb::Event>,
    side: Side,
}

/// The core's answer to one request or event. Exactly one of these holds:
/// - `response` (Evaluate/Check bytes) or `verdict` (`decide`), with `summary`;
/// - `refusal`: "undecodable", "too_many_events" or "missing_event", nothing evaluated;
/// - `missing_runs` (lazy only): runs to load first, then `Core.resume(pending, ...)`.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
struct Answer {
    response: Option<Py<PyBytes>>,
    verdict: Option<Py<PyVerdict>>,
    refusal: &'static str,
    /// (run id, its tree's root): the root names the run's stored key.
    missing_runs: Vec<(String, String)>,
    pending: Option<Py<Pending>>,
    summary: Option<Py<PySummary>>,
}

impl Answer {
    fn refused(reason: &'static str) -> Answer {
        Answer { response: None, verdict: None, refusal: reason, missing_runs: Vec::new(), pending: None, summary: None }
    }
}

fn refusal_reason(r: Refusal) -> &'static str {
    match r {
        Refusal::Undecodable => "undecodable",
        Refusal::TooManyEvents => "too_many_events",
        Refusal::NotLoaded(_) => "not_loaded",
    }
}

/// One record of a run's history, as InspectRun shows it (`tool_name` as the host spelled it in
/// the call that formed the record; `args_hash` over the normalised name, as matching hashes it).
#[pyclass(module = "loopwarden_core", frozen, get_all)]
struct RecordView {
    seq: u64,
    tool_name: String,
    args_hash: String,
    tool_call_id: String,
    result_hash: String,
    unknown_tool_name: String,
}

/// A held run, as InspectRun shows it; `recent_verdicts` are loopwarden.v1.Verdict bytes.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
struct RunView {
    run_id: String,
    agent_id: String,
    agent_label: String,
    records: Vec<Py<RecordView>>,
    guard_armed: bool,
    guard_window_size: u32,
    guard_observed: u32,
    blocks: u32,
    aborted: bool,
    abort_error_code: &'static str,
    events_evaluated: u64,
    recent_verdicts: Vec<Py<PyBytes>>,
    /// Run trees: "" for a root run.
    parent_run_id: String,
    /// Oldest first, ended ones too.
    children: Vec<String>,
    root_run_id: String,
    depth: u32,
    /// The tree's totals (held on its root; None when the root is not held or keeps none).
    tree_totals: Option<Py<TotalsView>>,
    /// The run's own (None: a plain run keeps none).
    run_totals: Option<Py<TotalsView>>,
}

/// Spending counted for budgets, as InspectRun's Totals shows it.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
struct TotalsView {
    tool_calls: u64,
    tool_ms: u64,
    input_tokens: u64,
    output_tokens: u64,
    cost_usd: f64,
    wall_seconds: f64,
    runs: u64,
}

fn totals_view(py: Python<'_>, t: &service::Totals, wall_seconds: f64) -> PyResult<Py<TotalsView>> {
    Py::new(py, TotalsView { tool_calls: t.tool_calls, tool_ms: t.tool_ms, input_tokens: t.input_tokens,
                             output_tokens: t.output_tokens, cost_usd: t.cost_usd, wall_seconds, runs: t.runs })
}

/// A standing exemption, as ListExemptions and InspectRun show it (times: Unix seconds).
#[pyclass(module = "loopwarden_core", frozen, get_all)]
struct ExemptionView {
    id: String,
    agent_id: String,
    tool_name: String,
    args_hash: String,
    created_at: f64,
    expires_at: f64,
    run_id: String,
}

fn exemption_view(e: &crate::engine::ask::Exemption, wall_now: f64, now: f64) -> ExemptionView {
    ExemptionView {
        id: e.id.clone(),
        agent_id: e.agent_id.clone(),
        tool_name: e.tool.clone(),
        args_hash: args_hash_text(&e.tool, &e.args),
        created_at: e.created_at + (wall_now - now),
        expires_at: e.expires_at + (wall_now - now),
        run_id: e.run_id.clone(),
    }
}

// ------------------------------------------------------------------ the core

/// One daemon's run store and compiled config.
#[pyclass(module = "loopwarden_core", name = "Core")]
struct PyCore {
    core: Core,
}

/// A hook's or an in-process caller's event fields (`decide`'s keywords), whatever its kind.
#[derive(Default)]
struct EventFields {
    run_id: String,
    agent_id: String,
    session_id: String,
    seq: u64,
    parent_run_id: String,
    accepts_ask: bool,
    tool_name: String,
    params_json: String,
    tool_call_id: String,
    result_json: Option<String>,
    error: Option<String>,
    duration_ms: u64,
    tool_class: i32,
    batch_id: String,
    prompt_id: String,
    input_tokens: u64,
    output_tokens: u64,
    cost_usd: f64,
    model: String,
    decision_id: String,
    approved: bool,
    scope: i32,
    ttl_seconds: u32,
}

/// The event of `kind` from its fields, built without a protobuf round trip.
fn event_from(kind: &str, f: EventFields) -> pb::Event {
    use pb::event::Kind;
    let kind = match kind {
        "tool_call" => Some(Kind::ToolCall(pb::ToolCall {
            tool_name: f.tool_name, params_json: f.params_json, tool_call_id: f.tool_call_id, tool_class: f.tool_class, batch_id: f.batch_id,
        })),
        "tool_outcome" => {
            let outcome = match (f.error, f.result_json) {
                (Some(e), _) => Some(pb::tool_outcome::Outcome::Error(e)),
                (None, Some(r)) => Some(pb::tool_outcome::Outcome::ResultJson(r)),
                (None, None) => None,
            };
            Some(Kind::ToolOutcome(pb::ToolOutcome {
                tool_name: f.tool_name, params_json: f.params_json, tool_call_id: f.tool_call_id, outcome, duration_ms: f.duration_ms,
            }))
        }
        "compaction_retry" => Some(Kind::CompactionRetry(pb::CompactionRetry {})),
        "run_end" => Some(Kind::RunEnd(pb::RunEnd {})),
        "user_turn" => Some(Kind::UserTurn(pb::UserTurn { prompt_id: f.prompt_id })),
        "usage" => Some(Kind::Usage(pb::Usage { input_tokens: f.input_tokens, output_tokens: f.output_tokens, cost_usd: f.cost_usd, model: f.model })),
        "approval" => Some(Kind::Approval(pb::Approval {
            tool_call_id: f.tool_call_id, decision_id: f.decision_id, approved: f.approved, scope: f.scope, ttl_seconds: f.ttl_seconds,
        })),
        _ => None,
    };
    pb::Event {
        run_id: f.run_id, agent_id: f.agent_id, session_id: f.session_id, seq: f.seq, kind, parent_run_id: f.parent_run_id,
        accepts_ask: f.accepts_ask,
    }
}

/// What became of a stored run, as Python names it.
fn loaded_name(outcome: service::Loaded) -> &'static str {
    match outcome {
        service::Loaded::Restored => "restored",
        service::Loaded::RestoredBaseOnly => "restored_base_only",
        service::Loaded::Expired => "expired",
        service::Loaded::Mismatch => "mismatch",
        service::Loaded::Merged => "merged",
        service::Loaded::Held => "held",
    }
}

fn side_of(agent_only: bool) -> Side {
    if agent_only { Side::Agent } else { Side::Any }
}

impl PyCore {
    /// Evaluate `events` (or, lazily, first name the runs to load) and answer in `form`.
    #[allow(clippy::too_many_arguments)]
    fn answer(&mut self, py: Python<'_>, side: Side, form: Form, events: Vec<pb::Event>, tenant: &str, now: f64,
              routed: &str, lazy: bool, report: bool) -> PyResult<Answer> {
        let mut summary = Summary::default();
        let refs: Vec<EventRef> = events.iter().map(EventRef::from).collect();
        if lazy {
            let missing = self.core.missing_runs(&refs, tenant, routed, now, &mut summary);
            if !missing.is_empty() {
                return Ok(Answer {
                    response: None, verdict: None, refusal: "", missing_runs: missing,
                    pending: Some(Py::new(py, Pending { form, events, side })?),
                    summary: Some(py_summary(py, summary, Vec::new())?),
                });
            }
        }
        self.evaluated(py, side, form, &refs, tenant, now, routed, report, summary)
    }

    /// `events` evaluated (their runs are in memory), answered in `form`.
    #[allow(clippy::too_many_arguments)]
    fn evaluated(&mut self, py: Python<'_>, side: Side, form: Form, events: &[EventRef], tenant: &str, now: f64,
                 routed: &str, report: bool, mut summary: Summary) -> PyResult<Answer> {
        let decisions = self.core.evaluate_refs_from(side, events, tenant, routed, now, &mut summary);
        let reported = if report {
            decisions.iter().zip(events).filter(|(d, _)| reportable(d)).map(|(d, e)| py_verdict(d, e)).collect()
        } else {
            Vec::new()
        };
        let (response, verdict) = match form {
            Form::Evaluate => {
                (Some(PyBytes::new(py, &service::evaluate_response(&decisions)).unbind()), None)
            }
            Form::Check => {
                let verdict = decisions.first().map(service::verdict_message);
                (Some(PyBytes::new(py, &pb::CheckResponse { verdict }.encode_to_vec()).unbind()), None)
            }
            Form::Decide => {
                let d = decisions.first().map(|d| py_verdict(d, &events[0]));
                (None, d.map(|v| Py::new(py, v)).transpose()?)
            }
        };
        Ok(Answer { response, verdict, refusal: "", missing_runs: Vec::new(), pending: None,
                    summary: Some(py_summary(py, summary, reported)?) })
    }
}

#[pymethods]
impl PyCore {
    #[new]
    #[pyo3(signature = (instance_id, max_runs, idle_ttl_seconds, limits, latency_bounds))]
    fn new(instance_id: String, max_runs: usize, idle_ttl_seconds: f64, limits: &Bound<'_, PyDict>, latency_bounds: Vec<f64>) -> PyResult<Self> {
        Ok(PyCore { core: Core::new(Config::default(), limits_from(limits)?, max_runs, idle_ttl_seconds, instance_id, latency_bounds) })
    }

    /// Swap in a compiled config: the defaults, settings per agent id, the tool catalog.
    fn configure(&mut self, default: &Bound<'_, PyDict>, agents: &Bound<'_, PyDict>, provider_send_tools: Vec<String>,
                 extra_poll_tools: Vec<String>) -> PyResult<()> {
        let mut config = Config { default: settings_from(default)?, ..Default::default() };
        for (key, value) in agents.iter() {
            config.agents.insert(key.extract()?, settings_from(value.downcast()?)?);
        }
        config.catalog = Catalog { provider_send_tools, extra_poll_tools };
        self.core.config = config;
        Ok(())
    }

    /// Tests only: a call of this tool makes the core panic (None: never).
    #[setter(_panic_tool)]
    fn set_panic_tool(&mut self, tool: Option<String>) {
        self.core.panic_tool = tool;
    }

    #[setter]
    fn set_debug_logs(&mut self, on: bool) {
        self.core.debug_logs = on;
    }

    /// EvaluateRequest bytes -> an Answer with EvaluateResponse bytes (or a refusal, or the runs
    /// to load first when `lazy`). `routed`: the stream's x-loopwarden-run-id. `agent_only`: the
    /// caller's token is limited to agent-side events (user turns and approvals are REJECTed).
    #[pyo3(signature = (data, tenant, now, routed = "", lazy = false, report = false, agent_only = false))]
    #[allow(clippy::too_many_arguments)]
    fn evaluate(&mut self, py: Python<'_>, data: &[u8], tenant: &str, now: f64, routed: &str, lazy: bool, report: bool,
                agent_only: bool) -> PyResult<Answer> {
        let side = side_of(agent_only);
        if lazy {  // the request may be set aside (Pending): decoded into owned events
            return match self.core.decode_evaluate(data) {
                Ok(events) => self.answer(py, side, Form::Evaluate, events, tenant, now, routed, lazy, report),
                Err(r) => Ok(Answer::refused(refusal_reason(r))),
            };
        }
        match self.core.decode_request(data) {  // read in place where it can be (service/wire.rs)
            Ok(events) => self.evaluated(py, side, Form::Evaluate, &events.refs(), tenant, now, routed, report, Summary::default()),
            Err(r) => Ok(Answer::refused(refusal_reason(r))),
        }
    }

    /// CheckRequest bytes -> an Answer with CheckResponse bytes; "missing_event" when it has none.
    #[pyo3(signature = (data, tenant, now, routed = "", lazy = false, report = false, agent_only = false))]
    #[allow(clippy::too_many_arguments)]
    fn check(&mut self, py: Python<'_>, data: &[u8], tenant: &str, now: f64, routed: &str, lazy: bool, report: bool,
             agent_only: bool) -> PyResult<Answer> {
        let Ok(request) = pb::CheckRequest::decode(data) else { return Ok(Answer::refused("undecodable")) };
        let Some(event) = request.event else { return Ok(Answer::refused("missing_event")) };
        self.answer(py, side_of(agent_only), Form::Check, vec![event], tenant, now, routed, lazy, report)
    }

    /// One event from its fields (offline replay, the MCP proxy's offline judge): an Answer whose
    /// `verdict` is the decision. `kind`: tool_call, tool_outcome, compaction_retry, user_turn
    /// (`prompt_id`), usage (`input_tokens`, `output_tokens`, `cost_usd`, `model`), approval
    /// (`tool_call_id` or `decision_id`, `approved`, `scope` "once" | "always", `ttl_seconds`) or
    /// run_end (anything else is REJECTed `missing_event_kind`). `tool_class`: a call's class as
    /// its caller knows it ("", "readOnly", "mutating", "poll"). `batch_id`: a call's
    /// ToolCall.batch_id. `parent_run_id`, `accepts_ask`: the Event's; `duration_ms`: an outcome's.
    #[pyo3(signature = (kind, run_id, *, tenant = "", now = 0.0, agent_id = String::new(), session_id = String::new(),
                        seq = 0, tool_name = String::new(), params_json = String::new(), tool_call_id = String::new(),
                        result_json = None, error = None, lazy = false, report = false, tool_class = "",
                        batch_id = String::new(), prompt_id = String::new(), parent_run_id = String::new(),
                        accepts_ask = false, duration_ms = 0, input_tokens = 0, output_tokens = 0, cost_usd = 0.0,
                        model = String::new(), decision_id = String::new(), approved = false, scope = "",
                        ttl_seconds = 0))]
    #[allow(clippy::too_many_arguments)]
    fn decide(&mut self, py: Python<'_>, kind: &str, run_id: String, tenant: &str, now: f64, agent_id: String,
              session_id: String, seq: u64, tool_name: String, params_json: String, tool_call_id: String,
              result_json: Option<String>, error: Option<String>, lazy: bool, report: bool, tool_class: &str,
              batch_id: String, prompt_id: String, parent_run_id: String, accepts_ask: bool, duration_ms: u64,
              input_tokens: u64, output_tokens: u64, cost_usd: f64, model: String, decision_id: String, approved: bool,
              scope: &str, ttl_seconds: u32) -> PyResult<Answer> {
        use crate::tool_rules::ToolClass;
        let class = match ToolClass::from_name(tool_class) {
            Some(ToolClass::ReadOnly) => pb::ToolClass::ReadOnly,
            Some(ToolClass::Mutating) => pb::ToolClass::Mutating,
            Some(ToolClass::Poll) => pb::ToolClass::Poll,
            Some(ToolClass::Unknown) => pb::ToolClass::Unspecified,
            None => return Err(PyValueError::new_err(format!("tool_class: unknown class {tool_class:?}"))),
        };
        let scope = match scope {
            "" => pb::ApprovalScope::Unspecified,
            "once" => pb::ApprovalScope::Once,
            "always" => pb::ApprovalScope::Always,
            other => return Err(PyValueError::new_err(format!("scope: {other:?} is not once or always"))),
        };
        let event = event_from(kind, EventFields {
            run_id, agent_id, session_id, seq, parent_run_id, accepts_ask, tool_name, params_json, tool_call_id, result_json, error,
            duration_ms, tool_class: class as i32, batch_id, prompt_id, input_tokens, output_tokens, cost_usd, model, decision_id,
            approved, scope: scope as i32, ttl_seconds,
        });
        self.answer(py, Side::Any, Form::Decide, vec![event], tenant, now, "", lazy, report)
    }

    /// Evaluate a request a lazy call decoded and set aside (its runs are loaded now).
    #[pyo3(signature = (pending, tenant, now, routed = "", report = false))]
    fn resume(&mut self, py: Python<'_>, pending: &Bound<'_, Pending>, tenant: &str, now: f64, routed: &str, report: bool) -> PyResult<Answer> {
        let pending = pending.get();
        self.answer(py, pending.side, pending.form, pending.events.clone(), tenant, now, routed, false, report)
    }

    /// Runs one tenant may hold (0: no per-tenant quota). Python sets it from the token file's
    /// tenants and the config (tenancy.py) whenever either changes.
    fn set_tenant_quota(&mut self, runs: usize) {
        self.core.store.tenant_quota = runs;
    }

    /// Runs `tenant` holds in memory.
    fn tenant_runs(&self, tenant: &str) -> usize {
        self.core.store.tenant_runs(tenant)
    }

    // ---------------------------------------------------------------- the state store's side

    /// Start marking changed runs (`evictions_delete`: an eviction deletes the stored run).
    fn track_changes(&mut self, evictions_delete: bool) {
        self.core.store.track_changes(evictions_delete);
    }

    fn dirty_count(&self) -> usize {
        self.core.store.dirty_count()
    }

    /// [((tenant, run_id), still held, root)] changed since the last call; `root` is the run's
    /// tree root (the run itself for a root), which its stored key names.
    fn take_dirty(&mut self) -> Vec<((String, String), bool, String)> {
        self.core.store.take_dirty_rooted()
    }

    fn redirty(&mut self, items: Vec<((String, String), bool, String)>) {
        self.core.store.redirty_rooted(items)
    }

    fn clear(&mut self) {
        self.core.store.clear();
        self.core.exemptions.clear();
    }

    fn held(&self, tenant: &str, run_id: &str) -> bool {
        self.core.store.get(tenant, run_id).is_some()
    }

    /// The run's stored value (core/src/stored.rs), None when not held.
    fn encode_run<'py>(&self, py: Python<'py>, tenant: &str, run_id: &str, wall_now: f64, now: f64) -> Option<Bound<'py, PyBytes>> {
        self.core.encode_run(tenant, run_id, wall_now, now).map(|b| PyBytes::new(py, &b))
    }

    /// The run for a flush (persist.rs `flush_record`): its stored value, or with `deltas`
    /// perhaps a delta (stored.rs). Its change mark is
    /// cleared as it is encoded, so a change after this lists it again behind the runs still
    /// waiting (store.rs: `written`).
    #[pyo3(signature = (tenant, run_id, wall_now, now, deltas = false))]
    fn take_record<'py>(&mut self, py: Python<'py>, tenant: &str, run_id: &str, wall_now: f64, now: f64, deltas: bool) -> Option<Bound<'py, PyBytes>> {
        let written = self.core.flush_record(tenant, run_id, wall_now, now, deltas)?;
        self.core.store.written(tenant, run_id);
        let (service::ForFlush::Record(bytes) | service::ForFlush::Delta(bytes)) = written;
        Some(PyBytes::new(py, &bytes))
    }

    /// Take in a stored value (any version) and the delta stored after it, if any: ("restored" | "restored_base_only"
    /// (the delta did not apply) | "expired" | "mismatch", [eviction reasons]); ValueError
    /// naming the field when the record is malformed.
    #[pyo3(signature = (record, wall_now, now, expect = None, delta = None))]
    fn load_run(&mut self, record: &[u8], wall_now: f64, now: f64, expect: Option<(String, String)>, delta: Option<&[u8]>) -> PyResult<(&'static str, Vec<&'static str>)> {
        let mut evictions = Vec::new();
        let outcome = self.core
            .load_run(record, delta, wall_now, now, expect.as_ref().map(|(t, r)| (t.as_str(), r.as_str())), &mut evictions)
            .map_err(PyValueError::new_err)?;
        Ok((loaded_name(outcome), evictions))
    }

    /// A stored record after a failed load, merged into memory's copy (persist.rs `merge_run`):
    /// ("merged" | "restored" | "held" | "expired" | "mismatch", [eviction reasons]); ValueError
    /// naming the field when it is malformed (the run's mark is lifted then too).
    fn merge_run(&mut self, record: &[u8], wall_now: f64, now: f64, expect: (String, String)) -> PyResult<(&'static str, Vec<&'static str>)> {
        let mut evictions = Vec::new();
        let outcome = self.core
            .merge_run(record, wall_now, now, (expect.0.as_str(), expect.1.as_str()), &mut evictions)
            .map_err(PyValueError::new_err)?;
        Ok((loaded_name(outcome), evictions))
    }

    /// Mark a run whose load from the shared store failed: evaluated from memory, not written
    /// until merged (`root`: its tree's root, "" for the run itself). True when newly marked.
    fn mark_unmerged(&mut self, tenant: &str, run_id: &str, root: &str) -> bool {
        self.core.store.mark_unmerged(tenant, run_id, root)
    }

    /// Lift a run's mark (the store holds nothing for it): True when it had one.
    fn clear_unmerged(&mut self, tenant: &str, run_id: &str) -> bool {
        self.core.store.clear_unmerged(tenant, run_id)
    }

    /// The marked runs: [(tenant, run_id, root)].
    fn unmerged_runs(&self) -> Vec<(String, String, String)> {
        self.core.store.unmerged()
    }

    fn unmerged_count(&self) -> usize {
        self.core.store.unmerged_count()
    }

    /// The owner generation of a held run's copy (0: none known or not held).
    fn owner_gen(&self, tenant: &str, run_id: &str) -> u64 {
        self.core.store.get(tenant, run_id).map_or(0, |e| e.owner_gen)
    }

    /// Note the owner generation of a held run's copy (after its load or its write) and, when
    /// given, until when (the core's clock) this replica's lease on it is known to be live.
    #[pyo3(signature = (tenant, run_id, gen, lease_until = None))]
    fn set_owner_gen(&mut self, tenant: &str, run_id: &str, gen: u64, lease_until: Option<f64>) {
        self.core.store.set_owner_gen(tenant, run_id, gen);
        if let Some(until) = lease_until {
            self.core.store.set_lease(tenant, run_id, until);
        }
    }

    /// A held run whose lease lapsed by `now` (keeper.py re-reads its stored copy).
    fn lease_lapsed(&self, tenant: &str, run_id: &str, now: f64) -> bool {
        self.core.store.lease_lapsed(tenant, run_id, now)
    }

    /// Drop a held run without deleting it from the store (another replica owns it).
    fn forget(&mut self, tenant: &str, run_id: &str) -> bool {
        self.core.store.forget(tenant, run_id)
    }

    /// A held run's view, None when the run is not held. `now`: the store's clock (wall times).
    #[pyo3(signature = (tenant, run_id, now = 0.0))]
    fn inspect(&self, py: Python<'_>, tenant: &str, run_id: &str, now: f64) -> PyResult<Option<RunView>> {
        let Some(entry) = self.core.inspect(tenant, run_id) else { return Ok(None) };
        let link = entry.tree.as_deref();
        let run_totals = match link {
            Some(l) => Some(totals_view(py, &l.totals, (now - l.started).max(0.0))?),
            None => None,
        };
        let root_link = self.core.store.get(tenant, entry.root_id()).and_then(|r| r.tree.as_deref());
        let tree_totals = match root_link.and_then(|l| l.tree.as_deref().map(|t| (t, l.started))) {
            Some((t, started)) => Some(totals_view(py, t, (now - started).max(0.0))?),
            None => None,
        };
        let state = &entry.state;
        let (guard_armed, guard_window_size, guard_observed) = match &state.guard {
            Some(g) => (true, g.window_size, g.observed),
            None => (false, 0, 0),
        };
        let mut records = Vec::new();
        for r in state.history().iter() {
            records.push(Py::new(py, RecordView {
                seq: r.seq,
                tool_name: r.spelling().to_string(),
                args_hash: args_hash_text(r.tool(), &r.args),
                tool_call_id: r.call_id().unwrap_or("").to_string(),
                result_hash: result_hash_text(r.status, &r.result).unwrap_or_default(),
                unknown_tool_name: r.unknown().unwrap_or("").to_string(),
            })?);
        }
        let recent_verdicts = entry.recent_decisions().into_iter()
            .map(|d| PyBytes::new(py, &service::verdict_message(d).encode_to_vec()).unbind())
            .collect();
        Ok(Some(RunView {
            run_id: entry.run_id.clone(),
            agent_id: entry.agent_id.clone(),
            agent_label: self.core.config.agent_label(&entry.agent_id).to_string(),
            records,
            guard_armed,
            guard_window_size,
            guard_observed,
            blocks: state.blocks,
            aborted: state.abort.is_some(),
            abort_error_code: state.abort.as_ref().map(|a| a.error_code).unwrap_or(""),
            events_evaluated: entry.events_evaluated,
            recent_verdicts,
            parent_run_id: entry.parent_id().to_string(),
            children: link.map(|l| l.children.clone()).unwrap_or_default(),
            root_run_id: entry.root_id().to_string(),
            depth: link.map_or(0, |l| l.depth),
            tree_totals,
            run_totals,
        }))
    }

    fn __len__(&self) -> usize {
        self.core.store.len()
    }

    fn expire_idle(&mut self, now: f64, budget: usize) -> usize {
        self.core.exemptions.expire(now);
        self.core.store.expire_idle(now, budget)
    }

    // ---------------------------------------------------------------- standing exemptions

    /// The tenant's exemptions, newest first (`agent_id`, `tool_name`: filters when not empty).
    fn list_exemptions(&self, tenant: &str, agent_id: &str, tool_name: &str, wall_now: f64, now: f64) -> Vec<ExemptionView> {
        self.core.exemptions.list(tenant, agent_id, tool_name, now).into_iter().map(|e| exemption_view(e, wall_now, now)).collect()
    }

    /// The exemptions that apply to a held run's agent (InspectRun); empty when not held.
    fn run_exemptions(&self, tenant: &str, run_id: &str, wall_now: f64, now: f64) -> Vec<ExemptionView> {
        let Some(entry) = self.core.inspect(tenant, run_id) else { return Vec::new() };
        self.core.exemptions.of_agent(tenant, &entry.agent_id, now).into_iter().map(|e| exemption_view(e, wall_now, now)).collect()
    }

    /// Withdraw one; None when the tenant holds no such id.
    fn revoke_exemption(&mut self, tenant: &str, id: &str, wall_now: f64, now: f64) -> Option<ExemptionView> {
        self.core.exemptions.revoke(tenant, id, now).map(|e| exemption_view(&e, wall_now, now))
    }

    /// Exemptions in force, every tenant's (the gauge).
    fn exemption_count(&self, now: f64) -> usize {
        self.core.exemptions.count(now)
    }

    /// The state store's side: mark changed tables, take them, put them back after a failure.
    fn track_exemptions(&mut self) {
        self.core.exemptions.track_changes();
    }

    fn exemptions_dirty_count(&self) -> usize {
        self.core.exemptions.dirty_count()
    }

    fn take_dirty_exemptions(&mut self) -> Vec<String> {
        self.core.exemptions.take_dirty()
    }

    fn redirty_exemptions(&mut self, tenants: Vec<String>) {
        self.core.exemptions.redirty(tenants)
    }

    /// The tenant's table as its stored value and the seconds it stands; None when it holds none.
    fn encode_exemptions<'py>(&self, py: Python<'py>, tenant: &str, wall_now: f64, now: f64) -> Option<(Bound<'py, PyBytes>, f64)> {
        let record = self.core.exemptions.encode(tenant, wall_now, now)?;
        Some((PyBytes::new(py, &record), self.core.exemptions.ttl_seconds(tenant, now)))
    }

    /// The shared store holds no table for the tenant: drop memory's unless it is unwritten.
    fn exemptions_absent(&mut self, tenant: &str) {
        self.core.exemptions.absent_in_store(tenant)
    }

    /// Take in a stored table: (tenant, exemptions taken in); ValueError naming the field.
    fn load_exemptions(&mut self, record: &[u8], wall_now: f64, now: f64) -> PyResult<(String, usize)> {
        self.core.exemptions.load(record, wall_now, now).map_err(PyValueError::new_err)
    }
}

#[pymodule]
fn loopwarden_core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(canonical_json, m)?)?;
    m.add_function(wrap_pyfunction!(args_digest, m)?)?;
    m.add_function(wrap_pyfunction!(outcome_fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_tool_name, m)?)?;
    m.add_function(wrap_pyfunction!(parse_json_path, m)?)?;
    m.add_class::<PyCore>()?;
    m.add_class::<Answer>()?;
    m.add_class::<Pending>()?;
    m.add_class::<PySummary>()?;
    m.add_class::<CounterDelta>()?;
    m.add_class::<DecisionLog>()?;
    m.add_class::<PyVerdict>()?;
    m.add_class::<RunView>()?;
    m.add_class::<RecordView>()?;
    m.add_class::<ExemptionView>()?;
    m.add_class::<TotalsView>()?;
    let mut counters: Vec<&str> = vec![""; COUNTERS.len()];
    for (code, name) in COUNTERS {
        counters[code as usize] = name;
    }
    let py = m.py();
    m.add("COUNTERS", PyTuple::new(py, counters)?)?;
    m.add("DETECTORS", PyTuple::new(py, detectors().iter().map(|d| d.name()))?)?;
    m.add("ACTIONS", PyTuple::new(py, ACTIONS.iter().map(|a| a.name()))?)?;
    m.add("LEVELS", PyTuple::new(py, [Level::Warning.name(), Level::Critical.name()])?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
