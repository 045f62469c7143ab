//! The engine's handling of the events loops without tool calls are judged on: a model output
//! and a compaction retry. Each updates the run's output memory (output_memory.rs), asks the
//! detectors of them (detectors::NO_TOOL), and turns a detection into the verdict: a WARN
//! (announced once per decade of its count, as a call's warning is) or an ABORT that ends the
//! run (shadow mode: reported, not enforced). There is no call to block: these events are the
//! model talking, so the answer to a loop is to warn it or end the run.

use crate::tables::error_codes;

use super::compaction_guard::arm;
use super::detectors::{detect_no_tool, Detection, NoTool, NoToolEvent};
use super::output_memory::{observe_compaction, observe_output};
use super::outputs::{chunk_copies, digest, normalise, Output};
use super::{Action, Detector, Level, RunState, Settings, Verdict};

/// A compaction retry: the post-compaction guard armed, as ever; compaction_storm may end the run.
pub(crate) fn on_compaction(state: &mut RunState, s: &Settings, seq: u64) -> Verdict {
    let armed = arm(state, s);
    if !s.no_tool_on() {
        return armed;
    }
    observe_compaction(state, seq);
    judge(state, s, NoToolEvent::Compaction).unwrap_or(armed)
}

/// A model output, judged by repeated_output, stop_continuation and repeated_final_answer.
pub(crate) fn on_model_output(state: &mut RunState, s: &Settings, output: &Output) -> Verdict {
    if !s.no_tool_on() {
        return Verdict::allow("");
    }
    let normalised = if output.text.is_empty() { String::new() } else { normalise(output.text) };
    let (chunk, repeats) = (s.repeated_output_chunk_chars as usize, s.repeated_output_chunk_repeats as usize);
    // Fewer characters than `repeats` pieces cannot hold them (each copy starts a piece or more on).
    let copies = if s.repeated_output_on() && repeats > 0 && normalised.len() >= chunk.saturating_mul(repeats) {
        chunk_copies(&normalised, chunk)
    } else {
        0
    };
    let chunky = copies > 0 && copies >= s.repeated_output_chunk_repeats;
    observe_output(state, output, digest(output, &normalised), chunky);
    let event = NoToolEvent::Output { kind: output.kind, stop_hook_active: output.stop_hook_active, copies };
    judge(state, s, event).unwrap_or_else(|| Verdict::allow(""))
}

fn judge(state: &mut RunState, s: &Settings, event: NoToolEvent) -> Option<Verdict> {
    let memory = state.rare().outputs.as_deref()?;
    let det = detect_no_tool(&NoTool { memory, event }, s)?;
    Some(verdict(state, s, det))
}

/// The ABORT code of each detector of loops without tool calls.
fn abort_code(detector: Detector) -> &'static str {
    match detector {
        Detector::CompactionStorm => error_codes::COMPACTION_STORM,
        Detector::StopContinuation => error_codes::STOP_HOOK_LOOP,
        Detector::RepeatedFinalAnswer => error_codes::FINAL_ANSWER_LOOP,
        _ => error_codes::OUTPUT_LOOP_PERSISTED,
    }
}

fn verdict(state: &mut RunState, s: &Settings, det: Detection) -> Verdict {
    let (seqs, ids) = det.cited.unwrap_or_default();
    let mut v = Verdict::allow("");
    v.detector = det.detector;
    v.level = det.level;
    v.count = det.count;
    v.message = det.message;
    v.warning_key = det.warning_key;
    v.evidence_seqs = seqs;
    v.evidence_call_ids = ids;
    if det.level != Level::Critical {
        v.action = Action::Warn;
        v.announce = state.announce(&v.warning_key, v.count);
        return v;
    }
    v.action = Action::Abort;
    v.error_code = abort_code(det.detector);
    v.announce = true;
    if s.shadow {
        return v.shadowed();
    }
    state.rare_mut().abort = Some(Box::new(v.clone()));
    v
}
