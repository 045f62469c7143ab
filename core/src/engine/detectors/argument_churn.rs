//! argument_churn (opt-in): the same tool called with ever-new arguments that keep producing
//! the identical outcome, the evasion every per-(tool, args) count misses (a fresh nonce per
//! call). Its streak stops at another result or a repeated argument digest (a plain repeat is
//! generic_repeat's). Warns at `argument_churn_warn_at`, blocks at `argument_churn_block_at`.
//! With parallelBatches the streak counts batches, not calls: a fan-out of distinct calls in
//! one batch is one step (a model searching twenty ways at once is not churning), its identical
//! calls count once, and the call's own batch is this step. With progressResetsRepeats (or
//! sameOutcome) another tool's new result ends the streak.

use super::context::{detection, Context, Detection};
use crate::tables::messages;
use crate::engine::{result_hash_text, Detector, Level, Settings};
use crate::engine::batches::{INCONCLUSIVE, NEW_TRIPLE};
use crate::fingerprint::PENDING;

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let (warn_at, block_at) = (s.argument_churn_warn_at, s.argument_churn_block_at);
    if warn_at == 0 && block_at == 0 {
        return None;
    }
    let h = ctx.history;
    // progressResetsRepeats (or sameOutcome): another tool's new result between two calls (the
    // test run between two edits) is progress, so the streak does not reach past it. The churning calls' own
    // triples are all new, so only another tool's count.
    let floor = if s.progress_floor_on() {
        (0..h.len()).rev().find(|&i| h[i].flags & NEW_TRIPLE != 0 && !h[i].is_tool(ctx.t)).map_or(0, |i| i + 1)
    } else {
        0
    };
    let mut shared: Option<(u8, [u8; 32])> = None;
    let mut seen: Vec<([u8; 32], u32)> = Vec::new();
    let mut indexes: Vec<usize> = Vec::new();
    let mut steps = 0u32;
    let mut step: Option<u32> = None;
    for i in (floor..h.len()).rev() {
        let r = &h[i];
        if !r.is_tool(ctx.t) || r.status == PENDING {
            continue;
        }
        let batch = ctx.batches.as_ref().map_or(i as u32, |b| b[i]);
        if ctx.batches.is_some() && batch == ctx.this_batch {
            continue;
        }
        let key = (r.status, r.result);
        match shared {
            None => shared = Some(key),
            Some(k) if k != key => break,
            _ => {}
        }
        if let Some(&(_, at)) = seen.iter().find(|(args, _)| *args == r.args) {
            if at == batch && ctx.batches.is_some() {
                continue; // an identical call of the same batch: counted once
            }
            break;
        }
        seen.push((r.args, batch));
        indexes.push(i);
        if step != Some(batch) {
            step = Some(batch);
            steps += 1;
        }
    }
    let (status, digest) = shared?;
    indexes.reverse();
    let streak = steps;
    let tool = ctx.tool;
    let key = format!("churn:{tool}:{}", result_hash_text(status, &digest).unwrap_or_default());
    if block_at > 0 && streak >= block_at {
        return Some(detection(
            Detector::ArgumentChurn,
            Level::Critical,
            streak,
            messages::argument_churn_critical(ctx.spelled, streak),
            key,
            indexes,
        ));
    }
    // sameOutcome: distinct calls that each succeed silently (writes of different files) may each
    // have done their part, and a transient error may clear; only the block, far later, judges
    // such a streak.
    let inconclusive = s.same_outcome_block_at > 0 && indexes.last().is_some_and(|&i| h[i].flags & INCONCLUSIVE != 0);
    if warn_at > 0 && streak >= warn_at && !inconclusive {
        return Some(detection(
            Detector::ArgumentChurn,
            Level::Warning,
            streak,
            messages::argument_churn_warning(ctx.spelled, streak),
            key,
            indexes,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Settings};

    const NOTHING: &str = r#""no results""#;

    fn settings() -> Settings {
        Settings { argument_churn_warn_at: 3, argument_churn_block_at: 5, ..small() }
    }

    fn query(i: u32) -> String {
        format!(r#"{{"q": "attempt {i}"}}"#)
    }

    #[test]
    fn allows_below_warns_at_warn_at_and_blocks_at_block_at() {
        let mut run = Run::new(settings());
        for i in 0..3 {
            assert_eq!(seen(&run.round("search", &query(i), NOTHING)), ALLOW, "after {i} calls");
        }
        let v = run.round("search", &query(3), NOTHING);
        assert_eq!(seen(&v), (Action::Warn, Detector::ArgumentChurn, 3));
        assert!(v.warning_key.starts_with("churn:search:"), "{}", v.warning_key);
        assert_eq!(seen(&run.round("search", &query(4), NOTHING)), (Action::Warn, Detector::ArgumentChurn, 4));
        let v = run.call("search", &query(5));
        assert_eq!(seen(&v), (Action::Block, Detector::ArgumentChurn, 5));
        assert_eq!(v.evidence_seqs, [1, 3, 5, 7, 9]);
    }

    #[test]
    fn a_repeated_argument_ends_the_streak() {
        let mut run = Run::new(settings());
        for i in 0..3 {
            run.round("search", &query(i), NOTHING);
        }
        // attempt 0 again: it still sees three distinct calls before it.
        assert_eq!(seen(&run.round("search", &query(0), NOTHING)), (Action::Warn, Detector::ArgumentChurn, 3));
        // Once it is history the streak stops at its first occurrence: 3 (attempts 0, 2, 1), not 4.
        assert_eq!(seen(&run.call("search", &query(9))), (Action::Warn, Detector::ArgumentChurn, 3));
    }

    #[test]
    fn a_different_outcome_ends_the_streak() {
        let mut run = Run::new(settings());
        for i in 0..3 {
            run.round("search", &query(i), NOTHING);
        }
        run.round("search", &query(3), r#""one hit""#);
        assert_eq!(seen(&run.call("search", &query(4))), ALLOW);
    }

    #[test]
    fn off_unless_configured() {
        let mut run = Run::new(small());
        for i in 0..6 {
            assert_eq!(seen(&run.round("search", &query(i), NOTHING)), ALLOW);
        }
    }
}
