//! stop_continuation (opt-in): a stop hook that keeps a turn going again and again with no tool
//! work (Cursor added `loop_limit` to its stop hook for this). A final answer sent with
//! `stop_hook_active` is one continuation; abortAt of them in a row, no new (tool, args, result)
//! triple in between, end the run, so the host ends the session (Claude Code: `continue: false`).
//! A final answer without the flag is a fresh stop: the count starts again. Claude Code itself
//! gives up after 8 continuations, so abortAt must stay below that to act there at all.

use super::context::{cited, Detection, NoTool, NoToolEvent};
use crate::engine::outputs::OutputKind;
use crate::engine::{Detector, Level, Settings};
use crate::tables::messages;

pub(super) fn detect(ctx: &NoTool, s: &Settings) -> Option<Detection> {
    let abort_at = s.stop_continuation_abort_at;
    let NoToolEvent::Output { kind: OutputKind::FinalAnswer, stop_hook_active: true, .. } = ctx.event else { return None };
    let kept = &ctx.memory.continuations;
    if abort_at == 0 || kept.count < abort_at {
        return None;
    }
    let seqs = &kept.seqs[kept.seqs.len().saturating_sub(kept.count as usize)..];
    let message = messages::stop_continuation_abort(kept.count);
    Some(cited(Detector::StopContinuation, Level::Critical, kept.count, message, "stop_continuation".into(), seqs))
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{no_tool, Run};
    use crate::engine::{Action, Detector, Settings};

    fn on() -> Settings {
        Settings { stop_continuation_abort_at: 3, ..no_tool() }
    }

    #[test]
    fn continuations_with_no_tool_work_end_the_run_at_abort_at() {
        let mut run = Run::new(on());
        assert_eq!(run.stop("Done.", false).action, Action::Allow, "the turn's own stop");
        assert_eq!(run.stop("Done, really.", true).action, Action::Allow);
        assert_eq!(run.stop("Still done.", true).action, Action::Allow);
        let v = run.stop("I said done.", true);
        assert_eq!((v.action, v.detector, v.count, v.error_code), (Action::Abort, Detector::StopContinuation, 3, "stop_hook_loop"));
        assert_eq!(v.evidence_seqs, [2, 3, 4]);
        assert!(v.message.contains("kept this turn going 3 times"), "{}", v.message);
    }

    #[test]
    fn new_tool_work_between_stops_or_a_fresh_stop_restarts_the_count() {
        let mut run = Run::new(on());
        for i in 0..10 {
            assert_eq!(run.stop("Done.", true).action, Action::Allow, "stop {i}");
            run.round("exec", &format!(r#"{{"command": "make test{i}"}}"#), r#""ok""#);
        }
        run.stop("Done.", true);
        run.stop("Done.", true);
        run.stop("Done.", false);
        assert_eq!(run.stop("Done.", true).action, Action::Allow, "a fresh stop in between");
    }

    #[test]
    fn a_prompt_hook_between_continuations_does_not_restart_the_count() {
        // Gemini CLI fires its prompt hook (a user turn) again for each retry its AfterAgent hook asks for.
        let mut run = Run::new(on());
        run.stop("Done.", false);
        run.send(&crate::engine::Event::UserTurn);
        run.stop("Done.", true);
        run.send(&crate::engine::Event::UserTurn);
        run.stop("Done.", true);
        run.send(&crate::engine::Event::UserTurn);
        assert_eq!(run.stop("Done.", true).action, Action::Abort);
    }

    #[test]
    fn other_outputs_with_the_flag_are_no_continuations() {
        let mut run = Run::new(on());
        for _ in 0..5 {
            assert_eq!(run.said_active("message", "working on it").action, Action::Allow);
        }
    }
}
