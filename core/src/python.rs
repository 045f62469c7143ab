//! The Python face: `loopwarden_core.Core` (bytes in, bytes out, one call per request) and the
//! few pure functions the parity tests compare with the Python engine.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::engine::{Action, Settings};
use crate::fingerprint::Catalog;
use crate::json::{canonical, decode, JsonError};
use crate::service::{self, Config, Core, Limits, Refusal, Summary};

fn json_error(e: JsonError) -> PyErr {
    match e {
        JsonError::Invalid(m) => PyValueError::new_err(("invalid", m)),
        JsonError::TooDeep(m) => PyValueError::new_err(("too_deep", m)),
    }
}

/// The canonical bytes of a JSON text (what every digest is taken over).
#[pyfunction]
#[pyo3(signature = (text, max_depth = 64))]
fn canonical_json<'py>(py: Python<'py>, text: &str, max_depth: usize) -> PyResult<Bound<'py, PyBytes>> {
    let value = decode(text, max_depth).map_err(json_error)?;
    Ok(PyBytes::new(py, &canonical(&value)))
}

#[pyfunction]
fn args_digest<'py>(py: Python<'py>, tool_name: &str, params_json: &str) -> PyResult<Bound<'py, PyBytes>> {
    let params = if params_json.trim().is_empty() { crate::json::Value::Object(vec![]) } else { decode(params_json, 64).map_err(json_error)? };
    Ok(PyBytes::new(py, &crate::fingerprint::args_digest(tool_name, &params)))
}

/// (status, digest, unknown tool name) of an outcome: status 0 = nothing recorded.
#[pyfunction]
#[pyo3(signature = (tool_name, params_json, result_json, error, provider_send_tools = vec![], extra_poll_tools = vec![]))]
fn outcome_fingerprint<'py>(
    py: Python<'py>, tool_name: &str, params_json: &str, result_json: Option<&str>, error: Option<&str>,
    provider_send_tools: Vec<String>, extra_poll_tools: Vec<String>,
) -> PyResult<(u8, Bound<'py, PyBytes>, Option<String>)> {
    let params = if params_json.trim().is_empty() { crate::json::Value::Object(vec![]) } else { decode(params_json, 64).map_err(json_error)? };
    let has_result = error.is_none() && matches!(result_json, Some(r) if !r.is_empty());
    let result = if has_result { Some(decode(result_json.unwrap_or(""), 64).map_err(json_error)?) } else { None };
    let raw = error.or(result_json);
    let wrapped = matches!(raw, Some(r) if r.contains(crate::fingerprint::MARKER));
    let catalog = Catalog { provider_send_tools, extra_poll_tools };
    let fp = crate::fingerprint::outcome_fingerprint(tool_name, &params, result.as_ref(), error, &catalog, wrapped);
    Ok((fp.status, PyBytes::new(py, &fp.digest), fp.unknown_tool_name))
}

#[pyfunction]
fn normalize_tool_name(raw: &str) -> String {
    crate::toolnames::normalize_tool_name(raw)
}

fn get<'py, T: FromPyObject<'py>>(d: &Bound<'py, PyDict>, key: &str, default: T) -> PyResult<T> {
    match d.get_item(key)? {
        Some(v) => v.extract(),
        None => Ok(default),
    }
}

fn settings_from(d: &Bound<'_, PyDict>) -> PyResult<Settings> {
    let base = Settings::default();
    Ok(Settings {
        enabled: get(d, "enabled", None)?,
        history_size: get(d, "history_size", base.history_size)?,
        warning_threshold: get(d, "warning_threshold", base.warning_threshold)?,
        critical_threshold: get(d, "critical_threshold", base.critical_threshold)?,
        unknown_tool_threshold: get(d, "unknown_tool_threshold", base.unknown_tool_threshold)?,
        global_circuit_breaker_threshold: get(d, "global_circuit_breaker_threshold", base.global_circuit_breaker_threshold)?,
        generic_repeat: get(d, "generic_repeat", true)?,
        known_poll_no_progress: get(d, "known_poll_no_progress", true)?,
        ping_pong: get(d, "ping_pong", true)?,
        compaction_window_size: get(d, "compaction_window_size", base.compaction_window_size)?,
        abort_after_blocks: get(d, "abort_after_blocks", 0)?,
        run_wide_breaker_threshold: get(d, "run_wide_breaker_threshold", 0)?,
        shadow: get(d, "shadow", false)?,
        argument_churn_warn_at: get(d, "argument_churn_warn_at", 0)?,
        argument_churn_block_at: get(d, "argument_churn_block_at", 0)?,
        error_repeat_threshold: get(d, "error_repeat_threshold", 0)?,
        ping_pong_needs_answers: get(d, "ping_pong_needs_answers", false)?,
    })
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

/// One daemon's run store and compiled config.
#[pyclass(module = "loopwarden_core", name = "Core")]
struct PyCore {
    core: Core,
}

fn summary_tuple<'py>(py: Python<'py>, summary: Summary) -> PyResult<Bound<'py, PyTuple>> {
    let counters = PyList::empty(py);
    for (counter, labels, agent, count) in summary.counters {
        counters.append((counter, labels[0], labels[1], agent, count))?;
    }
    let logs = PyList::empty(py);
    for line in summary.logs {
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
        logs.append((line.level, line.message, extra))?;
    }
    let evictions = PyList::new(py, summary.evictions)?;
    PyTuple::new(py, [
        counters.into_any(),
        PyList::new(py, summary.latency_buckets)?.into_any(),
        summary.latency_sum.into_pyobject(py)?.into_any(),
        logs.into_any(),
        evictions.into_any(),
        summary.held_runs.into_pyobject(py)?.into_any(),
    ])
}

/// (None, reason) for a refused request; (None, ([run ids], held)) for one that names runs
/// not in memory (lazy loading: nothing was evaluated).
fn refused<'py>(py: Python<'py>, r: Refusal, summary: &Summary) -> PyResult<(Option<Bound<'py, PyBytes>>, Bound<'py, PyAny>)> {
    let reason = match r {
        Refusal::Undecodable => "undecodable",
        Refusal::TooManyEvents => "too_many_events",
        Refusal::NotLoaded(ids) => return Ok((None, (ids, summary.held_runs).into_pyobject(py)?.into_any())),
    };
    Ok((None, reason.into_pyobject(py)?.into_any()))
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

    /// EvaluateRequest bytes -> (EvaluateResponse bytes, summary), or (None, refusal reason).
    /// `lazy`: runs the request names that are not in memory are returned first (see `refused`).
    #[pyo3(signature = (data, tenant, now, routed = "", lazy = false))]
    fn evaluate<'py>(&mut self, py: Python<'py>, data: &[u8], tenant: &str, now: f64, routed: &str, lazy: bool) -> PyResult<(Option<Bound<'py, PyBytes>>, Bound<'py, PyAny>)> {
        let mut summary = Summary::default();
        match self.core.evaluate_request(data, tenant, routed, now, &mut summary, lazy) {
            Ok(bytes) => Ok((Some(PyBytes::new(py, &bytes)), summary_tuple(py, summary)?.into_any())),
            Err(r) => refused(py, r, &summary),
        }
    }

    /// CheckRequest bytes -> (CheckResponse bytes, summary), (None, refusal) or (None, "missing_event").
    #[pyo3(signature = (data, tenant, now, routed = "", lazy = false))]
    fn check<'py>(&mut self, py: Python<'py>, data: &[u8], tenant: &str, now: f64, routed: &str, lazy: bool) -> PyResult<(Option<Bound<'py, PyBytes>>, Bound<'py, PyAny>)> {
        let mut summary = Summary::default();
        match self.core.check_request(data, tenant, routed, now, &mut summary, lazy) {
            Ok(Some(bytes)) => Ok((Some(PyBytes::new(py, &bytes)), summary_tuple(py, summary)?.into_any())),
            Ok(None) => Ok((None, "missing_event".into_pyobject(py)?.into_any())),
            Err(r) => refused(py, r, &summary),
        }
    }

    // ---------------------------------------------------------------- the state store's side

    /// Start marking changed runs (`evictions_delete`: an eviction deletes the stored run).
    fn track_changes(&mut self, evictions_delete: bool) {
        self.core.store.track_changes(evictions_delete);
    }

    fn dirty_count(&self) -> usize {
        self.core.store.dirty_count()
    }

    /// [((tenant, run_id), still held)] changed since the last call.
    fn take_dirty(&mut self) -> Vec<((String, String), bool)> {
        self.core.store.take_dirty()
    }

    fn redirty(&mut self, items: Vec<((String, String), bool)>) {
        self.core.store.redirty(items)
    }

    fn clear(&mut self) {
        self.core.store.clear()
    }

    fn held(&self, tenant: &str, run_id: &str) -> bool {
        self.core.store.get(tenant, run_id).is_some()
    }

    /// The run's record as JSON bytes (statestore/encoding.py frames it), None when not held.
    fn encode_run<'py>(&self, py: Python<'py>, tenant: &str, run_id: &str, wall_now: f64, now: f64) -> Option<Bound<'py, PyBytes>> {
        self.core.encode_run(tenant, run_id, wall_now, now).map(|b| PyBytes::new(py, &b))
    }

    /// Take in a record: ("restored" | "expired" | "mismatch", [eviction reasons]); ValueError
    /// naming the field when it is malformed.
    #[pyo3(signature = (record, wall_now, now, expect = None))]
    fn load_run(&mut self, record: &[u8], wall_now: f64, now: f64, expect: Option<(String, String)>) -> PyResult<(&'static str, Vec<&'static str>)> {
        let mut evictions = Vec::new();
        let outcome = self.core
            .load_run(record, wall_now, now, expect.as_ref().map(|(t, r)| (t.as_str(), r.as_str())), &mut evictions)
            .map_err(PyValueError::new_err)?;
        Ok((match outcome {
            service::Loaded::Restored => "restored",
            service::Loaded::Expired => "expired",
            service::Loaded::Mismatch => "mismatch",
        }, evictions))
    }

    /// A run's view: (run_id, agent_id, records, (armed, window, observed), blocks, aborted,
    /// abort_error_code, events_evaluated, [recent Verdict bytes]) or None.
    fn inspect<'py>(&self, py: Python<'py>, tenant: &str, run_id: &str) -> PyResult<Option<Bound<'py, PyTuple>>> {
        use prost::Message;
        let Some(entry) = self.core.inspect(tenant, run_id) else { return Ok(None) };
        let state = &entry.state;
        let guard = match &state.guard {
            Some(g) => (true, g.window_size, g.observed),
            None => (false, 0, 0),
        };
        let recent = PyList::empty(py);
        for d in entry.recent_decisions() {
            recent.append(PyBytes::new(py, &service::verdict_message(d).encode_to_vec()))?;
        }
        let abort_code = state.abort.as_ref().map(|a| a.error_code).unwrap_or("");
        let t = (
            entry.run_id.clone(),
            entry.agent_id.clone(),
            service::record_views(state),
            guard,
            state.blocks,
            state.abort.is_some(),
            abort_code,
            entry.events_evaluated,
            recent,
        );
        Ok(Some(t.into_pyobject(py)?))
    }

    fn __len__(&self) -> usize {
        self.core.store.len()
    }

    fn expire_idle(&mut self, now: f64, budget: usize) -> usize {
        self.core.store.expire_idle(now, budget)
    }

    fn remove(&mut self, tenant: &str, run_id: &str) -> bool {
        self.core.store.remove(tenant, run_id)
    }
}

#[allow(dead_code)]
fn _action_is_used(a: Action) -> &'static str {
    a.name()
}

#[pymodule]
fn loopwarden_core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(canonical_json, m)?)?;
    m.add_function(wrap_pyfunction!(args_digest, m)?)?;
    m.add_function(wrap_pyfunction!(outcome_fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_tool_name, m)?)?;
    m.add_class::<PyCore>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
