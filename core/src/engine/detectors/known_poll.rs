//! known_poll_no_progress: a polling tool (command_status, process poll/log, configured extras)
//! returning the same state again and again. Polling is expected, so it has its own detector
//! and generic_repeat leaves known polls alone. Warns at W, blocks at C. A host poll preset
//! (crate::hostpolls) is told which blocking wait to make instead.

use super::context::{detection, Context, Detection};
use crate::tables::messages;
use crate::engine::{Detector, Level, Settings};
use crate::hostpolls::wait_advice;

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    if !ctx.known_poll || !s.known_poll_no_progress {
        return None;
    }
    let streak = ctx.counts().streak;
    // sameOutcome: warned one identical answer before the block, as any repeat is.
    let (warn_at, block_at) = match ctx.same_outcome_block_at(s, true) {
        Some(at) => (at - 1, at),
        None => (s.warning_threshold, s.critical_threshold),
    };
    let tool = ctx.tool;
    let wait = wait_advice(tool);
    if streak >= block_at {
        return Some(detection(
            Detector::KnownPollNoProgress,
            Level::Critical,
            streak,
            match wait {
                Some(wait) => messages::host_poll_critical(ctx.spelled, streak, wait),
                None => messages::known_poll_critical(ctx.spelled, streak),
            },
            format!("poll:{}", ctx.result_key()),
            ctx.streak_evidence(streak),
        ));
    }
    if streak >= warn_at && streak > 0 {
        return Some(detection(
            Detector::KnownPollNoProgress,
            Level::Warning,
            streak,
            match wait {
                Some(wait) => messages::host_poll_warning(ctx.spelled, streak, wait),
                None => messages::known_poll_warning(ctx.spelled, streak),
            },
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

    fn codex_poll(run: &mut Run, output: &str, wall: f64) -> crate::engine::Verdict {
        let params = r#"{"session_id": 7, "chars": "", "yield_time_ms": 5000}"#;
        let v = run.call("write_stdin", params);
        let result = format!(r#"{{"chunk_id": "c{wall}", "wall_time_seconds": {wall}, "session_id": 7, "output": "{output}"}}"#);
        run.result("write_stdin", params, &result);
        v
    }

    /// Under the reference defaults (W 10, C 20): Codex polls whose output never changes are
    /// warned at call 11 and blocked at call 21, whatever wall time each one reports.
    #[test]
    fn codex_write_stdin_polls_without_progress_are_warned_then_blocked() {
        let mut run = Run::new(Settings { enabled: Some(true), ..Settings::default() });
        let verdicts: Vec<_> = (0..21).map(|i| seen(&codex_poll(&mut run, "", 5.0 + i as f64 / 100.0))).collect();
        assert_eq!(verdicts[..10], [ALLOW; 10]);
        assert_eq!(verdicts[10], (Action::Warn, Detector::KnownPollNoProgress, 10));
        assert_eq!(verdicts[19], (Action::Warn, Detector::KnownPollNoProgress, 19));
        assert_eq!(verdicts[20], (Action::Block, Detector::KnownPollNoProgress, 20));
        let v = run.call("write_stdin", r#"{"session_id": 7, "chars": "", "yield_time_ms": 5000}"#);
        assert!(v.message.contains("yield_time_ms 300000"), "{}", v.message);
        assert!(!v.message.contains("vary"), "{}", v.message);
    }

    #[test]
    fn codex_polls_whose_output_changes_are_never_warned() {
        let mut run = Run::new(Settings { enabled: Some(true), ..Settings::default() });
        for i in 0..40 {
            assert_eq!(seen(&codex_poll(&mut run, &format!("line {i}"), 5.0)), ALLOW, "poll {i}");
        }
    }

    /// write_stdin with input is a terminal interaction, not a poll: generic_repeat's to judge.
    #[test]
    fn write_stdin_with_input_is_not_a_poll() {
        let mut run = Run::new(small());
        let params = r#"{"session_id": 7, "chars": "y\n"}"#;
        for _ in 0..3 {
            run.round("write_stdin", params, r#"{"output": ""}"#);
        }
        assert_eq!(seen(&run.call("write_stdin", params)), (Action::Warn, Detector::GenericRepeat, 3));
    }

    #[test]
    fn claude_code_and_mcp_task_polls_are_known_polls() {
        for (tool, params, result) in [
            ("TaskOutput", r#"{"task_id": "t", "block": false, "timeout": 1000}"#, r#""<status>running</status>""#),
            ("BashOutput", r#"{"bash_id": "b"}"#, r#""<status>running</status><timestamp>T</timestamp>""#),
            ("tasks/get", r#"{"taskId": "x"}"#, r#"{"taskId": "x", "status": "working"}"#),
        ] {
            let mut run = Run::new(small());
            for _ in 0..5 {
                run.round(tool, params, result);
            }
            let v = run.call(tool, params);
            assert_eq!(seen(&v), (Action::Block, Detector::KnownPollNoProgress, 5), "{tool}");
            assert!(v.message.contains("make one "), "{}", v.message);
        }
    }

    /// sameOutcome: an unchanged poll is warned at its 3rd call and blocked at its 4th, silent
    /// or not (an unchanged answer is a poll's no-progress).
    #[test]
    fn same_outcome_warns_at_the_third_poll_and_blocks_the_fourth() {
        let settings = Settings { same_outcome_block_at: 3, same_outcome_inconclusive_block_at: 4, ..small() };
        for answer in [r#""running""#, r#""""#] {
            let mut run = Run::new(settings.clone());
            assert_eq!(seen(&run.round("command_status", POLL, answer)), ALLOW);
            assert_eq!(seen(&run.round("command_status", POLL, answer)), ALLOW);
            assert_eq!(seen(&run.round("command_status", POLL, answer)), (Action::Warn, Detector::KnownPollNoProgress, 2));
            assert_eq!(seen(&run.call("command_status", POLL)), (Action::Block, Detector::KnownPollNoProgress, 3), "{answer}");
        }
    }
}
