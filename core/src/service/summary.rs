//! What one request tells Python besides its response bytes: counter increments, latency
//! buckets, decision log lines and eviction reasons. The core counts and Python exports, so the
//! metric names, labels and log levels stay Python's; `account` decides what a decision adds.

use super::{Core, Decision};
use crate::engine::{Action, Verdict};
use super::wire::EventRef;

/// Metric increments of one request: (counter, labels) -> count.
#[derive(Default)]
pub struct Summary {
    pub counters: Vec<(u8, [&'static str; 2], String, u64)>,
    pub latency_buckets: Vec<u64>,
    pub latency_sum: f64,
    /// (log level, message, decision) of the decisions worth a log line.
    pub logs: Vec<LogLine>,
    pub evictions: Vec<&'static str>,
    /// Events of a lazily loaded request whose run was already in memory (runs_loaded{memory}).
    pub held_runs: u64,
}

pub struct LogLine {
    pub level: u8,
    pub message: String,
    pub decision_id: String,
    pub tenant: String,
    pub run_id: String,
    pub agent_id: String,
    pub session_id: String,
    pub seq: u64,
    pub verdict: Verdict,
    pub kind: &'static str,
}

pub mod counter {
    pub const EVENTS: u8 = 0; // kind
    pub const REJECTED: u8 = 1; // error code
    pub const VERDICTS: u8 = 2; // action, detector, agent (+tenant)
    pub const RETRIED: u8 = 3;
    pub const SHADOW: u8 = 4; // shadow action, detector
    pub const WARNINGS: u8 = 5; // detector, agent (+tenant)
    pub const BLOCKS: u8 = 6; // detector, agent (+tenant)
    pub const ESCALATION_ABORTS: u8 = 7; // detector, agent (+tenant)
    pub const GUARD_ABORTS: u8 = 8; // agent (+tenant)
    pub const ASKS: u8 = 9; // detector, agent
    pub const APPROVALS: u8 = 10; // answer (approved_once, approved_always, denied, timed_out), agent
    pub const LIMIT_ABORTS: u8 = 11; // error code (budget_exhausted, tree_too_deep, too_many_children), agent (+tenant)
    pub const OUTPUT_LOOP_ABORTS: u8 = 12; // detector (of loops without tool calls), agent (+tenant)
}

pub const DEBUG: u8 = 10;
pub const INFO: u8 = 20;
pub const WARNING: u8 = 30;
pub const ERROR: u8 = 40;

impl Summary {
    pub(super) fn count(&mut self, counter: u8, labels: [&'static str; 2], agent: &str) {
        // Labels are static names: the same name is (almost always) the same pointer, so that is
        // tried before the bytes.
        let same = |a: &str, b: &str| (a.as_ptr() == b.as_ptr() && a.len() == b.len()) || super::same_text(a, b);
        for entry in self.counters.iter_mut() {
            if entry.0 == counter && same(entry.1[0], labels[0]) && same(entry.1[1], labels[1]) && super::same_text(&entry.2, agent) {
                entry.3 += 1;
                return;
            }
        }
        self.counters.push((counter, labels, agent.to_string(), 1));
    }
}

impl Core {
    /// `who`: the run's (tenant, agent id, session id), for log lines. `debug_logs`: the core's.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn account(debug_logs: bool, event: &EventRef, decision: &Decision, agent: &str, was_aborted: bool,
                          kind: &'static str, who: (&str, &str, &str), summary: &mut Summary) {
        let v = &decision.verdict;
        let detector = v.detector.name();
        summary.count(counter::VERDICTS, [v.action.name(), detector], agent);
        let log = |level: u8, message: &str, summary: &mut Summary| {
            summary.logs.push(LogLine {
                level,
                message: message.to_string(),
                decision_id: decision.decision_id.clone(),
                tenant: who.0.to_string(),
                run_id: decision.run_id.clone(),
                agent_id: who.1.to_string(),
                session_id: who.2.to_string(),
                seq: event.seq,
                verdict: v.clone(),
                kind,
            });
        };
        if let Some(shadow) = v.shadow_action {
            summary.count(counter::SHADOW, [shadow.name(), detector], "");
            log(WARNING, &format!("shadow {} (not enforced)", shadow.name()), summary);
            return;
        }
        match v.action {
            Action::Allow => {
                if v.guard_armed {
                    log(INFO, &v.message, summary);
                }
            }
            Action::Reject => summary.count(counter::REJECTED, [v.error_code, ""], ""),
            Action::Warn => {
                if v.announce {
                    summary.count(counter::WARNINGS, [detector, ""], agent);
                    log(WARNING, "loop warning", summary);
                } else if debug_logs {
                    log(DEBUG, "loop warning (not announced)", summary);
                }
            }
            Action::Block => {
                summary.count(counter::BLOCKS, [detector, ""], agent);
                log(WARNING, "tool call blocked", summary);
            }
            Action::Ask => {
                summary.count(counter::ASKS, [detector, ""], agent);
                log(WARNING, "tool call held for a human", summary);
            }
            Action::Abort => {
                if was_aborted {
                    if debug_logs {
                        log(DEBUG, "run already aborted", summary);
                    }
                    return;
                }
                if v.error_code == "tool_loop_persisted" {
                    summary.count(counter::ESCALATION_ABORTS, [detector, ""], agent);
                } else if matches!(v.error_code, "budget_exhausted" | "tree_too_deep" | "too_many_children") {
                    summary.count(counter::LIMIT_ABORTS, [v.error_code, ""], agent);
                } else if v.detector != crate::engine::Detector::PostCompactionGuard {
                    // The detectors of loops without tool calls end runs themselves.
                    summary.count(counter::OUTPUT_LOOP_ABORTS, [detector, ""], agent);
                } else {
                    summary.count(counter::GUARD_ABORTS, ["", ""], agent);
                }
                log(ERROR, "run aborted", summary);
            }
        }
    }
}
