//! global_circuit_breaker: a hard stop for any no-progress streak of one call (tool + args)
//! that grows too long (G), whatever the other detectors are set to.

use super::context::{detection, Context, Detection};
use crate::tables::messages;
use crate::engine::{Detector, Level, Settings};

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let streak = ctx.counts().streak;
    if streak < s.global_circuit_breaker_threshold {
        return None;
    }
    Some(detection(
        Detector::GlobalCircuitBreaker,
        Level::Critical,
        streak,
        messages::global_breaker_critical(ctx.spelled, streak),
        format!("global:{}", ctx.result_key()),
        ctx.streak_evidence(streak),
    ))
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Settings};

    /// generic_repeat off (it would block at C first): the breaker is what stops the loop.
    fn settings() -> Settings {
        Settings { generic_repeat: false, ..small() } // G = 7
    }

    #[test]
    fn allows_below_g_and_blocks_at_g() {
        let mut run = Run::new(settings());
        for i in 0..7 {
            assert_eq!(seen(&run.round("fetch", r#"{"url": "x"}"#, r#""same""#)), ALLOW, "after {i} rounds");
        }
        let v = run.call("fetch", r#"{"url": "x"}"#);
        assert_eq!(seen(&v), (Action::Block, Detector::GlobalCircuitBreaker, 7));
        assert!(v.warning_key.starts_with("global:fetch:fetch:"), "{}", v.warning_key);
        assert_eq!(v.evidence_seqs, [1, 3, 5, 7, 9, 11, 13]);
    }

    #[test]
    fn a_changed_result_starts_the_streak_over() {
        let mut run = Run::new(settings());
        for _ in 0..6 {
            run.round("fetch", r#"{"url": "x"}"#, r#""same""#);
        }
        run.round("fetch", r#"{"url": "x"}"#, r#""new""#);
        assert_eq!(seen(&run.call("fetch", r#"{"url": "x"}"#)), ALLOW);
    }
}
