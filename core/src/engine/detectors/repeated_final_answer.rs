//! repeated_final_answer (opt-in): the model ending turn after turn with the same final answer
//! and no tool work in any of those turns: whatever the person asks, it answers the same thing.
//! A final answer without `stop_hook_active` ends a turn; its normalised text is compared with
//! the previous turn's, and the count runs while they are equal and no turn did new tool work
//! (a new (tool, args, result) triple). Unlike the other streaks it survives user turns, which
//! are what it counts. warnAt warns, abortAt ends the run.

use super::context::{cited, Detection, NoTool, NoToolEvent};
use crate::engine::outputs::OutputKind;
use crate::engine::{hex, Detector, Level, Settings};
use crate::tables::messages;

pub(super) fn detect(ctx: &NoTool, s: &Settings) -> Option<Detection> {
    if !s.repeated_final_answer_on() {
        return None;
    }
    let NoToolEvent::Output { kind: OutputKind::FinalAnswer, stop_hook_active: false, .. } = ctx.event else { return None };
    let answers = &ctx.memory.answers;
    let (warn_at, abort_at) = (s.repeated_final_answer_warn_at, s.repeated_final_answer_abort_at);
    let (level, message) = if abort_at > 0 && answers.count >= abort_at {
        (Level::Critical, messages::repeated_final_answer_abort(answers.count))
    } else if warn_at > 0 && answers.count >= warn_at {
        (Level::Warning, messages::repeated_final_answer_warning(answers.count))
    } else {
        return None;
    };
    let seqs = &answers.seqs[answers.seqs.len().saturating_sub(answers.count as usize)..];
    let key = format!("final_answer:{}", hex(&answers.digest.to_be_bytes()));
    Some(cited(Detector::RepeatedFinalAnswer, level, answers.count, message, key, seqs))
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{no_tool, seen, Run, ALLOW};
    use crate::engine::{Action, Detector, Event, Settings};

    fn on() -> Settings {
        Settings { repeated_final_answer_warn_at: 3, repeated_final_answer_abort_at: 5, ..no_tool() }
    }

    #[test]
    fn the_same_answer_over_turns_with_no_tool_work_is_warned_then_ends_the_run() {
        let mut run = Run::new(on());
        let mut verdicts = Vec::new();
        for _ in 0..10 {
            run.send(&Event::UserTurn);
            verdicts.push(seen(&run.stop("I cannot help with that.", false)));
        }
        let warn = (Action::Warn, Detector::RepeatedFinalAnswer, 3);
        assert_eq!(&verdicts[..5], [ALLOW, ALLOW, warn, (Action::Warn, Detector::RepeatedFinalAnswer, 4),
                                    (Action::Abort, Detector::RepeatedFinalAnswer, 5)]);
        assert_eq!(run.state.rare().abort.as_ref().unwrap().error_code, "final_answer_loop");
    }

    #[test]
    fn tool_work_in_a_turn_or_another_answer_starts_it_again() {
        let mut run = Run::new(on());
        for i in 0..8 {
            run.send(&Event::UserTurn);
            if i % 2 == 0 {
                run.round("search", &format!(r#"{{"q": {i}}}"#), r#"[]"#);
            }
            assert_eq!(run.stop("Nothing found.", false).action, Action::Allow, "turn {i}");
        }
        for i in 0..8 {
            run.send(&Event::UserTurn);
            let text = if i % 2 == 0 { "yes" } else { "no" };
            assert_eq!(run.stop(text, false).action, Action::Allow);
        }
    }

    #[test]
    fn continuations_are_not_turns() {
        let mut run = Run::new(on());
        for _ in 0..6 {
            assert_eq!(run.stop("Done.", true).action, Action::Allow);
        }
    }
}
