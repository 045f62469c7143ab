//! error_repeat (opt-in): the same call failing with the identical error again and again. The
//! reference only warns such a call at W and blocks at C; a small model retrying a failing call
//! rarely recovers after a few identical errors. Blocks at the threshold, warns one earlier.

use super::context::{detection, Context, Detection};
use crate::tables::messages;
use crate::engine::{Detector, Level, Settings};
use crate::fingerprint::ERROR;

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let threshold = s.error_repeat_threshold;
    if threshold == 0 {
        return None;
    }
    let (streak, key) = {
        let c = ctx.counts();
        (c.streak, c.result_key)
    };
    match key {
        Some((status, _)) if status == ERROR && streak + 1 >= threshold => {}
        _ => return None,
    }
    let key = format!("error:{}", ctx.result_key());
    if streak >= threshold {
        return Some(detection(
            Detector::ErrorRepeat,
            Level::Critical,
            streak,
            messages::error_repeat_critical(ctx.spelled, streak),
            key,
            ctx.streak_evidence(streak),
        ));
    }
    Some(detection(
        Detector::ErrorRepeat,
        Level::Warning,
        streak,
        messages::error_repeat_warning(ctx.spelled, streak),
        key,
        ctx.streak_evidence(streak),
    ))
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Settings};

    const CALL: (&str, &str) = ("deploy", r#"{"env": "prod"}"#);
    const DENIED: &str = "permission denied";

    fn settings() -> Settings {
        Settings { error_repeat_threshold: 3, ..small() } // W = 3, C = 5
    }

    #[test]
    fn allows_below_warns_one_before_and_blocks_at_the_threshold() {
        let mut run = Run::new(settings());
        assert_eq!(seen(&run.failing_round(CALL.0, CALL.1, DENIED)), ALLOW);
        assert_eq!(seen(&run.failing_round(CALL.0, CALL.1, DENIED)), ALLOW);
        let v = run.failing_round(CALL.0, CALL.1, DENIED);
        assert_eq!(seen(&v), (Action::Warn, Detector::ErrorRepeat, 2));
        assert!(v.warning_key.starts_with("error:deploy:deploy:"), "{}", v.warning_key);
        assert!(v.warning_key.contains(":error:"), "the result half names an error: {}", v.warning_key);
        // generic_repeat warns here too (3 repeats); the block outranks it.
        let v = run.call(CALL.0, CALL.1);
        assert_eq!(seen(&v), (Action::Block, Detector::ErrorRepeat, 3));
        assert_eq!(v.evidence_seqs, [1, 3, 5]);
    }

    #[test]
    fn identical_results_are_not_its_to_judge() {
        let mut run = Run::new(settings());
        for _ in 0..3 {
            assert_eq!(seen(&run.round(CALL.0, CALL.1, r#""ok""#)), ALLOW);
        }
        assert_eq!(seen(&run.call(CALL.0, CALL.1)), (Action::Warn, Detector::GenericRepeat, 3));
    }

    #[test]
    fn a_different_error_starts_the_streak_over() {
        let mut run = Run::new(settings());
        run.failing_round(CALL.0, CALL.1, DENIED);
        run.failing_round(CALL.0, CALL.1, DENIED);
        run.failing_round(CALL.0, CALL.1, "disk full");
        assert_eq!(seen(&run.call(CALL.0, CALL.1)), (Action::Warn, Detector::GenericRepeat, 3));
    }

    #[test]
    fn off_unless_a_threshold_is_set() {
        let mut run = Run::new(small());
        for _ in 0..3 {
            run.failing_round(CALL.0, CALL.1, DENIED);
        }
        assert_eq!(seen(&run.call(CALL.0, CALL.1)), (Action::Warn, Detector::GenericRepeat, 3));
    }
}
