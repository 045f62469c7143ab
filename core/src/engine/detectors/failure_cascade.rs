//! failure_cascade (opt-in): the last N calls of the run, whatever their tools, all failed. An
//! agent that hits a wall often pivots from tool to tool (read, list, exec, write), each call
//! failing; no per-call count sees it. Counts completed records from the newest back to the
//! first one that did not fail (an error outcome); a call still without an outcome ends the
//! count too (nothing says it failed). Warns at N - 1 failures, blocks the next call at N.

use super::context::{detection, Context, Detection};
use crate::engine::{Detector, Level, Settings};
use crate::fingerprint::ERROR;
use crate::tables::messages;

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let threshold = s.failure_cascade_threshold;
    if threshold == 0 {
        return None;
    }
    let h = ctx.history;
    let failed = h.iter().rev().take_while(|r| r.status == ERROR).count();
    let streak = failed as u32;
    if streak + 1 < threshold {
        return None;
    }
    let evidence: Vec<usize> = (h.len() - failed..h.len()).collect();
    let key = "failure-cascade".to_string();
    if streak >= threshold {
        let message = messages::failure_cascade_critical(streak);
        return Some(detection(Detector::FailureCascade, Level::Critical, streak, message, key, evidence));
    }
    let message = messages::failure_cascade_warning(streak);
    Some(detection(Detector::FailureCascade, Level::Warning, streak, message, key, evidence))
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Settings};

    const TOOLS: [&str; 8] = ["read", "list", "exec", "write", "grep", "fetch", "edit", "search"];

    fn settings(threshold: u32) -> Settings {
        Settings { failure_cascade_threshold: threshold, ..small() }
    }

    #[test]
    fn n_failures_of_n_different_tools_block_call_n_plus_one() {
        for n in [2u32, 4, 6] {
            let mut run = Run::new(settings(n));
            let verdicts: Vec<_> =
                (0..n as usize).map(|i| run.failing_round(TOOLS[i], "{}", &format!("{} failed: no such file", TOOLS[i]))).collect();
            let warned = (n as usize).saturating_sub(1);
            assert!(verdicts[..warned].iter().all(|v| seen(v) == ALLOW), "n {n}");
            assert_eq!(seen(&verdicts[warned]), (Action::Warn, Detector::FailureCascade, n - 1), "n {n}");
            let v = run.call("search", r#"{"q": "why"}"#);
            assert_eq!(seen(&v), (Action::Block, Detector::FailureCascade, n), "n {n}");
            assert_eq!(v.evidence_seqs.len(), n as usize);
            assert!(v.message.starts_with("CRITICAL: the last"), "{}", v.message);
        }
    }

    #[test]
    fn one_success_starts_the_count_over() {
        let mut run = Run::new(settings(4));
        for tool in &TOOLS[..3] {
            run.failing_round(tool, "{}", "denied");
        }
        run.round("read", r#"{"path": "README"}"#, r#""hello""#);
        for tool in &TOOLS[..2] {
            assert_eq!(seen(&run.failing_round(tool, "{}", "denied")), ALLOW);
        }
        assert_eq!(seen(&run.call("exec", "{}")), ALLOW);
    }

    #[test]
    fn a_call_without_an_outcome_ends_the_count() {
        let mut run = Run::new(settings(3));
        run.failing_round("read", "{}", "denied");
        run.call("list", "{}");
        run.failing_round("exec", "{}", "denied");
        assert_eq!(seen(&run.call("write", "{}")), ALLOW);
    }

    #[test]
    fn off_unless_configured() {
        let mut run = Run::new(small());
        for tool in TOOLS {
            assert_eq!(seen(&run.failing_round(tool, "{}", "denied")), ALLOW);
        }
    }
}
