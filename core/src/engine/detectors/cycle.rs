//! cycle (opt-in): a cycle of P = 3..=6 calls repeating (a, b, c, a, b, c, ...) while every
//! member keeps returning the same outcome. Period 1 is generic_repeat's, period 2 ping_pong's;
//! an agent that rotates through three to six calls escapes both.
//!
//! The call being decided continues a cycle when it is the call P places back and the history
//! ends in a run where every record repeats the one P before it. A full cycle is P records of
//! that run in history; the call is warned once `cycle_warn_after` full cycles are there and
//! blocked once `cycle_block_after` are (defaults 2 and 3: the warning at call 2P + 1, the block
//! at call 3P + 1, both before the 4P-th). Only a primitive period counts (a b a b is period 2,
//! not 4), the smallest P that fits wins, and the evidence must be complete and stable: every
//! record of the run completed, and each member's records all with one outcome. A cycle whose
//! outcomes change, or that has a call without an outcome, is progress for all it says, and is
//! never judged.

use super::context::{detection, Context, Detection};
use crate::engine::{args_hash_text, same, Detector, Level, Record, Settings};
use crate::fingerprint::PENDING;
use crate::tables::messages;

const PERIODS: std::ops::RangeInclusive<usize> = 3..=6;

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let (warn_after, block_after) = (s.cycle_warn_after, s.cycle_block_after);
    if warn_after == 0 && block_after == 0 {
        return None;
    }
    let h = ctx.history;
    let size = h.len();
    // The call being decided is position `size` of the sequence history + [call].
    let same_call = |i: usize, j: usize| -> bool {
        match (i == size, j == size) {
            (true, _) => h[j].is_tool(ctx.t) && same(&h[j].args, &ctx.args),
            (_, true) => h[i].is_tool(ctx.t) && same(&h[i].args, &ctx.args),
            _ => h[i].same_tool(&h[j]) && same(&h[i].args, &h[j].args),
        }
    };
    for period in PERIODS {
        if size < 2 * period || !same_call(size, size - period) {
            continue;
        }
        if !primitive(period, |i, j| same_call(size - period + i, size - period + j)) {
            continue;
        }
        // Records of history in the cycle: the newest P, and every older one that repeats the
        // record P after it.
        let mut start = size - period;
        while start > 0 && same_call(start - 1, start - 1 + period) {
            start -= 1;
        }
        let cycles = ((size - start) / period) as u32;
        if cycles < 2 || (warn_after == 0 || cycles < warn_after) && (block_after == 0 || cycles < block_after) {
            continue;
        }
        if !stable(&h.range(start..).collect::<Vec<_>>(), period) {
            return None;
        }
        let count = (size - start + 1) as u32;
        let mut members: Vec<String> = (size - period..size).map(|i| args_hash_text(h[i].tool(), &h[i].args)).collect();
        members.sort();
        let key = format!("cycle:{period}:{}", members.join("|"));
        let evidence: Vec<usize> = (start..size).collect();
        if block_after > 0 && cycles >= block_after {
            let message = messages::cycle_critical(ctx.spelled, period, cycles, count);
            return Some(detection(Detector::Cycle, Level::Critical, count, message, key, evidence));
        }
        let message = messages::cycle_warning(ctx.spelled, period, cycles, count);
        return Some(detection(Detector::Cycle, Level::Warning, count, message, key, evidence));
    }
    None
}

/// Does a block of `period` calls not repeat a shorter period (a b a b is period 2)?
fn primitive(period: usize, same_call: impl Fn(usize, usize) -> bool) -> bool {
    (1..period).filter(|d| period.is_multiple_of(*d)).all(|d| (d..period).any(|i| !same_call(i, i - d)))
}

/// Every record completed, and the records of each member (same position mod `period`) share
/// one outcome.
fn stable(records: &[&Record], period: usize) -> bool {
    records.iter().all(|r| r.status != PENDING)
        && records.iter().enumerate().skip(period).all(|(i, r)| {
            let first = records[i % period];
            r.status == first.status && same(&r.result, &first.result)
        })
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Settings, Verdict};

    const MEMBERS: [(&str, &str); 6] = [
        ("list", r#"{"dir": "src"}"#),
        ("read", r#"{"path": "src/a.rs"}"#),
        ("grep", r#"{"pattern": "todo"}"#),
        ("read", r#"{"path": "src/b.rs"}"#),
        ("exec", r#"{"command": "make"}"#),
        ("edit", r#"{"path": "src/a.rs"}"#),
    ];

    /// Only the cycle detector on, the table's thresholds out of the way (W 10, C 20).
    fn settings() -> Settings {
        Settings { warning_threshold: 10, critical_threshold: 20, global_circuit_breaker_threshold: 30,
                   cycle_warn_after: 2, cycle_block_after: 3, history_size: 30, ..small() }
    }

    /// Rounds through the first `period` members, each answering its own fixed result (or the
    /// round's number when `changing`), until a call is blocked: every call's verdict.
    fn cycle(run: &mut Run, period: usize, calls: usize, changing: bool) -> Vec<Verdict> {
        (0..calls)
            .map(|i| {
                let (tool, params) = MEMBERS[i % period];
                let result = if changing { format!(r#""{tool} round {}""#, i / period) } else { format!(r#""{tool} says the same""#) };
                run.round(tool, params, &result)
            })
            .collect()
    }

    #[test]
    fn periods_three_to_six_warn_and_block_before_the_four_p_th_call() {
        for period in 3..=6 {
            let mut run = Run::new(settings());
            let verdicts = cycle(&mut run, period, 4 * period, false);
            let first = |action| verdicts.iter().position(|v| v.action == action).map(|i| i + 1);
            // Warned at call 2P + 1 (two full cycles behind it), blocked at 3P + 1.
            assert_eq!(first(Action::Warn), Some(2 * period + 1), "period {period}");
            assert_eq!(first(Action::Block), Some(3 * period + 1), "period {period}");
            assert!(verdicts[..2 * period].iter().all(|v| seen(v) == ALLOW), "period {period}");
            let warn = &verdicts[2 * period];
            assert_eq!(seen(warn), (Action::Warn, Detector::Cycle, 2 * period as u32 + 1));
            let block = &verdicts[3 * period];
            assert_eq!(seen(block), (Action::Block, Detector::Cycle, 3 * period as u32 + 1));
            assert!(block.message.contains(&format!("cycle of {period} calls")), "{}", block.message);
            assert_eq!(block.evidence_seqs.len(), 3 * period, "the three cycles in history");
            assert!(block.warning_key.starts_with(&format!("cycle:{period}:")), "{}", block.warning_key);
        }
    }

    /// The key names the cycle, not where in it a call is: every member's warning shares it.
    #[test]
    fn every_member_of_a_cycle_shares_one_key() {
        let mut run = Run::new(Settings { cycle_block_after: 0, ..settings() });
        let verdicts = cycle(&mut run, 3, 12, false);
        let keys: std::collections::HashSet<_> = verdicts[6..].iter().map(|v| v.warning_key.clone()).collect();
        assert_eq!(keys.len(), 1, "{keys:?}");
        assert!(verdicts[6..].iter().all(|v| v.action == Action::Warn), "blockAfter off: warn only");
    }

    #[test]
    fn changing_outcomes_are_progress_and_never_judged() {
        for period in 3..=6 {
            let mut run = Run::new(settings());
            let verdicts = cycle(&mut run, period, 5 * period, true);
            assert!(verdicts.iter().all(|v| seen(v) == ALLOW), "period {period}");
        }
    }

    #[test]
    fn one_member_changing_is_enough_to_be_progress() {
        let mut run = Run::new(settings());
        let verdicts: Vec<_> = (0..12)
            .map(|i| {
                let (tool, params) = MEMBERS[i % 3];
                let result = if i % 3 == 2 { format!(r#""{i}""#) } else { r#""same""#.to_string() };
                run.round(tool, params, &result)
            })
            .collect();
        assert!(verdicts.iter().all(|v| seen(v) == ALLOW));
    }

    #[test]
    fn calls_without_outcomes_are_not_evidence() {
        let mut run = Run::new(settings());
        let verdicts: Vec<_> = (0..12).map(|i| run.call(MEMBERS[i % 3].0, MEMBERS[i % 3].1)).collect();
        assert!(verdicts.iter().all(|v| seen(v) == ALLOW));
    }

    /// a b a b c: a period made of a shorter one is not a cycle of its own; ping_pong's, or nobody's.
    #[test]
    fn periods_one_and_two_are_left_to_their_detectors() {
        let mut run = Run::new(Settings { ping_pong: false, generic_repeat: false, ..settings() });
        let verdicts: Vec<_> = (0..16).map(|i| run.round(MEMBERS[i % 2].0, MEMBERS[i % 2].1, r#""same""#)).collect();
        assert!(verdicts.iter().all(|v| v.detector != Detector::Cycle));
        let mut run = Run::new(Settings { generic_repeat: false, ..settings() });
        let verdicts: Vec<_> = (0..16).map(|_| run.round(MEMBERS[0].0, MEMBERS[0].1, r#""same""#)).collect();
        assert!(verdicts.iter().all(|v| v.detector != Detector::Cycle));
    }

    /// a b a c (period 4, a member repeated inside it) is a cycle of its own.
    #[test]
    fn a_member_may_appear_twice_in_one_period() {
        let order = [0, 1, 0, 2];
        let mut run = Run::new(settings());
        let verdicts: Vec<_> = (0..16).map(|i| run.round(MEMBERS[order[i % 4]].0, MEMBERS[order[i % 4]].1, r#""same""#)).collect();
        assert_eq!(seen(&verdicts[12]), (Action::Block, Detector::Cycle, 13));
    }

    #[test]
    fn a_break_in_the_cycle_starts_it_over() {
        let mut run = Run::new(settings());
        cycle(&mut run, 3, 8, false);
        run.round("think", "{}", r#""hmm""#);
        let verdicts = cycle(&mut run, 3, 6, false);
        assert!(verdicts.iter().all(|v| seen(v) == ALLOW));
    }

    /// A ranked-after detector: it raises the table's verdict, never replaces it.
    #[test]
    fn it_only_raises_the_table() {
        let mut run = Run::new(Settings { warning_threshold: 3, ..settings() });
        let verdicts = cycle(&mut run, 3, 10, false);
        // Call 7: the cycle's warning; call 10: generic_repeat warns (3 repeats) but the cycle blocks.
        assert_eq!(seen(&verdicts[6]), (Action::Warn, Detector::Cycle, 7));
        assert_eq!(seen(&verdicts[9]), (Action::Block, Detector::Cycle, 10));
    }

    #[test]
    fn off_unless_configured() {
        let mut run = Run::new(Settings { cycle_warn_after: 0, cycle_block_after: 0, ..settings() });
        assert!(cycle(&mut run, 3, 15, false).iter().all(|v| seen(v) == ALLOW));
    }
}
