//! The post-compaction guard (`compaction_guard.py`): after a compaction retry, the next few
//! outcomes are watched, and if every one is the same (tool, args, result) the compaction did
//! not break the loop and the run is aborted. Apart from the rolling detectors because it is
//! armed by an event, judges outcomes rather than calls, and ends the run instead of a call.

use super::{args_hash_text, result_hash_text, Action, Detector, Guard, Level, RunState, Settings, Verdict};

pub(crate) fn arm(state: &mut RunState, s: &Settings) -> Verdict {
    let mut v = Verdict::allow("");
    if !s.recording_on() {
        v.message = "post-compaction guard is off (tools.loopDetection.enabled is false)".into();
        return v;
    }
    let window = s.compaction_window_size;
    state.guard = Some(Box::new(Guard { window_size: window, observed: 0, first: None, all_identical: true, seqs: Vec::new() }));
    v.message = format!("post-compaction guard armed for {window} attempts");
    v.guard_armed = true;
    v
}

pub(crate) fn observe_outcome(state: &mut RunState, tool: &str, args: [u8; 32], status: u8, result: [u8; 32], seq: u64) -> Option<Verdict> {
    let guard = state.guard.as_mut()?;
    let triple = (Box::<str>::from(tool), args, status, result);
    match &guard.first {
        None => guard.first = Some(triple),
        Some(first) if *first != triple => guard.all_identical = false,
        _ => {}
    }
    guard.observed += 1;
    guard.seqs.push(seq);
    if guard.observed < guard.window_size {
        return None;
    }
    let guard = state.guard.take()?;
    if !guard.all_identical {
        return None;
    }
    let observed = guard.observed;
    let mut v = Verdict::allow(tool);
    v.action = Action::Abort;
    v.detector = Detector::PostCompactionGuard;
    v.level = Level::Critical;
    v.count = observed;
    v.message = format!("CRITICAL: compaction did not break the loop: after compaction, {tool} was called {observed} times with the same arguments and returned the same result each time, so the run was aborted (compaction_loop_persisted). Report the task as failed.");
    v.warning_key = format!(
        "compaction:{tool}:{}:{}",
        args_hash_text(tool, &args),
        result_hash_text(status, &result).unwrap_or_default()
    );
    v.announce = true;
    v.error_code = "compaction_loop_persisted";
    v.evidence_seqs = guard.seqs;
    Some(v)
}
