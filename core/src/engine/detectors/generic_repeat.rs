//! generic_repeat: the same tool with the same arguments again and again. Warns at W repeats
//! (pending or not); blocks once C identical outcomes show nothing changes. Known polls are the
//! poll detector's.

use super::context::{detection, Context, Detection};
use crate::engine::{Detector, Level, Settings};

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    if ctx.known_poll || !s.generic_repeat {
        return None;
    }
    let streak = ctx.counts().streak;
    let tool = ctx.tool;
    if streak >= s.critical_threshold {
        return Some(detection(
            Detector::GenericRepeat,
            Level::Critical,
            streak,
            format!("CRITICAL: {tool} was called {streak} times with identical arguments and identical outcomes, so this call was not run: repeating it cannot make progress. Do not retry it; change approach or report that the task failed."),
            format!("generic:{}", ctx.result_key()),
            ctx.streak_evidence(streak),
        ));
    }
    let repeats = ctx.counts().recent;
    if repeats >= s.warning_threshold {
        return Some(detection(
            Detector::GenericRepeat,
            Level::Warning,
            repeats,
            format!("WARNING: {tool} has been called {repeats} times with identical arguments. If the result is not changing, stop repeating this call: try something else or report the task as failed."),
            format!("generic:{tool}:{}", ctx.args_hash()),
            ctx.recent_evidence(),
        ));
    }
    None
}
