//! error_repeat (opt-in): the same call failing with the identical error again and again. The
//! reference only warns such a call at W and blocks at C; a small model retrying a failing call
//! rarely recovers after a few identical errors. Blocks at the threshold, warns one earlier.

use super::context::{detection, Context, Detection};
use crate::engine::{Detector, Level, Settings};
use crate::fingerprint::ERROR;

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let threshold = s.error_repeat_threshold;
    if threshold == 0 {
        return None;
    }
    let (streak, key) = {
        let c = ctx.counts();
        (c.streak, c.result_key)
    };
    match key {
        Some((status, _)) if status == ERROR && streak + 1 >= threshold => {}
        _ => return None,
    }
    let tool = ctx.tool;
    let key = format!("error:{}", ctx.result_key());
    if streak >= threshold {
        return Some(detection(
            Detector::ErrorRepeat,
            Level::Critical,
            streak,
            format!("CRITICAL: {tool} failed {streak} times in a row with identical arguments and the identical error, so this call was not run. Fix what the error says before calling it again, or report the task as failed."),
            key,
            ctx.streak_evidence(streak),
        ));
    }
    Some(detection(
        Detector::ErrorRepeat,
        Level::Warning,
        streak,
        format!("WARNING: {tool} failed {streak} times in a row with identical arguments and the identical error. Read the error and change the call: one more identical failure and it will be blocked."),
        key,
        ctx.streak_evidence(streak),
    ))
}
