//! The rolling detectors and their precedence (spec section 5), one module per detector; and
//! the detectors of loops without tool calls (`NO_TOOL`), which judge a model output or a
//! compaction instead of a call.
//!
//! `PRECEDENCE` is the order of the precedence table: the first detector that answers decides
//! the call. `RANKED_AFTER` holds the opt-in detectors that catch what the reference misses
//! (argument churn, identical errors, cycles of 3 to 6 calls, failures across tools, a repeated
//! side effect); they rank after the table, so switching them on can only raise a verdict (ALLOW
//! to WARN or BLOCK, WARN to BLOCK), never replace one of the table by one of the same or a lower
//! level.

mod argument_churn;
mod compaction_storm;
mod context;
mod cycle;
mod duplicate_side_effect;
mod error_repeat;
mod exec_failure_streak;
mod failure_cascade;
mod generic_repeat;
mod global_breaker;
mod known_poll;
mod ping_pong;
mod repeated_final_answer;
mod repeated_output;
mod run_wide;
mod stop_continuation;
mod unknown_tool;

pub(crate) use context::{Context, Detection, NoTool, NoToolEvent};
pub(crate) use run_wide::track_outcome;

use crate::engine::{Level, Settings};

type DetectFn = fn(&mut Context, &Settings) -> Option<Detection>;
const PRECEDENCE: [DetectFn; 6] = [
    unknown_tool::detect,
    global_breaker::detect,
    run_wide::detect, // the opt-in run-wide breaker sits right after the global circuit breaker
    known_poll::detect,
    ping_pong::detect,
    generic_repeat::detect,
];
const RANKED_AFTER: [DetectFn; 5] =
    [error_repeat::detect, argument_churn::detect, cycle::detect, failure_cascade::detect, duplicate_side_effect::detect];

/// The detectors of loops without tool calls, in the order they are asked: the first critical
/// answer decides (each ends the run), else the first warning.
type NoToolFn = fn(&NoTool, &Settings) -> Option<Detection>;
const NO_TOOL: [NoToolFn; 4] =
    [stop_continuation::detect, compaction_storm::detect, repeated_output::detect, repeated_final_answer::detect];

pub(crate) fn detect_no_tool(ctx: &NoTool, s: &Settings) -> Option<Detection> {
    let mut warning = None;
    for d in NO_TOOL {
        match d(ctx, s) {
            Some(det) if det.level == Level::Critical => return Some(det),
            Some(det) if warning.is_none() => warning = Some(det),
            _ => {}
        }
    }
    warning
}

pub(crate) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let mut found = None;
    for d in PRECEDENCE {
        found = d(ctx, s);
        if found.is_some() {
            break;
        }
    }
    if !s.ranked_after_on() || matches!(&found, Some(d) if d.level == Level::Critical) {
        return found;
    }
    let mut rank = found.as_ref().map_or(Level::None, |d| d.level);
    for d in RANKED_AFTER {
        if let Some(det) = d(ctx, s) {
            if det.level > rank {
                rank = det.level;
                let critical = det.level == Level::Critical;
                found = Some(det);
                if critical {
                    break;
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Settings};

    const CALL: (&str, &str) = ("deploy", r#"{"env": "prod"}"#);
    const DENIED: &str = "permission denied";

    /// A ranked-after detector raises a verdict, never replaces one at its own level.
    #[test]
    fn ranked_after_only_raises() {
        let mut run = Run::new(Settings { warning_threshold: 2, error_repeat_threshold: 3, ..small() });
        assert_eq!(seen(&run.failing_round(CALL.0, CALL.1, DENIED)), ALLOW);
        assert_eq!(seen(&run.failing_round(CALL.0, CALL.1, DENIED)), ALLOW);
        // Both warn at 2: the table's warning stands.
        assert_eq!(seen(&run.failing_round(CALL.0, CALL.1, DENIED)), (Action::Warn, Detector::GenericRepeat, 2));
        // error_repeat blocks at 3 while the table only warns: the block wins.
        assert_eq!(seen(&run.call(CALL.0, CALL.1)), (Action::Block, Detector::ErrorRepeat, 3));
    }

    /// A critical answer of the table is final: the ranked-after detectors are not asked.
    #[test]
    fn a_critical_of_the_table_is_final() {
        let mut run = Run::new(Settings { warning_threshold: 2, critical_threshold: 3, error_repeat_threshold: 3, ..small() });
        for _ in 0..3 {
            run.failing_round(CALL.0, CALL.1, DENIED);
        }
        assert_eq!(seen(&run.call(CALL.0, CALL.1)), (Action::Block, Detector::GenericRepeat, 3));
    }

    /// Rolling detection is off unless `enabled` is true (None: only recording).
    #[test]
    fn nothing_is_detected_unless_enabled() {
        let mut run = Run::new(Settings { enabled: None, ..small() });
        for _ in 0..8 {
            assert_eq!(seen(&run.round(CALL.0, CALL.1, r#""same""#)), ALLOW);
        }
        assert_eq!(run.state.history().len(), 8, "but history is recorded");
    }
}
