//! argument_churn (opt-in): the same tool called with ever-new arguments that keep producing
//! the identical outcome, the evasion every per-(tool, args) count misses (a fresh nonce per
//! call). Its streak stops at another result or a repeated argument digest (a plain repeat is
//! generic_repeat's). Warns at `argument_churn_warn_at`, blocks at `argument_churn_block_at`.

use super::context::{detection, Context, Detection};
use crate::engine::{result_hash_text, Detector, Level, Settings};
use crate::fingerprint::PENDING;

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    let (warn_at, block_at) = (s.argument_churn_warn_at, s.argument_churn_block_at);
    if warn_at == 0 && block_at == 0 {
        return None;
    }
    let h = ctx.history;
    let mut shared: Option<(u8, [u8; 32])> = None;
    let mut seen: Vec<[u8; 32]> = Vec::new();
    let mut indexes: Vec<usize> = Vec::new();
    for i in (0..h.len()).rev() {
        let r = &h[i];
        if !r.is_tool(ctx.t) || r.status == PENDING {
            continue;
        }
        let key = (r.status, r.result);
        match shared {
            None => shared = Some(key),
            Some(k) if k != key => break,
            _ => {}
        }
        if seen.contains(&r.args) {
            break;
        }
        seen.push(r.args);
        indexes.push(i);
    }
    let (status, digest) = shared?;
    indexes.reverse();
    let streak = indexes.len() as u32;
    let tool = ctx.tool;
    let key = format!("churn:{tool}:{}", result_hash_text(status, &digest).unwrap_or_default());
    if block_at > 0 && streak >= block_at {
        return Some(detection(
            Detector::ArgumentChurn,
            Level::Critical,
            streak,
            format!("CRITICAL: {tool} was called {streak} times in a row with changing arguments and returned identical outcomes every time, so this call was not run: varying the arguments is not making progress. Change approach or report the task as failed."),
            key,
            indexes,
        ));
    }
    if warn_at > 0 && streak >= warn_at {
        return Some(detection(
            Detector::ArgumentChurn,
            Level::Warning,
            streak,
            format!("WARNING: {tool} was called {streak} times in a row with changing arguments and returned identical outcomes every time. Varying the arguments is not making progress: try something else or report the task as failed."),
            key,
            indexes,
        ));
    }
    None
}
