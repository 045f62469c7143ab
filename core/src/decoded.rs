//! A stored run as read, whatever version wrote it: what stored.rs (protobuf, version 4 on) and
//! stored_json.rs (the JSON era) both decode to, and the names both read back into the engine's
//! values. Below both, so the one that dispatches by version and the legacy reader do not lean on
//! each other.

use std::collections::HashMap;

use crate::engine::{Action, Level, RunState, Verdict};
use crate::tree_link::TreeLink;

/// A decoded run, ready for the store.
pub struct Decoded {
    pub tenant: String,
    pub run_id: String,
    pub agent_id: String,
    pub session_id: String,
    pub last_seen: f64,
    pub events_evaluated: u64,
    pub state: RunState,
    pub retries: Option<DecodedRetries>,
    /// Its tree link, `started` in wall-clock seconds.
    pub tree: Option<TreeLink>,
}

pub struct DecodedRetries {
    pub seqs: Vec<u64>,
    pub digests: Vec<[u8; 8]>,
    pub next_slot: usize,
    /// slot -> (seq, decision id, verdict)
    pub decisions: HashMap<usize, (u64, String, Verdict)>,
    /// A delta's: the slots `seqs`/`digests` hold (written since its base, oldest first) and
    /// the window's length; `apply_delta` writes them into the base's window.
    pub slots: Option<(Vec<usize>, usize)>,
    /// Events remembered since the base: the slots a later delta must still carry.
    pub unsaved: usize,
}

/// A stored run's full record, decoded, with what a delta names it by.
pub struct StoredRun {
    pub run: Decoded,
    /// `record_id` of the value (a JSON-era value's: of its record's JSON text).
    pub id: u64,
    /// The value's length, which a delta is weighed against.
    pub len: usize,
    /// Read from a JSON-era value (stored_json.rs).
    pub legacy: bool,
}

pub fn action(name: &str, what: &str) -> Result<Action, String> {
    Ok(match name {
        "allow" => Action::Allow,
        "warn" => Action::Warn,
        "block" => Action::Block,
        "abort" => Action::Abort,
        "reject" => Action::Reject,
        "ask" => Action::Ask,
        other => return Err(format!("{what} is not an action: {other:?}")),
    })
}

pub fn level(name: &str, what: &str) -> Result<Level, String> {
    Ok(match name {
        "none" => Level::None,
        "warning" => Level::Warning,
        "critical" => Level::Critical,
        _ => return Err(format!("{what} is not a level")),
    })
}

pub fn error_code(code: &str, what: &str) -> Result<&'static str, String> {
    std::iter::once("")
        .chain(crate::tables::error_codes::ALL.iter().copied())
        .find(|c| *c == code)
        .ok_or_else(|| format!("{what} is not an error code: {code:?}"))
}
