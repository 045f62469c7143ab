//! The inspection role: `Core.inspection`, a held run as InspectRun shows it.

use prost::Message;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::PyCore;
use crate::engine::output_memory::OutputMemory;
use crate::engine::outputs::OutputKind;
use crate::engine::{args_hash_text, result_hash_text};
use crate::service;

/// One record of a run's history, as InspectRun shows it (`tool_name` as the host spelled it in
/// the call that formed the record; `args_hash` over the normalised name, as matching hashes it).
#[pyclass(module = "loopwarden_core", frozen, get_all)]
pub(super) struct RecordView {
    // generated:record-view:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)
    /// The seq of the event that created the record.
    pub(super) seq: u64,
    /// The tool as the call that formed the record spelled it (args_hash is over the normalised
    /// name).
    pub(super) tool_name: String,
    /// The hash of the call's projected arguments.
    pub(super) args_hash: String,
    /// The call's tool call id, if it had one.
    pub(super) tool_call_id: String,
    /// The hash of the outcome; empty while the call is pending (no outcome yet).
    pub(super) result_hash: String,
    /// The missing tool's name when the outcome's error said no such tool exists.
    pub(super) unknown_tool_name: String,
    // generated:record-view:end
}

/// A held run, as InspectRun shows it; `recent_verdicts` are loopwarden.v1.Verdict bytes.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
pub(super) struct RunView {
    pub(super) run_id: String,
    pub(super) agent_id: String,
    pub(super) agent_label: String,
    pub(super) records: Vec<Py<RecordView>>,
    pub(super) guard_armed: bool,
    pub(super) guard_window_size: u32,
    pub(super) guard_observed: u32,
    pub(super) blocks: u32,
    pub(super) aborted: bool,
    pub(super) abort_error_code: &'static str,
    pub(super) events_evaluated: u64,
    pub(super) recent_verdicts: Vec<Py<PyBytes>>,
    /// Run trees: "" for a root run.
    pub(super) parent_run_id: String,
    /// Oldest first, ended ones too.
    pub(super) children: Vec<String>,
    pub(super) root_run_id: String,
    pub(super) depth: u32,
    /// The tree's totals (held on its root; None when the root is not held or keeps none).
    pub(super) tree_totals: Option<Py<TotalsView>>,
    /// The run's own (None: a plain run keeps none).
    pub(super) run_totals: Option<Py<TotalsView>>,
    /// The detectors of loops without tool calls' counts (None: none of them counted anything).
    pub(super) output_streaks: Option<Py<OutputStreaksView>>,
}

/// InspectRun's OutputStreaks: where the detectors of loops without tool calls stand.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
pub(super) struct OutputStreaksView {
    pub(super) messages: u32,
    pub(super) thoughts: u32,
    pub(super) final_answers: u32,
    pub(super) compactions: u32,
    pub(super) stop_continuations: u32,
    pub(super) final_answer_turns: u32,
}

fn output_streaks_view(py: Python<'_>, m: &OutputMemory) -> PyResult<Py<OutputStreaksView>> {
    let count = |kind| m.streak(kind).count;
    Py::new(py, OutputStreaksView {
        messages: count(OutputKind::Message),
        thoughts: count(OutputKind::Thought),
        final_answers: count(OutputKind::FinalAnswer),
        compactions: m.compactions.count,
        stop_continuations: m.continuations.count,
        final_answer_turns: m.answers.count,
    })
}

/// Spending counted for budgets, as InspectRun's Totals shows it.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
pub(super) struct TotalsView {
    pub(super) tool_calls: u64,
    pub(super) tool_ms: u64,
    pub(super) input_tokens: u64,
    pub(super) output_tokens: u64,
    pub(super) cost_usd: f64,
    pub(super) wall_seconds: f64,
    pub(super) runs: u64,
}

pub(super) fn totals_view(py: Python<'_>, t: &service::Totals, wall_seconds: f64) -> PyResult<Py<TotalsView>> {
    Py::new(py, TotalsView { tool_calls: t.tool_calls, tool_ms: t.tool_ms, input_tokens: t.input_tokens,
                             output_tokens: t.output_tokens, cost_usd: t.cost_usd, wall_seconds, runs: t.runs })
}

/// The inspection role over a daemon's core (`Core.inspection`).
#[pyclass(module = "loopwarden_core", frozen)]
pub(super) struct Inspection {
    pub(super) core: Py<PyCore>,
}

#[pymethods]
impl Inspection {
    fn held(&self, py: Python<'_>, tenant: &str, run_id: &str) -> PyResult<bool> {
        Ok(self.core.bind(py).try_borrow()?.core.store.get(tenant, run_id).is_some())
    }

    /// A held run's view, None when the run is not held. `now`: the store's clock (wall times).
    #[pyo3(signature = (tenant, run_id, now = 0.0))]
    fn run(&self, py: Python<'_>, tenant: &str, run_id: &str, now: f64) -> PyResult<Option<RunView>> {
        let cell = self.core.bind(py).try_borrow()?;
        let core = &cell.core;
        let Some(entry) = core.inspect(tenant, run_id) else { return Ok(None) };
        let link = entry.tree.as_deref();
        let run_totals = match link {
            Some(l) => Some(totals_view(py, &l.totals, (now - l.started).max(0.0))?),
            None => None,
        };
        let root_link = core.store.get(tenant, entry.root_id()).and_then(|r| r.tree.as_deref());
        let tree_totals = match root_link.and_then(|l| l.tree.as_deref().map(|t| (t, l.started))) {
            Some((t, started)) => Some(totals_view(py, t, (now - started).max(0.0))?),
            None => None,
        };
        let state = &entry.state;
        let (guard_armed, guard_window_size, guard_observed) = match &state.rare().guard {
            Some(g) => (true, g.window_size, g.observed),
            None => (false, 0, 0),
        };
        let mut records = Vec::new();
        for r in state.history().iter() {
            records.push(Py::new(py, RecordView {
                seq: r.seq(),
                tool_name: r.spelling().to_string(),
                args_hash: args_hash_text(r.tool(), &r.args),
                tool_call_id: r.call_id().unwrap_or("").to_string(),
                result_hash: result_hash_text(r.status, &r.result).unwrap_or_default(),
                unknown_tool_name: r.unknown().unwrap_or("").to_string(),
                // generated:record-view-carried:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)
                // generated:record-view-carried:end
            })?);
        }
        let recent_verdicts = entry.recent_decisions().into_iter()
            .map(|d| PyBytes::new(py, &service::verdict_message(d).encode_to_vec()).unbind())
            .collect();
        Ok(Some(RunView {
            run_id: entry.run_id.to_string(),
            agent_id: entry.agent_id.to_string(),
            agent_label: core.config.agent_label(&entry.agent_id).to_string(),
            records,
            guard_armed,
            guard_window_size,
            guard_observed,
            blocks: state.blocks,
            aborted: state.rare().abort.is_some(),
            abort_error_code: state.rare().abort.as_ref().map(|a| a.error_code).unwrap_or(""),
            events_evaluated: entry.events_evaluated,
            recent_verdicts,
            parent_run_id: entry.parent_id().to_string(),
            children: link.map(|l| l.children.clone()).unwrap_or_default(),
            root_run_id: entry.root_id().to_string(),
            depth: link.map_or(0, |l| l.depth),
            tree_totals,
            run_totals,
            output_streaks: state.rare().outputs.as_deref().map(|m| output_streaks_view(py, m)).transpose()?,
        }))
    }

    /// Tests only: runs `tenant` holds in memory.
    #[cfg(feature = "testing")]
    fn tenant_runs(&self, py: Python<'_>, tenant: &str) -> PyResult<usize> {
        Ok(self.core.bind(py).try_borrow()?.core.store.tenant_runs(tenant))
    }
}
