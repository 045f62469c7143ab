//! generic_repeat: the same tool with the same arguments again and again. Warns at W repeats
//! (pending or not); blocks once C identical outcomes show nothing changes. Known polls are the
//! poll detector's. With `loopwarden.sameOutcome` the warning needs the same evidence as the
//! block: identical outcomes, one fewer than block at (`same_outcome`).

use super::context::{detection, Context, Detection};
use crate::tables::messages;
use crate::engine::{Detector, Level, Settings};
use crate::fingerprint::ERROR;

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    if ctx.known_poll || !s.generic_repeat {
        return None;
    }
    if let Some(block_at) = ctx.same_outcome_block_at(s, false) {
        return same_outcome(ctx, s, block_at);
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
    if streak >= block_at {
        return Some(critical(ctx, streak));
    }
    let repeats = ctx.counts().recent;
    // Under sameOutcome a repeat count is no evidence: a streak of exec failures across changing
    // commands (the only streak that reaches here with it on) is judged at its block alone.
    (repeats >= s.warning_threshold && s.same_outcome_block_at == 0).then(|| repeats_warning(ctx, repeats))
}

/// sameOutcome: the block at `block_at` identical outcomes, the warning one call before it, and
/// nothing for a call whose outcomes changed, however often its arguments repeat. Calls still
/// without an outcome are no evidence; only a run in which no identical call has an outcome at
/// all (a host that reports none) is warned at W as in the reference.
fn same_outcome(ctx: &mut Context, s: &Settings, block_at: u32) -> Option<Detection> {
    let (streak, key, recent) = {
        let c = ctx.counts();
        (c.streak, c.result_key, c.recent)
    };
    let Some((status, _)) = key else {
        return (recent >= s.warning_threshold && ctx.no_outcome_yet()).then(|| repeats_warning(ctx, recent));
    };
    if streak >= block_at {
        return Some(critical(ctx, streak));
    }
    if streak + 1 < block_at {
        return None;
    }
    let evidence = ctx.streak_evidence(streak);
    let since = ctx.history[evidence[0]].seq();
    let outcome = if status == ERROR { "error" } else { "result" };
    Some(detection(
        Detector::GenericRepeat,
        Level::Warning,
        streak,
        messages::same_outcome_warning(ctx.spelled, streak, outcome, since),
        format!("generic:{}", ctx.result_key()),
        evidence,
    ))
}

/// The block: `streak` identical outcomes show nothing changes.
fn critical(ctx: &mut Context, streak: u32) -> Detection {
    detection(
        Detector::GenericRepeat,
        Level::Critical,
        streak,
        messages::generic_repeat_critical(ctx.spelled, streak),
        format!("generic:{}", ctx.result_key()),
        ctx.streak_evidence(streak),
    )
}

/// The reference's warning: `repeats` identical calls, whatever they returned.
fn repeats_warning(ctx: &Context, repeats: u32) -> Detection {
    detection(
        Detector::GenericRepeat,
        Level::Warning,
        repeats,
        messages::generic_repeat_warning(ctx.spelled, repeats),
        format!("generic:{}:{}", ctx.tool, ctx.args_hash()),
        ctx.recent_evidence(),
    )
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

    mod same_outcome {
        use crate::engine::testing::{seen, small, Run, ALLOW};
        use crate::engine::{Action, Detector, Settings};

        fn settings() -> Settings {
            Settings { warning_threshold: 4, critical_threshold: 5, same_outcome_block_at: 3, same_outcome_inconclusive_block_at: 4, ..small() }
        }

        const TEST: (&str, &str) = ("exec", r#"{"command": "pytest tests/test_x.py"}"#);

        /// An edit, re-run the test, edit again: twelve runs of one command whose output changes
        /// each time are progress, never a repeat to warn.
        #[test]
        fn a_test_rerun_whose_output_changes_is_never_warned() {
            let mut run = Run::new(settings());
            for i in 0..12 {
                let edit = format!(r#"{{"path": "src/x.py", "patch": "fix {i}"}}"#);
                assert_eq!(seen(&run.round("edit", &edit, r#""""#)), ALLOW, "edit {i}");
                let output = format!(r#""{} passed, {} failed""#, i, 12 - i);
                assert_eq!(seen(&run.round(TEST.0, TEST.1, &output)), ALLOW, "run {i}");
            }
        }

        /// The same output again: the 3rd call is warned, with its evidence, and the 4th blocked.
        #[test]
        fn an_identical_output_is_warned_at_the_3rd_call_and_blocked_at_the_4th() {
            let mut run = Run::new(settings());
            run.round("read", r#"{"path": "a"}"#, r#""a""#);
            assert_eq!(seen(&run.round(TEST.0, TEST.1, r#""1 failed""#)), ALLOW);
            assert_eq!(seen(&run.round(TEST.0, TEST.1, r#""1 failed""#)), ALLOW);
            let v = run.round(TEST.0, TEST.1, r#""1 failed""#);
            assert_eq!(seen(&v), (Action::Warn, Detector::GenericRepeat, 2));
            assert_eq!(v.evidence_seqs, [3, 5]);
            assert!(v.message.contains("called 2 times with identical arguments and returned the identical result each time (unchanged since seq 3): repeating it has not changed anything"), "{}", v.message);
            assert!(v.announce);
            let v = run.call(TEST.0, TEST.1);
            assert_eq!(seen(&v), (Action::Block, Detector::GenericRepeat, 3));
            assert_eq!(v.evidence_seqs, [3, 5, 7]);
        }

        #[test]
        fn an_identical_error_is_named_an_error() {
            let mut run = Run::new(settings());
            run.failing_round(TEST.0, TEST.1, "exit 2");
            run.failing_round(TEST.0, TEST.1, "exit 2");
            let v = run.failing_round(TEST.0, TEST.1, "exit 2");
            assert!(v.message.contains("returned the identical error each time"), "{}", v.message);
            assert_eq!(seen(&run.call(TEST.0, TEST.1)), (Action::Block, Detector::GenericRepeat, 3));
        }

        /// A silent success may have changed what it does not report: one more repeat.
        #[test]
        fn a_silent_success_takes_one_more_repeat() {
            let write = ("exec", r#"{"command": "sed -i s/a/b/ x.py"}"#);
            let mut run = Run::new(settings());
            let verdicts: Vec<_> = (0..5).map(|_| seen(&run.round(write.0, write.1, r#"{"stdout": "", "stderr": ""}"#))).collect();
            assert_eq!(verdicts[..3], [ALLOW; 3]);
            assert_eq!(verdicts[3], (Action::Warn, Detector::GenericRepeat, 3));
            assert_eq!(verdicts[4], (Action::Block, Detector::GenericRepeat, 4));
        }

        /// A changed outcome starts the evidence over: no warning for the first repeat after it.
        #[test]
        fn a_changed_outcome_starts_over() {
            let mut run = Run::new(settings());
            for out in ["1", "2", "2"] {
                let v = run.round(TEST.0, TEST.1, &format!(r#""{out}""#));
                assert_eq!(seen(&v), ALLOW, "{out}");
            }
            assert_eq!(run.call(TEST.0, TEST.1).action, Action::Warn);
        }

        /// Calls still without an outcome are no evidence; a run that reports none is warned at W.
        #[test]
        fn without_outcomes_the_reference_warning_at_w() {
            let mut run = Run::new(settings());
            let verdicts: Vec<_> = (0..6).map(|_| seen(&run.call(TEST.0, TEST.1))).collect();
            assert_eq!(verdicts[..4], [ALLOW; 4]);
            assert_eq!(verdicts[4..], [(Action::Warn, Detector::GenericRepeat, 4), (Action::Warn, Detector::GenericRepeat, 5)]);
            // Two identical outcomes then arrive: the evidence decides from now on.
            run.result(TEST.0, TEST.1, r#""same""#);
            run.result(TEST.0, TEST.1, r#""same""#);
            assert_eq!(seen(&run.call(TEST.0, TEST.1)), (Action::Warn, Detector::GenericRepeat, 2));
        }

        /// The evidence is counted since another call last brought something new (as with
        /// progressResetsRepeats, which need not be on): re-reading notes between new searches
        /// is using them.
        #[test]
        fn a_reread_between_new_results_is_not_a_repeat() {
            let mut run = Run::new(settings());
            for i in 0..8 {
                assert_eq!(seen(&run.round("read", r#"{"path": "notes.md"}"#, r#""notes""#)), ALLOW, "read {i}");
                run.round("search", &format!(r#"{{"q": "{i}"}}"#), &format!(r#""hit {i}""#));
            }
        }

        /// Off, the reference's warning counts every repeat whatever its outcome.
        #[test]
        fn off_the_warning_counts_repeats() {
            let mut run = Run::new(Settings { same_outcome_block_at: 0, same_outcome_inconclusive_block_at: 0, ..settings() });
            let verdicts: Vec<_> = (0..6).map(|i| seen(&run.round(TEST.0, TEST.1, &format!(r#""{i}""#)))).collect();
            assert_eq!(verdicts[4], (Action::Warn, Detector::GenericRepeat, 4));
        }
    }
}
