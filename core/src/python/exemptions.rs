//! The exemptions role: `Core.exemptions`, the tenants' standing exemptions ("always" answers to
//! an ASK) as ListExemptions, RevokeExemption and InspectRun show them, and their tables as the
//! state store moves them (one stored value per tenant, beside its runs).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::PyCore;
use crate::engine::args_hash_text;

/// A standing exemption, as ListExemptions and InspectRun show it (times: Unix seconds).
#[pyclass(module = "loopwarden_core", frozen, get_all)]
pub(super) struct ExemptionView {
    pub(super) id: String,
    pub(super) agent_id: String,
    pub(super) tool_name: String,
    pub(super) args_hash: String,
    pub(super) created_at: f64,
    pub(super) expires_at: f64,
    pub(super) run_id: String,
}

pub(super) fn exemption_view(e: &crate::engine::ask::Exemption, wall_now: f64, now: f64) -> ExemptionView {
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

/// A tenant's table as the state store writes it: its stored value (core/src/stored.rs) and
/// the seconds it stands (its longest-lived exemption's).
#[pyclass(module = "loopwarden_core", frozen, get_all)]
pub(super) struct StoredTable {
    pub(super) record: Py<PyBytes>,
    pub(super) ttl_seconds: f64,
}

/// A stored table taken in: whose it is and how many of its exemptions were still in force.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
pub(super) struct TableLoad {
    pub(super) tenant: String,
    pub(super) count: usize,
}

/// The exemptions role over a daemon's core (`Core.exemptions`).
#[pyclass(module = "loopwarden_core", frozen)]
pub(super) struct Exemptions {
    pub(super) core: Py<PyCore>,
}

#[pymethods]
impl Exemptions {
    /// The tenant's exemptions, newest first (`agent_id`, `tool_name`: filters when not empty).
    fn of_tenant(&self, py: Python<'_>, tenant: &str, agent_id: &str, tool_name: &str, wall_now: f64, now: f64) -> PyResult<Vec<ExemptionView>> {
        let cell = self.core.bind(py).try_borrow()?;
        Ok(cell.core.exemptions.list(tenant, agent_id, tool_name, now).into_iter().map(|e| exemption_view(e, wall_now, now)).collect())
    }

    /// The exemptions that apply to a held run's agent (InspectRun); empty when not held.
    fn of_run(&self, py: Python<'_>, tenant: &str, run_id: &str, wall_now: f64, now: f64) -> PyResult<Vec<ExemptionView>> {
        let cell = self.core.bind(py).try_borrow()?;
        let core = &cell.core;
        let Some(entry) = core.inspect(tenant, run_id) else { return Ok(Vec::new()) };
        Ok(core.exemptions.of_agent(tenant, &entry.agent_id, now).into_iter().map(|e| exemption_view(e, wall_now, now)).collect())
    }

    /// Withdraw one; None when the tenant holds no such id.
    fn revoke(&self, py: Python<'_>, tenant: &str, id: &str, wall_now: f64, now: f64) -> PyResult<Option<ExemptionView>> {
        let mut cell = self.core.bind(py).try_borrow_mut()?;
        Ok(cell.core.exemptions.revoke(tenant, id, now).map(|e| exemption_view(&e, wall_now, now)))
    }

    /// Exemptions in force, every tenant's (the gauge).
    fn count(&self, py: Python<'_>, now: f64) -> PyResult<usize> {
        Ok(self.core.bind(py).try_borrow()?.core.exemptions.count(now))
    }

    // ---------------------------------------------------------------- the state store's side

    /// Start marking changed tables.
    fn track_changes(&self, py: Python<'_>) -> PyResult<()> {
        self.core.bind(py).try_borrow_mut()?.core.exemptions.track_changes();
        Ok(())
    }

    fn dirty_count(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.core.bind(py).try_borrow()?.core.exemptions.dirty_count())
    }

    /// The tenants whose table changed since the last call.
    fn take_dirty(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self.core.bind(py).try_borrow_mut()?.core.exemptions.take_dirty())
    }

    /// Put tenants back after a failed write.
    fn redirty(&self, py: Python<'_>, tenants: Vec<String>) -> PyResult<()> {
        self.core.bind(py).try_borrow_mut()?.core.exemptions.redirty(tenants);
        Ok(())
    }

    /// The tenant's table as the store writes it; None when it holds none.
    fn encode(&self, py: Python<'_>, tenant: &str, wall_now: f64, now: f64) -> PyResult<Option<StoredTable>> {
        let cell = self.core.bind(py).try_borrow()?;
        let tables = &cell.core.exemptions;
        let Some(record) = tables.encode(tenant, wall_now, now) else { return Ok(None) };
        Ok(Some(StoredTable { record: PyBytes::new(py, &record).unbind(), ttl_seconds: tables.ttl_seconds(tenant, now) }))
    }

    /// The shared store holds no table for the tenant: drop memory's unless it is unwritten.
    fn absent(&self, py: Python<'_>, tenant: &str) -> PyResult<()> {
        self.core.bind(py).try_borrow_mut()?.core.exemptions.absent_in_store(tenant);
        Ok(())
    }

    /// Take in a stored table (any stored version); ValueError naming the field when malformed.
    fn load(&self, py: Python<'_>, record: &[u8], wall_now: f64, now: f64) -> PyResult<TableLoad> {
        let mut cell = self.core.bind(py).try_borrow_mut()?;
        let (tenant, count) = cell.core.exemptions.load(record, wall_now, now).map_err(PyValueError::new_err)?;
        Ok(TableLoad { tenant, count })
    }
}
