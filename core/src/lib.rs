//! loopwarden-core: the per-event work of the daemon, compiled. Python hands it request bytes
//! and compiled settings; it returns response bytes and a small per-request summary.
pub mod carried_gen;
pub mod engine;
pub mod exec_failure;
pub mod fingerprint;
pub mod hostpolls;
pub mod inconclusive;
pub mod intern;
pub mod json;
pub mod py_repr;
#[allow(clippy::all)]
pub mod pb;
pub mod toolnames;
pub mod service;
pub mod tables;
pub mod tool_rules;
/// The stored-run format, the JSON-era reader, what both decode to; the data they share with the
/// service.
pub mod decoded;
pub mod stored;
pub mod stored_json;
#[allow(clippy::all)]
pub mod state_pb;
pub mod tree_link;
#[cfg(feature = "python")]
mod python;
