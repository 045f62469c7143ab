//! global_circuit_breaker: a hard stop for any no-progress streak of one call (tool + args)
//! that grows too long (G), whatever the other detectors are set to.

use super::context::{detection, Context, Detection};
use crate::engine::{Detector, Level, Settings};

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let streak = ctx.counts().streak;
    if streak < s.global_circuit_breaker_threshold {
        return None;
    }
    let tool = ctx.tool;
    Some(detection(
        Detector::GlobalCircuitBreaker,
        Level::Critical,
        streak,
        format!("CRITICAL: global circuit breaker: {tool} returned the identical result {streak} times in a row for the same arguments, so this call was not run. Stop this loop and report that the task cannot be completed this way."),
        format!("global:{}", ctx.result_key()),
        ctx.streak_evidence(streak),
    ))
}
