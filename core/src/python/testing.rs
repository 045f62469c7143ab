//! Test hooks, compiled only with the `testing` feature (the dev venv's `make core`, never the
//! release wheel): the parity helpers the reference engine's tests compare against. The rest of
//! them sit beside what they reach, each under `#[cfg(feature = "testing")]`: `Core._panic_tool`,
//! `Persistence.encode_run`, `Inspection.tenant_runs`. `TEST_HOOKS` names them all, so a test
//! can check that a build has every one or none.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::{json_error, params_value};
use crate::json::{canonical, decode};

/// Every test hook, as `module.name` or `Class.name`.
pub(super) const TEST_HOOKS: [&str; 5] =
    ["canonical_json", "args_digest", "Core._panic_tool", "Persistence.encode_run", "Inspection.tenant_runs"];

/// The canonical bytes of a JSON text (what every digest is taken over).
#[pyfunction]
#[pyo3(signature = (text, max_depth = 64))]
fn canonical_json<'py>(py: Python<'py>, text: &str, max_depth: usize) -> PyResult<Bound<'py, PyBytes>> {
    let value = decode(text, max_depth).map_err(json_error)?;
    Ok(PyBytes::new(py, &canonical(&value)))
}

/// A call's arguments digest (tool name and params) as the core takes it.
#[pyfunction]
fn args_digest<'py>(py: Python<'py>, tool_name: &str, params_json: &str) -> PyResult<Bound<'py, PyBytes>> {
    Ok(PyBytes::new(py, &crate::fingerprint::args_digest(tool_name, &params_value(params_json)?)))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(canonical_json, m)?)?;
    m.add_function(wrap_pyfunction!(args_digest, m)?)?;
    Ok(())
}
