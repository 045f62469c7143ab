//! The persistence role: `Core.persistence`, the runs as the state store moves them (statestore/
//! runs.py is its Python side): which runs changed, a run as its stored record, a stored record
//! taken in or merged, the runs whose load failed, and the owner generations writes are fenced by.
//! Outcomes cross as the types below, so Python has no second spelling of them.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::PyCore;
use crate::service;

/// What became of a stored run handed to `Persistence.load` or `Persistence.merge`.
#[pyclass(module = "loopwarden_core", name = "Loaded", eq, eq_int, frozen, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Loaded {
    /// Taken in (with the delta stored after it, when there was one).
    #[pyo3(name = "RESTORED")]
    Restored,
    /// Restored from its full record alone: the delta stored after it did not apply.
    #[pyo3(name = "RESTORED_BASE_ONLY")]
    RestoredBaseOnly,
    /// Idle past the TTL: not taken in.
    #[pyo3(name = "EXPIRED")]
    Expired,
    /// Not the run that was asked for.
    #[pyo3(name = "MISMATCH")]
    Mismatch,
    /// Merged into the copy memory evaluated while the store was away.
    #[pyo3(name = "MERGED")]
    Merged,
    /// Memory's copy is current: the record is not used.
    #[pyo3(name = "HELD")]
    Held,
}

#[pymethods]
impl Loaded {
    /// The run is in memory from the stored record (restored, with or without its delta).
    #[getter]
    fn restored(&self) -> bool {
        matches!(self, Loaded::Restored | Loaded::RestoredBaseOnly)
    }
}

impl From<service::Loaded> for Loaded {
    fn from(outcome: service::Loaded) -> Loaded {
        match outcome {
            service::Loaded::Restored => Loaded::Restored,
            service::Loaded::RestoredBaseOnly => Loaded::RestoredBaseOnly,
            service::Loaded::Expired => Loaded::Expired,
            service::Loaded::Mismatch => Loaded::Mismatch,
            service::Loaded::Merged => Loaded::Merged,
            service::Loaded::Held => Loaded::Held,
        }
    }
}

/// A load's or a merge's answer: what became of the run, and the runs it evicted (by reason).
#[pyclass(module = "loopwarden_core", frozen, get_all)]
pub(super) struct RunLoad {
    pub(super) outcome: Loaded,
    pub(super) evictions: Vec<&'static str>,
}

/// A run changed since the last `take_dirty`: `held` False when it ended or was evicted (its
/// stored copy is deleted); `root` its tree's root (the run itself for a root), which names the
/// stored key.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
#[derive(Clone)]
pub(super) struct DirtyRun {
    pub(super) tenant: String,
    pub(super) run_id: String,
    pub(super) held: bool,
    pub(super) root: String,
}

#[pymethods]
impl DirtyRun {
    #[new]
    #[pyo3(signature = (tenant, run_id, held, root = None))]
    fn new(tenant: String, run_id: String, held: bool, root: Option<String>) -> DirtyRun {
        let root = root.unwrap_or_else(|| run_id.clone());
        DirtyRun { tenant, run_id, held, root }
    }

    /// (tenant, run_id)
    #[getter]
    fn key(&self) -> (String, String) {
        (self.tenant.clone(), self.run_id.clone())
    }
}

/// A run whose load from the shared store failed, marked until its stored copy is merged.
#[pyclass(module = "loopwarden_core", frozen, get_all)]
pub(super) struct MarkedRun {
    pub(super) tenant: String,
    pub(super) run_id: String,
    pub(super) root: String,
}

/// The persistence role over a daemon's core (`Core.persistence`).
#[pyclass(module = "loopwarden_core", frozen)]
pub(super) struct Persistence {
    pub(super) core: Py<PyCore>,
}

#[pymethods]
impl Persistence {
    /// Start marking changed runs (`evictions_delete`: an eviction deletes the stored run).
    fn track_changes(&self, py: Python<'_>, evictions_delete: bool) -> PyResult<()> {
        self.core.bind(py).try_borrow_mut()?.core.store.track_changes(evictions_delete);
        Ok(())
    }

    fn dirty_count(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.core.bind(py).try_borrow()?.core.store.dirty_count())
    }

    /// The runs changed since the last call, the longest-unwritten first.
    fn take_dirty(&self, py: Python<'_>) -> PyResult<Vec<DirtyRun>> {
        let taken = self.core.bind(py).try_borrow_mut()?.core.store.take_dirty_rooted();
        Ok(taken.into_iter().map(|((tenant, run_id), held, root)| DirtyRun { tenant, run_id, held, root }).collect())
    }

    /// Put back runs a failed write did not store (a run marked again since keeps its mark).
    fn redirty(&self, py: Python<'_>, items: Vec<PyRef<'_, DirtyRun>>) -> PyResult<()> {
        let items = items.iter().map(|d| ((d.tenant.clone(), d.run_id.clone()), d.held, d.root.clone())).collect();
        self.core.bind(py).try_borrow_mut()?.core.store.redirty_rooted(items);
        Ok(())
    }

    /// Drop every run and every exemption (an unreadable state file: start empty).
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let mut cell = self.core.bind(py).try_borrow_mut()?;
        cell.core.store.clear();
        cell.core.exemptions.clear();
        Ok(())
    }

    fn held(&self, py: Python<'_>, tenant: &str, run_id: &str) -> PyResult<bool> {
        Ok(self.core.bind(py).try_borrow()?.core.store.get(tenant, run_id).is_some())
    }

    /// The run for a flush (persist.rs `flush_record`): its stored value, or with `deltas`
    /// perhaps a delta (core/src/stored.rs). Its change mark is
    /// cleared as it is encoded, so a change after this lists it again behind the runs still
    /// waiting (store.rs: `written`).
    #[pyo3(signature = (tenant, run_id, wall_now, now, deltas = false))]
    fn take_record<'py>(&self, py: Python<'py>, tenant: &str, run_id: &str, wall_now: f64, now: f64, deltas: bool) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let mut cell = self.core.bind(py).try_borrow_mut()?;
        let Some(written) = cell.core.flush_record(tenant, run_id, wall_now, now, deltas) else { return Ok(None) };
        cell.core.store.written(tenant, run_id);
        let (service::ForFlush::Record(bytes) | service::ForFlush::Delta(bytes)) = written;
        Ok(Some(PyBytes::new(py, &bytes)))
    }

    /// Take in a stored value (any version) and the delta stored after it, if any; ValueError
    /// naming the field when the record is malformed.
    #[pyo3(signature = (record, wall_now, now, expect = None, delta = None))]
    fn load(&self, py: Python<'_>, record: &[u8], wall_now: f64, now: f64, expect: Option<(String, String)>, delta: Option<&[u8]>) -> PyResult<RunLoad> {
        let mut evictions = Vec::new();
        let outcome = self.core.bind(py).try_borrow_mut()?.core
            .load_run(record, delta, wall_now, now, expect.as_ref().map(|(t, r)| (t.as_str(), r.as_str())), &mut evictions)
            .map_err(PyValueError::new_err)?;
        Ok(RunLoad { outcome: outcome.into(), evictions })
    }

    /// A stored record after a failed load, merged into memory's copy (merge.rs); ValueError
    /// naming the field when it is malformed (the run's mark is lifted then too).
    fn merge(&self, py: Python<'_>, record: &[u8], wall_now: f64, now: f64, expect: (String, String)) -> PyResult<RunLoad> {
        let mut evictions = Vec::new();
        let outcome = self.core.bind(py).try_borrow_mut()?.core
            .merge_run(record, wall_now, now, (expect.0.as_str(), expect.1.as_str()), &mut evictions)
            .map_err(PyValueError::new_err)?;
        Ok(RunLoad { outcome: outcome.into(), evictions })
    }

    /// Mark a run whose load from the shared store failed: evaluated from memory, not written
    /// until merged (`root`: its tree's root, "" for the run itself). True when newly marked.
    fn mark_unmerged(&self, py: Python<'_>, tenant: &str, run_id: &str, root: &str) -> PyResult<bool> {
        Ok(self.core.bind(py).try_borrow_mut()?.core.store.mark_unmerged(tenant, run_id, root))
    }

    /// Lift a run's mark (the store holds nothing for it): True when it had one.
    fn clear_unmerged(&self, py: Python<'_>, tenant: &str, run_id: &str) -> PyResult<bool> {
        Ok(self.core.bind(py).try_borrow_mut()?.core.store.clear_unmerged(tenant, run_id))
    }

    /// The marked runs.
    fn unmerged(&self, py: Python<'_>) -> PyResult<Vec<MarkedRun>> {
        let marked = self.core.bind(py).try_borrow()?.core.store.unmerged();
        Ok(marked.into_iter().map(|(tenant, run_id, root)| MarkedRun { tenant, run_id, root }).collect())
    }

    fn unmerged_count(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.core.bind(py).try_borrow()?.core.store.unmerged_count())
    }

    /// The owner generation of a held run's copy (0: none known or not held).
    fn owner_gen(&self, py: Python<'_>, tenant: &str, run_id: &str) -> PyResult<u64> {
        Ok(self.core.bind(py).try_borrow()?.core.store.get(tenant, run_id).map_or(0, |e| e.owner_gen))
    }

    /// Note the owner generation of a held run's copy (after its load or its write) and, when
    /// given, until when (the core's clock) this replica's lease on it is known to be live.
    #[pyo3(signature = (tenant, run_id, gen, lease_until = None))]
    fn set_owner_gen(&self, py: Python<'_>, tenant: &str, run_id: &str, gen: u64, lease_until: Option<f64>) -> PyResult<()> {
        let mut cell = self.core.bind(py).try_borrow_mut()?;
        cell.core.store.set_owner_gen(tenant, run_id, gen);
        if let Some(until) = lease_until {
            cell.core.store.set_lease(tenant, run_id, until);
        }
        Ok(())
    }

    /// A held run whose lease lapsed by `now` (the loader re-reads its stored copy).
    fn lease_lapsed(&self, py: Python<'_>, tenant: &str, run_id: &str, now: f64) -> PyResult<bool> {
        Ok(self.core.bind(py).try_borrow()?.core.store.lease_lapsed(tenant, run_id, now))
    }

    /// Drop a held run without deleting it from the store (another replica owns it).
    fn forget(&self, py: Python<'_>, tenant: &str, run_id: &str) -> PyResult<bool> {
        Ok(self.core.bind(py).try_borrow_mut()?.core.store.forget(tenant, run_id))
    }

    /// Tests only: the run's full stored value (no delta, no change mark cleared).
    #[cfg(feature = "testing")]
    fn encode_run<'py>(&self, py: Python<'py>, tenant: &str, run_id: &str, wall_now: f64, now: f64) -> PyResult<Option<Bound<'py, PyBytes>>> {
        Ok(self.core.bind(py).try_borrow()?.core.encode_run(tenant, run_id, wall_now, now).map(|b| PyBytes::new(py, &b)))
    }
}
