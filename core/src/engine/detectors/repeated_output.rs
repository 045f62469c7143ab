//! repeated_output (opt-in): the model writing the same message, thought or final answer again
//! and again with no new tool result in between (OpenHands stops at three identical agent
//! messages, OpenRouter's SDK counts repeated text), or one output made of one short piece of
//! text repeated over and over (gemini-cli's 50-character chunks). Each output kind is its own
//! stream; a new (tool, args, result) triple or a user turn ends every streak.
//!
//! The count is the identical outputs in a row, this one included: warnAt warns, abortAt ends
//! the run. An output that is one `chunkChars` piece repeated `chunkRepeats` times is warned by
//! itself, and the next such output of its kind (nothing new in between) ends the run.

use super::context::{cited, Detection, NoTool, NoToolEvent};
use crate::engine::{hex, Detector, Level, Settings};
use crate::tables::messages;

pub(super) fn detect(ctx: &NoTool, s: &Settings) -> Option<Detection> {
    if !s.repeated_output_on() {
        return None;
    }
    let NoToolEvent::Output { kind, copies, .. } = ctx.event else { return None };
    let streak = ctx.memory.streak(kind);
    let (warn_at, abort_at) = (s.repeated_output_warn_at, s.repeated_output_abort_at);
    let what = kind.phrase();
    let seqs = &streak.seqs[streak.seqs.len().saturating_sub(streak.count as usize)..];
    let by_count = if abort_at > 0 && streak.count >= abort_at {
        Some(Level::Critical)
    } else if warn_at > 0 && streak.count >= warn_at {
        Some(Level::Warning)
    } else {
        None
    };
    let chunky = streak.chunky > 0 && s.repeated_output_chunk_repeats > 0 && copies >= s.repeated_output_chunk_repeats;
    let by_chunk = chunky.then_some(if streak.chunky >= 2 && abort_at > 0 { Level::Critical } else { Level::Warning });
    if by_chunk > by_count {
        let level = by_chunk?;
        let chunked = &streak.seqs[streak.seqs.len().saturating_sub(streak.chunky as usize)..];
        let message = match level {
            Level::Critical => messages::repeated_output_chunk_abort(what, copies),
            _ => messages::repeated_output_chunk_warning(what, copies),
        };
        return Some(cited(Detector::RepeatedOutput, level, copies, message, format!("repeated_output:{}:chunk", kind.name()), chunked));
    }
    let level = by_count?;
    let message = match level {
        Level::Critical => messages::repeated_output_abort(what, streak.count),
        _ => messages::repeated_output_warning(what, streak.count),
    };
    let key = format!("repeated_output:{}:{}", kind.name(), hex(&streak.digest.to_be_bytes()));
    Some(cited(Detector::RepeatedOutput, level, streak.count, message, key, seqs))
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{no_tool, seen, Run, ALLOW};
    use crate::engine::{Action, Detector, Level, Settings};

    fn on() -> Settings {
        Settings { repeated_output_warn_at: 3, repeated_output_abort_at: 5, repeated_output_chunk_chars: 50,
                   repeated_output_chunk_repeats: 10, ..no_tool() }
    }

    #[test]
    fn the_same_message_is_warned_at_warn_at_and_ends_the_run_at_abort_at() {
        let mut run = Run::new(on());
        assert_eq!(seen(&run.said("message", "I will look into it.")), ALLOW);
        assert_eq!(seen(&run.said("message", "  I will LOOK into it. ")), ALLOW, "normalised: the same text");
        let warned = run.said("message", "I will look into it.");
        assert_eq!(seen(&warned), (Action::Warn, Detector::RepeatedOutput, 3));
        assert!(warned.announce && warned.message.starts_with("WARNING: you have written the same message 3 times"), "{}", warned.message);
        assert_eq!(warned.evidence_seqs, [1, 2, 3]);
        assert!(!run.said("message", "I will look into it.").announce, "the same decade is announced once");
        let ended = run.said("message", "I will look into it.");
        assert_eq!((ended.action, ended.level, ended.count, ended.error_code), (Action::Abort, Level::Critical, 5, "output_loop_persisted"));
        assert_eq!(run.said("message", "something else").action, Action::Abort, "the run is over");
    }

    #[test]
    fn each_kind_is_its_own_stream_and_a_different_text_starts_a_new_streak() {
        let mut run = Run::new(on());
        for _ in 0..2 {
            run.said("message", "same");
            run.said("thought", "same");
        }
        assert_eq!(run.said("final_answer", "same").action, Action::Allow);
        assert_eq!(run.said("message", "other").action, Action::Allow);
        assert_eq!(run.said("thought", "same").detector, Detector::RepeatedOutput, "the thought's third");
        assert_eq!(run.said("message", "same").action, Action::Allow, "other text in between");
    }

    #[test]
    fn new_tool_work_or_a_user_turn_ends_the_streak_but_a_repeated_outcome_does_not() {
        let mut run = Run::new(on());
        run.said("message", "retrying");
        run.said("message", "retrying");
        run.round("read", r#"{"p": 1}"#, r#""v1""#);
        assert_eq!(run.said("message", "retrying").action, Action::Allow, "a new triple in between");
        run.said("message", "retrying");
        run.round("read", r#"{"p": 1}"#, r#""v1""#); // seen before: no progress
        assert_eq!(run.said("message", "retrying").action, Action::Warn);
        run.send(&crate::engine::Event::UserTurn);
        assert_eq!(run.said("message", "retrying").action, Action::Allow, "a user turn ends it");
    }

    #[test]
    fn one_piece_repeated_is_warned_then_ends_the_run() {
        let mut run = Run::new(on());
        let piece = "the same fifty characters of text, again and again";
        let looping = piece.repeat(10);
        let v = run.said("thought", &looping);
        assert_eq!(seen(&v), (Action::Warn, Detector::RepeatedOutput, 10));
        assert!(v.message.contains("this thought repeats one piece of text 10 times over"), "{}", v.message);
        assert_eq!(run.said("thought", "a thought of its own").action, Action::Allow);
        assert_eq!(run.said("thought", &format!("{} {}", "different words", piece.repeat(11))).action, Action::Warn,
                   "not in a row: warned again");
        let v = run.said("thought", &piece.repeat(12));
        assert_eq!((v.action, v.count, v.error_code), (Action::Abort, 12, "output_loop_persisted"));
        assert!(v.message.contains("again repeats one piece of text 12 times over after a warning"), "{}", v.message);
    }

    #[test]
    fn nine_copies_or_a_digest_alone_are_no_chunk_loop() {
        let mut run = Run::new(on());
        let piece = "the same fifty characters of text, again and again";
        assert_eq!(run.said("message", &piece.repeat(9)).action, Action::Allow);
        assert_eq!(run.said_digest("message", "d1").action, Action::Allow);
    }

    #[test]
    fn abort_at_off_only_warns_and_off_says_nothing() {
        let mut run = Run::new(Settings { repeated_output_abort_at: 0, ..on() });
        for _ in 0..6 {
            run.said("message", "same");
        }
        assert_eq!(run.said("message", "same").action, Action::Warn);
        let mut off = Run::new(Settings { enabled: Some(true), ..Default::default() });
        for _ in 0..8 {
            assert_eq!(off.said("message", "same").action, Action::Allow);
        }
        assert!(off.state.rare().outputs.is_none(), "no memory kept when no detector of them is on");
    }

    #[test]
    fn shadow_mode_reports_the_abort_and_lets_the_run_go_on() {
        let mut run = Run::new(Settings { shadow: true, ..on() });
        let mut last = None;
        for _ in 0..5 {
            last = Some(run.said("message", "same"));
        }
        let v = last.unwrap();
        assert_eq!((v.action, v.shadow_action), (Action::Allow, Some(Action::Abort)));
        assert!(run.state.rare().abort.is_none());
    }
}
