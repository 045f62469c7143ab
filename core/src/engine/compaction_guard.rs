//! The post-compaction guard (`compaction_guard.py`): after a compaction retry, the next few
//! outcomes are watched, and if every one is the same (tool, args, result) the compaction did
//! not break the loop and the run is aborted. Apart from the rolling detectors because it is
//! armed by an event, judges outcomes rather than calls, and ends the run instead of a call.

use super::{args_hash_text, result_hash_text, Action, Detector, Guard, Level, RunState, Settings, Verdict};
use crate::tables::messages;
use crate::tables::error_codes;

pub(crate) fn arm(state: &mut RunState, s: &Settings) -> Verdict {
    let mut v = Verdict::allow("");
    if !s.recording_on() {
        v.message = "post-compaction guard is off (tools.loopDetection.enabled is false)".into();
        return v;
    }
    let window = s.compaction_window_size;
    state.rare_mut().guard = Some(Box::new(Guard { window_size: window, observed: 0, first: None, all_identical: true, seqs: Vec::new() }));
    v.message = format!("post-compaction guard armed for {window} attempts");
    v.guard_armed = true;
    v
}

/// `tool` the normalised name (the triple, the key), `spelled` the host's (the message, the verdict).
pub(crate) fn observe_outcome(state: &mut RunState, tool: &str, spelled: &str, args: [u8; 32], status: u8, result: [u8; 32], seq: u64) -> Option<Verdict> {
    let guard = state.rare_if_any().and_then(|r| r.guard.as_mut())?;
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
    let guard = state.rare_if_any().and_then(|r| r.guard.take())?;
    if !guard.all_identical {
        return None;
    }
    let observed = guard.observed;
    let mut v = Verdict::allow(spelled);
    v.action = Action::Abort;
    v.detector = Detector::PostCompactionGuard;
    v.level = Level::Critical;
    v.count = observed;
    v.message = messages::compaction_guard_abort(spelled, observed);
    v.warning_key = format!(
        "compaction:{tool}:{}:{}",
        args_hash_text(tool, &args),
        result_hash_text(status, &result).unwrap_or_default()
    );
    v.announce = true;
    v.error_code = error_codes::COMPACTION_LOOP_PERSISTED;
    v.evidence_seqs = guard.seqs;
    Some(v)
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{small, Run};
    use crate::engine::{Action, Detector, Event, Level, Settings};

    const CALL: (&str, &str) = ("build", r#"{"target": "all"}"#);

    #[test]
    fn the_same_outcome_through_the_window_aborts_the_run() {
        let mut run = Run::new(small()); // window 3
        let armed = run.send(&Event::CompactionRetry { seq: 0 });
        assert_eq!((armed.action, armed.guard_armed), (Action::Allow, true));
        assert_eq!(armed.message, "post-compaction guard armed for 3 attempts");
        for _ in 0..2 {
            run.call(CALL.0, CALL.1);
            assert_eq!(run.result(CALL.0, CALL.1, r#""failed""#).action, Action::Allow);
        }
        run.call(CALL.0, CALL.1);
        let v = run.result(CALL.0, CALL.1, r#""failed""#);
        assert_eq!((v.action, v.detector, v.level, v.count), (Action::Abort, Detector::PostCompactionGuard, Level::Critical, 3));
        assert_eq!(v.error_code, "compaction_loop_persisted");
        assert_eq!(v.evidence_seqs, [2, 4, 6], "the outcomes the guard saw");
        assert!(run.state.rare().guard.is_none());

        // The run is over: whatever comes next gets the abort.
        let next = run.call("other", "{}");
        assert_eq!((next.action, next.error_code, next.tool_name.as_str()), (Action::Abort, "compaction_loop_persisted", "other"));
    }

    #[test]
    fn a_different_outcome_in_the_window_disarms_it() {
        let mut run = Run::new(small());
        run.send(&Event::CompactionRetry { seq: 0 });
        for result in [r#""failed""#, r#""failed""#, r#""built""#] {
            run.call(CALL.0, CALL.1);
            assert_eq!(run.result(CALL.0, CALL.1, result).action, Action::Allow);
        }
        assert!(run.state.rare().guard.is_none() && run.state.rare().abort.is_none());
    }

    #[test]
    fn off_when_loop_detection_is_disabled() {
        let mut run = Run::new(Settings { enabled: Some(false), ..small() });
        let v = run.send(&Event::CompactionRetry { seq: 0 });
        assert_eq!((v.action, v.guard_armed), (Action::Allow, false));
        assert!(v.message.contains("guard is off"), "{}", v.message);
        assert!(run.state.rare().guard.is_none());
    }
}
