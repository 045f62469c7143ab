//! known_poll_no_progress: a polling tool (command_status, process poll/log, configured extras)
//! returning the same state again and again. Polling is expected, so it has its own detector
//! and generic_repeat leaves known polls alone. Warns at W, blocks at C.

use super::context::{detection, Context, Detection};
use crate::tables::messages;
use crate::engine::{Detector, Level, Settings};

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    if !ctx.known_poll || !s.known_poll_no_progress {
        return None;
    }
    let streak = ctx.counts().streak;
    let tool = ctx.tool;
    if streak >= s.critical_threshold {
        return Some(detection(
            Detector::KnownPollNoProgress,
            Level::Critical,
            streak,
            messages::known_poll_critical(tool, streak),
            format!("poll:{}", ctx.result_key()),
            ctx.streak_evidence(streak),
        ));
    }
    if streak >= s.warning_threshold {
        return Some(detection(
            Detector::KnownPollNoProgress,
            Level::Warning,
            streak,
            messages::known_poll_warning(tool, streak),
            format!("poll:{}", ctx.result_key()),
            ctx.streak_evidence(streak),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Settings};

    const POLL: &str = r#"{"sessionId": "s1"}"#;

    #[test]
    fn allows_below_w_warns_at_w_blocks_at_c() {
        let mut run = Run::new(small()); // W = 3, C = 5
        for i in 0..3 {
            assert_eq!(seen(&run.round("command_status", POLL, r#""running""#)), ALLOW, "after {i} polls");
        }
        let v = run.round("command_status", POLL, r#""running""#);
        assert_eq!(seen(&v), (Action::Warn, Detector::KnownPollNoProgress, 3));
        assert!(v.announce);
        assert_eq!(seen(&run.round("command_status", POLL, r#""running""#)), (Action::Warn, Detector::KnownPollNoProgress, 4));
        let v = run.call("command_status", POLL);
        assert_eq!(seen(&v), (Action::Block, Detector::KnownPollNoProgress, 5));
        assert!(v.message.contains("polled 5 times"), "{}", v.message);
    }

    #[test]
    fn progress_starts_the_streak_over() {
        let mut run = Run::new(small());
        for _ in 0..4 {
            run.round("command_status", POLL, r#""running""#);
        }
        run.round("command_status", POLL, r#""done""#);
        assert_eq!(seen(&run.call("command_status", POLL)), ALLOW);
    }

    /// With the poll detector off, generic_repeat still leaves a poll alone: only the global
    /// breaker stops it (at G = 7).
    #[test]
    fn a_poll_is_not_generic_repeats_to_judge() {
        let mut run = Run::new(Settings { known_poll_no_progress: false, ..small() });
        for _ in 0..7 {
            assert_eq!(seen(&run.round("command_status", POLL, r#""running""#)), ALLOW);
        }
        assert_eq!(seen(&run.call("command_status", POLL)), (Action::Block, Detector::GlobalCircuitBreaker, 7));
    }
}
