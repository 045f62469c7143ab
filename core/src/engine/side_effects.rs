//! duplicate_side_effect's memory: the calls of mutating tools in a run and whether they
//! succeeded. A call is remembered when it is let through (pending), marked succeeded when its
//! outcome is a success, forgotten when it failed; the detector (detectors/duplicate_side_effect)
//! blocks a call identical to a succeeded one. Kept apart from the history because a side effect
//! happened once for the whole run, not only within the last H calls.

use crate::fingerprint::RESULT;
use crate::json::Value;
use crate::tool_rules::{ToolClass, ToolRule};

use super::{same, RunState, SideEffect, MAX_SIDE_EFFECTS};

/// A call's class: the config's tool rule wins, then what the caller sent (MCP annotations).
pub(crate) fn class_of(rule: Option<&ToolRule>, sent: ToolClass) -> ToolClass {
    match rule.map(|r| r.class) {
        Some(class) if class != ToolClass::Unknown => class,
        _ => sent,
    }
}

fn push(state: &mut RunState, effect: SideEffect) {
    let effects = state.rare_mut().side_effects.get_or_insert_with(Default::default);
    if effects.len() >= MAX_SIDE_EFFECTS {
        effects.remove(0);
    }
    effects.push(effect);
}

/// A mutating call let through: pending until its outcome arrives.
pub(crate) fn remember_call(state: &mut RunState, tool: &str, args: [u8; 32], seq: u64, call_id: &str) {
    let call_id = (!call_id.is_empty()).then(|| call_id.into());
    push(state, SideEffect { tool: tool.into(), args, seq, call_id, succeeded: false });
}

/// An outcome: the newest pending call it completes is marked succeeded (`ok`) or forgotten. An
/// outcome with no pending call (a host that reports only outcomes) is remembered when the config
/// classes its tool mutating and it succeeded.
pub(crate) fn settle(state: &mut RunState, tool: &str, args: &[u8; 32], call_id: &str, seq: u64, ok: bool, mutating: bool) {
    let pending = state.rare().side_effects.as_ref().and_then(|effects| {
        effects.iter().rposition(|e| {
            !e.succeeded && same(&e.args, args) && &*e.tool == tool
                && (call_id.is_empty() || e.call_id.as_deref() == Some(call_id))
        })
    });
    match (pending, state.rare_if_any().and_then(|r| r.side_effects.as_mut())) {
        (Some(i), Some(effects)) if ok => effects[i].succeeded = true,
        (Some(i), Some(effects)) => {
            effects.remove(i);
        }
        _ if ok && mutating => {
            let call_id = (!call_id.is_empty()).then(|| call_id.into());
            push(state, SideEffect { tool: tool.into(), args: *args, seq, call_id, succeeded: true });
        }
        _ => {}
    }
}

/// Did the call succeed? A recorded result (not an error) that does not say it failed: MCP's
/// `isError: true`, `ok: false` / `success: false`, a non-empty top-level `error`, a non-zero
/// `exitCode`, or `details.status` failed / error / timeout (also a non-zero `details.exitCode`).
pub(crate) fn succeeded(status: u8, result: Option<&Value>) -> bool {
    if status != RESULT {
        return false;
    }
    let Some(result) = result else { return true };
    let says_failed = |v: &Value| {
        matches!(v.get("isError"), Some(Value::Bool(true)))
            || matches!(v.get("ok"), Some(Value::Bool(false)))
            || matches!(v.get("success"), Some(Value::Bool(false)))
            || matches!(v.get("error"), Some(e) if !matches!(e, Value::Null | Value::Bool(false)) && !e.is_str(""))
            || matches!(v.get("exitCode"), Some(Value::Int(code)) if *code != crate::json::Int::Small(0))
            || matches!(v.get("status"), Some(s) if s.is_str("failed") || s.is_str("error") || s.is_str("timeout"))
    };
    !(says_failed(result) || result.get("details").is_some_and(says_failed))
}
