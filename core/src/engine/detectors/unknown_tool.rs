//! unknown_tool_repeat: an agent calling a tool that does not exist here, again and again (the
//! errors name the missing tool). Blocks at U (`unknown_tool_threshold`) consecutive such
//! failures naming the same tool; there is no warning level: the call cannot succeed.

use super::context::{detection, Context, Detection};
use crate::engine::{Detector, Level, Settings};

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let mut count = 0u32;
    let mut missing: Option<&str> = None;
    for r in ctx.history.iter().rev() {
        let Some(name) = r.unknown() else { break };
        if !r.is_tool(ctx.t) {
            break;
        }
        match missing {
            None => missing = Some(name),
            Some(m) if m != name => break,
            _ => {}
        }
        count += 1;
    }
    if count < s.unknown_tool_threshold {
        return None;
    }
    let missing = missing.unwrap_or(ctx.tool).to_string();
    let size = ctx.history.len();
    Some(detection(
        Detector::UnknownToolRepeat,
        Level::Critical,
        count,
        format!("CRITICAL: unavailable tool {missing}: it does not exist here and has been tried {count} times, so this call was not run. Stop calling it and answer without it."),
        format!("unknown-tool:{}:{missing}", ctx.tool),
        (size - count as usize..size).collect(),
    ))
}
