//! ping_pong: two call patterns alternating (a, b, a, b, ...), which no per-call count sees.
//! Warns at W; blocks at C only when both sides' results are stable (every record of the tail
//! completed, each side one result). With `ping_pong_needs_answers`, a side whose results say
//! nothing (a silent acknowledgement) proves nothing about progress, so it only warns.

use super::context::{Context, Detection};
use crate::engine::{args_hash_text, same, Detector, Level, Settings};
use crate::fingerprint::PENDING;

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    if !s.ping_pong {
        return None;
    }
    let h = ctx.history;
    let size = h.len();
    if size < 2 {
        return None;
    }
    let last = &h[size - 1];
    if last.is_tool(ctx.t) && same(&last.args, &ctx.args) {
        return None;
    }
    let mut other_index: Option<usize> = None;
    for i in (0..size - 1).rev() {
        if !h[i].same_tool(last) || !same(&h[i].args, &last.args) {
            other_index = Some(i);
            break;
        }
    }
    let other = other_index?;
    if !h[other].is_tool(ctx.t) || !same(&h[other].args, &ctx.args) {
        return None;
    }
    let mut tail = 0usize;
    for i in (0..size).rev() {
        let r = &h[i];
        let alternates =
            if tail.is_multiple_of(2) { r.same_tool(last) && same(&r.args, &last.args) } else { r.is_tool(ctx.t) && same(&r.args, &ctx.args) };
        if !alternates {
            break;
        }
        tail += 1;
    }
    if tail < 2 {
        return None;
    }
    let mut sides: [Option<(u8, [u8; 32])>; 2] = [None, None];
    let mut evidence_ok = true;
    for offset in 0..tail {
        let r = &h[size - 1 - offset];
        if r.status == PENDING {
            evidence_ok = false;
            break;
        }
        let key = (r.status, r.result);
        let side = offset % 2;
        match sides[side] {
            None => sides[side] = Some(key),
            Some(k) if k != key => {
                evidence_ok = false;
                break;
            }
            _ => {}
        }
    }
    let silent = evidence_ok && (is_silent(&sides[0]) || is_silent(&sides[1]));
    let count = (tail + 1) as u32;
    if count < s.warning_threshold {
        return None;
    }
    let tool = ctx.tool;
    let paired = last.tool().to_string();
    let paired_hash = args_hash_text(&paired, &last.args);
    let mut pair = [ctx.args_hash(), paired_hash];
    pair.sort();
    let key = format!("pingpong:{}|{}", pair[0], pair[1]);
    let evidence: Vec<usize> = (size + 1 - count as usize..size).collect();
    let (level, message) = if count >= s.critical_threshold && evidence_ok && !(silent && s.ping_pong_needs_answers) {
        (Level::Critical, format!("CRITICAL: ping-pong loop: you have alternated between {tool} and {paired} for {count} consecutive calls and both keep returning the same results, so this call was not run. Stop switching between them; try a different approach or report the task as failed."))
    } else {
        (Level::Warning, format!("WARNING: you have alternated between {tool} and {paired} for {count} consecutive calls. This looks like a ping-pong loop: stop switching between the two, or report the task as failed."))
    };
    Some(Detection { detector: Detector::PingPong, level, count, message, warning_key: key, paired_tool_name: paired, evidence })
}

/// Outcomes that say nothing (pingPongNeedsAnswers): the default hash of an empty OpenClaw
/// result, and empty plain values.
fn is_silent(side: &Option<(u8, [u8; 32])>) -> bool {
    use crate::json::{digest as value_digest, Value};
    use std::sync::OnceLock;
    static SILENT: OnceLock<Vec<[u8; 32]>> = OnceLock::new();
    let silent = SILENT.get_or_init(|| {
        let empty_result = Value::object(vec![(b"details".to_vec(), Value::Object(vec![])), (b"text".to_vec(), Value::Str(vec![]))]);
        [empty_result, Value::Str(vec![]), Value::Null, Value::Object(vec![]), Value::Array(vec![])].iter().map(value_digest).collect()
    });
    matches!(side, Some((status, digest)) if *status == crate::fingerprint::RESULT && silent.contains(digest))
}
