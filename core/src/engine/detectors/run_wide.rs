//! run_wide_no_progress (opt-in): all of the run-wide breaker, tracking and detection, as in
//! `run_wide.py`. The global breaker counts one tool + args, so an agent that rotates tools or
//! arguments never trips it; this one remembers every (tool, args, result) triple of the run and
//! counts how many completed calls in a row brought none new. At K the next call is blocked.

use super::context::{detection, Context, Detection};
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
        format!("CRITICAL: run-wide breaker: the last {streak} completed tool calls of this run, across all tools and arguments, made no progress (they only repeated calls and results already seen), so this call was not run. Stop cycling through the same actions; change approach or report the task as failed."),
        format!("run-wide:{threshold}"),
        completed,
    ))
}

/// After each completed outcome: a triple seen before lengthens the streak, a new one ends it.
pub(crate) fn track_outcome(state: &mut RunState, tool: &str, args: &[u8; 32], status: u8, result: &[u8; 32]) {
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
    let seen = state.seen_triples.get_or_insert_with(Default::default);
    if seen.contains(&key) {
        state.no_new_streak += 1;
        return;
    }
    state.no_new_streak = 0;
    if seen.len() < MAX_SEEN_TRIPLES {
        seen.insert(key);
    }
}
