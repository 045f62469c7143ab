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
pub use persist::{Base, ForFlush, Loaded};
pub use request::{count_events, py_repr, Limits, Refusal, Side};
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
