//! generic_repeat: the same tool with the same arguments again and again. Warns at W repeats
//! (pending or not); blocks once C identical outcomes show nothing changes. Known polls are the
//! poll detector's.

use super::context::{detection, Context, Detection};
use crate::tables::messages;
use crate::engine::{Detector, Level, Settings};

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    if ctx.known_poll || !s.generic_repeat {
        return None;
    }
    let counts = ctx.counts();
    let streak = counts.streak;
    // A streak across changing commands (execFailureStreak) is churn: new arguments, one outcome.
    // Where argumentChurn blocks later than C (fast: 10 against 5), it is judged at churn's
    // threshold, since good runs churn longer than they repeat one call (bench/real_traces.py).
    let block_at = if counts.failure_tail.is_some() && s.argument_churn_block_at > s.critical_threshold {
        s.argument_churn_block_at
    } else {
        s.critical_threshold
    };
    let tool = ctx.tool;
    if streak >= block_at {
        return Some(detection(
            Detector::GenericRepeat,
            Level::Critical,
            streak,
            messages::generic_repeat_critical(ctx.spelled, streak),
            format!("generic:{}", ctx.result_key()),
            ctx.streak_evidence(streak),
        ));
    }
    let repeats = ctx.counts().recent;
    if repeats >= s.warning_threshold {
        return Some(detection(
            Detector::GenericRepeat,
            Level::Warning,
            repeats,
            messages::generic_repeat_warning(ctx.spelled, repeats),
            format!("generic:{tool}:{}", ctx.args_hash()),
            ctx.recent_evidence(),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Level, Settings};

    const CALL: (&str, &str) = ("fetch", r#"{"url": "https://example.com"}"#);

    #[test]
    fn allows_below_w_warns_at_w_blocks_at_c() {
        let mut run = Run::new(small()); // W = 3, C = 5
        for i in 0..3 {
            assert_eq!(seen(&run.round(CALL.0, CALL.1, r#""same""#)), ALLOW, "after {i} rounds");
        }
        let v = run.round(CALL.0, CALL.1, r#""same""#);
        assert_eq!(seen(&v), (Action::Warn, Detector::GenericRepeat, 3));
        assert_eq!(v.level, Level::Warning);
        assert!(v.announce, "the first warning of a key is announced");
        let v = run.round(CALL.0, CALL.1, r#""same""#);
        assert_eq!(seen(&v), (Action::Warn, Detector::GenericRepeat, 4));
        assert!(!v.announce, "and not again in the same decade of its count");
        let v = run.call(CALL.0, CALL.1);
        assert_eq!(seen(&v), (Action::Block, Detector::GenericRepeat, 5));
        assert_eq!(v.level, Level::Critical);
        assert!(v.announce);
        assert_eq!(v.evidence_seqs, [1, 3, 5, 7, 9]);
    }

    /// The warning counts every repeat, pending or not; the block needs C identical outcomes.
    #[test]
    fn repeats_without_outcomes_warn_but_never_block() {
        let mut run = Run::new(small());
        let verdicts: Vec<_> = (0..8).map(|_| seen(&run.call(CALL.0, CALL.1))).collect();
        assert_eq!(verdicts[..3], [ALLOW; 3]);
        assert_eq!(verdicts[3..], [3, 4, 5, 6, 7].map(|n| (Action::Warn, Detector::GenericRepeat, n)));
    }

    #[test]
    fn changing_outcomes_warn_but_never_block() {
        let mut run = Run::new(small());
        let verdicts: Vec<_> = (0..8).map(|i| seen(&run.round(CALL.0, CALL.1, &format!(r#""page {i}""#)))).collect();
        assert_eq!(verdicts[..3], [ALLOW; 3]);
        assert_eq!(verdicts[3..], [3, 4, 5, 6, 7].map(|n| (Action::Warn, Detector::GenericRepeat, n)));
    }

    #[test]
    fn off_when_switched_off() {
        let mut run = Run::new(Settings { generic_repeat: false, ..small() });
        for _ in 0..6 {
            assert_eq!(seen(&run.round(CALL.0, CALL.1, r#""same""#)), ALLOW);
        }
    }
}
