//! The Python face: `loopwarden_core.Core`, one daemon's core, and its roles, each a typed object
//! over the same core (`Core.evaluator`, `.inspection`, `.persistence`, `.exemptions`; a module
//! here each), and the typed objects they answer with, described for type checkers in
//! `loopwarden_core.pyi`. Test hooks are compiled only with the `testing` feature (testing.rs).
//!
//! Roles. A role object holds the `Core` and borrows it per call, as a method of `Core` itself
//! would: a call made while another holds the core mutably is refused with PyO3's RuntimeError
//! ("Already mutably borrowed"), which the daemon's metrics scrape waits out (metrics.py).
//!
//! Design. Python never sees the core's internals, and the core never sees a Python config
//! object: the daemon hands over typed `Settings` (settings_gen.rs) once per (re)load, and per request it
//! gets back frozen objects with named fields (an `Answer`, its `Summary`, `Verdict`s, a
//! `RunView`), never positional tuples. Vocabulary the two sides share (detector ids, actions,
//! counter codes) is exported from here, so Python has no second spelling of it.

// Python keyword arguments are this face's API: a struct per call would be a second spelling of them.
#![allow(clippy::too_many_arguments)]

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::engine::{Action, Detector, Level};
use crate::fingerprint::Catalog;
use crate::json::{decode, JsonError};
use crate::service::{self, counter, Config, Core};

mod answers;
mod convert;
mod evaluator;
mod event_gen;
mod exemptions;
mod inspection;
mod limits_gen;
mod persistence;
mod settings_gen;
#[cfg(feature = "testing")]
mod testing;

use limits_gen::PyLimits;
use settings_gen::PySettings;

fn json_error(e: JsonError) -> PyErr {
    match e {
        JsonError::Invalid(m) => PyValueError::new_err(("invalid", m)),
        JsonError::TooDeep(m) => PyValueError::new_err(("too_deep", m)),
    }
}

// ------------------------------------------------------------------ shared vocabulary

/// Counter codes in code order: `COUNTERS[code]` names the Prometheus counter a delta goes to.
const COUNTERS: [(u8, &str); 13] = [
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
    (counter::OUTPUT_LOOP_ABORTS, "output_loop_aborts"),
];

/// Every detector id a verdict can carry (the `none` of a plain verdict aside).
fn detectors() -> &'static [Detector] {
    &Detector::ALL[1..]
}

const ACTIONS: [Action; 6] = [Action::Allow, Action::Warn, Action::Block, Action::Abort, Action::Reject, Action::Ask];

// ------------------------------------------------------------------ pure functions (parity tests)

/// A call's params_json, "" or blank read as `{}`.
fn params_value(params_json: &str) -> PyResult<crate::json::Value<'_>> {
    if params_json.trim().is_empty() {
        Ok(crate::json::Value::Object(vec![]))
    } else {
        decode(params_json, 64).map_err(json_error)
    }
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

// ------------------------------------------------------------------ the core

/// One daemon's run store and compiled config. Its roles are typed objects over it.
#[pyclass(module = "loopwarden_core", name = "Core")]
struct PyCore {
    core: Core,
}

#[pymethods]
impl PyCore {
    #[new]
    #[pyo3(signature = (instance_id, max_runs, idle_ttl_seconds, limits, latency_bounds))]
    fn new(instance_id: String, max_runs: usize, idle_ttl_seconds: f64, limits: PyRef<'_, PyLimits>, latency_bounds: Vec<f64>) -> PyCore {
        PyCore { core: Core::new(Config::default(), service::Limits::from(&*limits), max_runs, idle_ttl_seconds, instance_id, latency_bounds) }
    }

    /// Swap in a compiled config: the defaults, settings per agent id, the tool catalog.
    fn configure(&mut self, default: PyRef<'_, PySettings>, agents: HashMap<String, PyRef<'_, PySettings>>,
                 provider_send_tools: Vec<String>, extra_poll_tools: Vec<String>) {
        let agents = agents.into_iter().map(|(agent, settings)| (agent, settings.settings().clone())).collect();
        let catalog = Catalog { provider_send_tools, extra_poll_tools };
        self.core.config = Config { default: default.settings().clone(), agents, catalog };
    }

    #[getter]
    fn limits(&self) -> PyLimits {
        PyLimits::from(self.core.limits.clone())
    }

    #[setter]
    fn set_debug_logs(&mut self, on: bool) {
        self.core.debug_logs = on;
    }

    /// Tests only: a call of this tool makes the core panic (None: never).
    #[cfg(feature = "testing")]
    #[setter(_panic_tool)]
    fn set_panic_tool(&mut self, tool: Option<String>) {
        self.core.panic_tool = tool;
    }

    /// Runs one tenant may hold (0: no per-tenant quota). Python sets it from the token file's
    /// tenants and the config (tenancy.py) whenever either changes.
    fn set_tenant_quota(&mut self, runs: usize) {
        self.core.store.tenant_quota = runs;
    }

    /// Runs held in memory, every tenant's.
    fn __len__(&self) -> usize {
        self.core.store.len()
    }

    /// Drop runs (at most `budget`) and exemptions idle or expired by `now`; the runs dropped.
    fn expire_idle(&mut self, now: f64, budget: usize) -> usize {
        self.core.exemptions.expire(now);
        self.core.store.expire_idle(now, budget)
    }

    /// Evaluation: requests, hook events, lazy requests resumed.
    #[getter]
    fn evaluator(slf: &Bound<'_, Self>) -> evaluator::Evaluator {
        evaluator::Evaluator { core: slf.clone().unbind() }
    }

    /// Inspection: a held run as InspectRun shows it.
    #[getter]
    fn inspection(slf: &Bound<'_, Self>) -> inspection::Inspection {
        inspection::Inspection { core: slf.clone().unbind() }
    }

    /// Persistence: the runs as the state store moves them.
    #[getter]
    fn persistence(slf: &Bound<'_, Self>) -> persistence::Persistence {
        persistence::Persistence { core: slf.clone().unbind() }
    }

    /// Exemptions: the standing exemptions, as the API shows them and the state store moves them.
    #[getter]
    fn exemptions(slf: &Bound<'_, Self>) -> exemptions::Exemptions {
        exemptions::Exemptions { core: slf.clone().unbind() }
    }
}

#[pymodule]
fn loopwarden_core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(outcome_fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_tool_name, m)?)?;
    m.add_function(wrap_pyfunction!(parse_json_path, m)?)?;
    m.add_class::<PyCore>()?;
    m.add_class::<PyLimits>()?;
    m.add_class::<PySettings>()?;
    m.add_class::<crate::tool_rules::CompiledRule>()?;
    m.add_class::<answers::Answer>()?;
    m.add_class::<answers::Pending>()?;
    m.add_class::<answers::MissingRun>()?;
    m.add_class::<answers::PySummary>()?;
    m.add_class::<answers::CounterDelta>()?;
    m.add_class::<answers::DecisionLog>()?;
    m.add_class::<answers::PyVerdict>()?;
    m.add_class::<evaluator::Evaluator>()?;
    m.add_class::<inspection::Inspection>()?;
    m.add_class::<inspection::RunView>()?;
    m.add_class::<inspection::RecordView>()?;
    m.add_class::<inspection::TotalsView>()?;
    m.add_class::<inspection::OutputStreaksView>()?;
    m.add_class::<persistence::Persistence>()?;
    m.add_class::<persistence::Loaded>()?;
    m.add_class::<persistence::RunLoad>()?;
    m.add_class::<persistence::DirtyRun>()?;
    m.add_class::<persistence::MarkedRun>()?;
    m.add_class::<exemptions::Exemptions>()?;
    m.add_class::<exemptions::ExemptionView>()?;
    m.add_class::<exemptions::StoredTable>()?;
    m.add_class::<exemptions::TableLoad>()?;
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
    // The test hooks this build carries: every one with `testing` (the dev venv), none without.
    #[cfg(feature = "testing")]
    let hooks: &[&str] = {
        testing::register(m)?;
        &testing::TEST_HOOKS
    };
    #[cfg(not(feature = "testing"))]
    let hooks: &[&str] = &[];
    m.add("TEST_HOOKS", PyTuple::new(py, hooks)?)?;
    Ok(())
}
