//! run_wide_no_progress (opt-in): all of the run-wide breaker, tracking and detection, as in
//! `run_wide.py`. The global breaker counts one tool + args, so an agent that rotates tools or
//! arguments never trips it; this one remembers every (tool, args, result) triple of the run and
//! counts how many completed calls in a row brought none new. At K the next call is blocked.

use super::context::{detection, Context, Detection};
use crate::tables::messages;
use crate::engine::{Detector, Level, RunState, Settings, MAX_SEEN_TRIPLES};
use crate::fingerprint::PENDING;

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let threshold = s.run_wide_breaker_threshold;
    let streak = ctx.no_new_streak;
    if threshold == 0 || streak < threshold {
        return None;
    }
    let mut completed: Vec<usize> =
        (0..ctx.history.len()).rev().filter(|&i| ctx.history[i].status != PENDING).take(streak as usize).collect();
    completed.reverse();
    Some(detection(
        Detector::RunWideNoProgress,
        Level::Critical,
        streak,
        messages::run_wide_critical(streak),
        format!("run-wide:{threshold}"),
        completed,
    ))
}

/// After each completed outcome: a triple seen before lengthens the streak, a new one ends it.
/// Returns whether the triple was new.
pub(crate) fn track_outcome(state: &mut RunState, tool: &str, args: &[u8; 32], status: u8, result: &[u8; 32]) -> bool {
    // run_wide.py's key, byte for byte (the first 8 bytes of a sha256, read big-endian): the set
    // is persisted, so a run restored into the other engine must recognise its triples.
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(tool.as_bytes());
    hasher.update(args);
    hasher.update([status]);
    hasher.update(result);
    let full = hasher.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&full[..8]);
    let key = u64::from_be_bytes(out);
    let seen = state.rare_mut().seen_triples.get_or_insert_with(Default::default);
    if seen.contains(&key) {
        state.no_new_streak += 1;
        return false;
    }
    if seen.len() < MAX_SEEN_TRIPLES {
        seen.insert(key);
    }
    state.no_new_streak = 0;
    true
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Settings};

    const TOOLS: [&str; 3] = ["list", "read", "grep"];

    fn settings(threshold: u32) -> Settings {
        Settings { run_wide_breaker_threshold: threshold, ..small() }
    }

    /// Three tools in turn, each with its own fixed arguments and result: no per-call count
    /// reaches W and no two patterns alternate, so only the run-wide breaker can see the loop.
    fn rotate(run: &mut Run, rounds: usize) -> Vec<(crate::engine::Action, Detector, u32)> {
        (0..rounds * 3).map(|i| seen(&run.round(TOOLS[i % 3], r#"{"a": 1}"#, r#""out""#))).collect()
    }

    #[test]
    fn allows_below_k_and_blocks_at_k() {
        let mut run = Run::new(settings(3));
        assert!(rotate(&mut run, 2).iter().all(|v| *v == ALLOW));
        assert_eq!(run.state.no_new_streak, 3);
        let v = run.call("list", r#"{"a": 1}"#);
        assert_eq!(seen(&v), (Action::Block, Detector::RunWideNoProgress, 3));
        assert_eq!(v.warning_key, "run-wide:3");
        // The last three completed calls: the second round.
        assert_eq!(v.evidence_seqs, [7, 9, 11]);
    }

    #[test]
    fn a_new_outcome_ends_the_streak() {
        let mut run = Run::new(settings(3));
        rotate(&mut run, 1);
        run.round("list", r#"{"a": 1}"#, r#""out""#);
        run.round("read", r#"{"a": 1}"#, r#""out""#);
        run.round("grep", r#"{"a": 1}"#, r#""something new""#);
        assert_eq!(run.state.no_new_streak, 0);
        assert_eq!(seen(&run.call("list", r#"{"a": 1}"#)), ALLOW);
    }

    #[test]
    fn off_unless_a_threshold_is_set() {
        let mut run = Run::new(settings(0));
        assert!(rotate(&mut run, 2).iter().all(|v| *v == ALLOW));
        assert_eq!(seen(&run.call("list", r#"{"a": 1}"#)), ALLOW);
        assert!(run.state.rare().seen_triples.is_none(), "nothing tracked while off");
    }
}
