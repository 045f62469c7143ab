//! The per-event service around the engine, on raw protobuf: envelope limits, the run store (LRU
//! over all runs, idle TTL, eviction reasons), idempotent retries, decision ids, and the
//! per-request summary the daemon turns into metrics and decision log lines. The reference's
//! `service.py`, `store.py` and `retries.py` (tests/reference) are the oracle it is held to.
//!
//! Split by job, each module beside its tests: the run store, the retry window, the request
//! path, the request's events read in place (wire), the per-request summary, the state-store
//! glue and the views of decisions and runs.
//! `Core` (here) ties them together; its methods live with the job they do. Everything other
//! code uses is re-exported here, so `crate::service::X` is the one path to it.

use std::collections::HashMap;

use crate::engine::{Settings, Verdict};
use crate::fingerprint::Catalog;
use crate::json::py_isspace;

mod budgets;
mod exemptions;
mod limits_gen;
mod merge;
mod persist;
mod request;
mod retries;
mod store;
mod summary;
mod trees;
mod views;
mod wire;

pub use exemptions::{Exemptions, MAX_EXEMPTIONS_PER_TENANT};
pub use persist::{ForFlush, Loaded};
pub use store::Base;
pub use crate::py_repr::py_repr;
pub use limits_gen::Limits;
pub use request::{count_events, Refusal, Side};
pub use retries::{content_digest, content_digest_of, RETRY_WINDOW};
pub use store::{Entry, RunKey, Store, RECENT_DECISIONS};
pub use summary::{counter, LogLine, Summary, DEBUG, ERROR, INFO, WARNING};
pub use trees::{Notice, Totals, TreeLink};
pub use views::{evaluate_response, verdict_message};
pub use wire::{decode_in_place, kind_name, EventRef, Events, KindRef, OutcomeRef};

/// The compiled config: settings per agent id, the defaults, the tool catalog.
#[derive(Default)]
pub struct Config {
    pub default: Settings,
    pub agents: HashMap<String, Settings>,
    pub catalog: Catalog,
}

impl Config {
    fn settings_for(&self, agent_id: &str) -> &Settings {
        self.agents.get(agent_id).unwrap_or(&self.default)
    }
    pub fn agent_label<'a>(&self, agent_id: &'a str) -> &'a str {
        let agent = agent_id.trim_matches(py_isspace);
        if self.agents.contains_key(agent) { agent } else { "default" }
    }
}

/// `a == b` for the short texts the request path compares again and again (run keys, agent
/// ids), inline: libc's memcmp, called for each, was over a tenth of the core's time on
/// grpc_bench's traffic (corebench batch: 3.6 -> 3.0 µs an event).
#[inline]
pub(crate) fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let (mut left, mut right) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut left).zip(&mut right) {
        if u64::from_ne_bytes(x.try_into().expect("8 bytes")) != u64::from_ne_bytes(y.try_into().expect("8 bytes")) {
            return false;
        }
    }
    left.remainder().iter().zip(right.remainder()).all(|(x, y)| x == y)
}

#[derive(Clone)]
pub struct Decision {
    pub seq: u64,
    pub run_id: String,
    pub verdict: Verdict,
    pub decision_id: String,
}

pub struct Core {
    pub config: Config,
    pub limits: Limits,
    pub store: Store,
    pub instance_id: String,
    decisions: u64,
    pub latency_bounds: Vec<f64>,
    pub debug_logs: bool,
    /// Tests only (the `testing` feature): evaluating a call of this tool panics (how a bug in
    /// the core would).
    #[cfg(feature = "testing")]
    pub panic_tool: Option<String>,
    /// Requests evaluated so far: a request's number keys its calls' batch (engine::batches).
    requests: u64,
    /// Standing exemptions ("always" answers to an ASK), tenant-wide (service::exemptions).
    pub exemptions: Exemptions,
}

impl Core {
    pub fn new(config: Config, limits: Limits, max_runs: usize, idle_ttl: f64, instance_id: String, latency_bounds: Vec<f64>) -> Core {
        Core {
            config, limits, store: Store::new(max_runs, idle_ttl), instance_id, decisions: 0, latency_bounds, debug_logs: false,
            #[cfg(feature = "testing")]
            panic_tool: None,
            requests: 0, exemptions: Exemptions::default(),
        }
    }

    pub fn set_decision_counter(&mut self, value: u64) {
        self.decisions = value;
    }

    fn next_decision_id(&mut self) -> String {
        self.decisions += 1;
        format!("{}-{:x}", self.instance_id, self.decisions)
    }

    /// InspectRun's view of one run, or None.
    pub fn inspect(&self, tenant: &str, run_id: &str) -> Option<&Entry> {
        self.store.get(tenant, run_id.trim_matches(py_isspace))
    }
}

#[cfg(all(test, not(feature = "testing")))]
mod release_build {
    use super::*;

    /// A compile check: built without `testing` (the release wheel's build), `Core` is these
    /// fields and no others, so a test hook left outside the feature fails to compile here.
    #[test]
    fn core_carries_no_test_hook_without_the_testing_feature() {
        let core = Core {
            config: Config::default(), limits: Limits::default(), store: Store::new(1, 1.0), instance_id: String::new(),
            decisions: 0, latency_bounds: Vec::new(), debug_logs: false, requests: 0, exemptions: Exemptions::default(),
        };
        assert_eq!(0, core.store.len());
    }
}

#[cfg(test)]
mod text_tests {
    #[test]
    fn same_text_is_string_equality() {
        let texts = ["", "a", "run-1", "run-1234", "run-12345", "0123456789abcdef", "f47ac10b-58cc-4372-a567-0e02b2c3d479"];
        for a in texts {
            for b in texts {
                assert_eq!(super::same_text(a, b), a == b, "{a:?} {b:?}");
            }
            // One byte changed anywhere: in a whole word or in the tail.
            for i in 0..a.len() {
                let mut other = a.as_bytes().to_vec();
                other[i] ^= 1;
                assert!(!super::same_text(a, std::str::from_utf8(&other).unwrap()), "{a:?} at {i}");
            }
        }
    }
}
