//! known_poll_no_progress: a polling tool (command_status, process poll/log, configured extras)
//! returning the same state again and again. Polling is expected, so it has its own detector
//! and generic_repeat leaves known polls alone. Warns at W, blocks at C.

use super::context::{detection, Context, Detection};
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
            format!("CRITICAL: {tool} was polled {streak} times with the same arguments and no progress: the state never changed, so this poll was not run. Stop polling and report the process as stuck or failed."),
            format!("poll:{}", ctx.result_key()),
            ctx.streak_evidence(streak),
        ));
    }
    if streak >= s.warning_threshold {
        return Some(detection(
            Detector::KnownPollNoProgress,
            Level::Warning,
            streak,
            format!("WARNING: {tool} was polled {streak} times with the same arguments and no progress: the state has not changed. Wait longer between checks, or report the task as failed if the process is stuck."),
            format!("poll:{}", ctx.result_key()),
            ctx.streak_evidence(streak),
        ));
    }
    None
}
