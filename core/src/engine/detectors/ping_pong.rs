//! ping_pong: two call patterns alternating (a, b, a, b, ...), which no per-call count sees.
//! Warns at W; blocks at C only when both sides' results are stable (every record of the tail
//! completed, each side one result). With `ping_pong_needs_answers`, a side whose results say
//! nothing (a silent acknowledgement) proves nothing about progress, so it only warns. With
//! `loopwarden.sameOutcome`, an alternation is warned only while both sides' results are stable.

use super::context::{Context, Detection};
use crate::tables::messages;
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
    // sameOutcome: an alternation whose results change (or are still to come) is no evidence.
    if count < s.warning_threshold || (s.same_outcome_block_at > 0 && !evidence_ok) {
        return None;
    }
    let paired = last.spelling().to_string();
    let paired_hash = args_hash_text(last.tool(), &last.args);
    let mut pair = [ctx.args_hash(), paired_hash];
    pair.sort();
    let key = format!("pingpong:{}|{}", pair[0], pair[1]);
    let evidence: Vec<usize> = (size + 1 - count as usize..size).collect();
    let (level, message) = if count >= s.critical_threshold && evidence_ok && !(silent && s.ping_pong_needs_answers) {
        (Level::Critical, messages::ping_pong_critical(ctx.spelled, &paired, count))
    } else {
        (Level::Warning, messages::ping_pong_warning(ctx.spelled, &paired, count))
    };
    Some(Detection { detector: Detector::PingPong, level, count, message, warning_key: key, paired_tool_name: paired, evidence, cited: None })
}

/// Outcomes that say nothing (pingPongNeedsAnswers): the default hash of an empty OpenClaw
/// result, and empty plain values.
fn is_silent(side: &Option<(u8, [u8; 32])>) -> bool {
    use crate::json::{digest as value_digest, Value};
    use std::sync::OnceLock;
    static SILENT: OnceLock<Vec<[u8; 32]>> = OnceLock::new();
    let silent = SILENT.get_or_init(|| {
        let empty_result = Value::object(vec![(b"details"[..].into(), Value::Object(vec![])), (b"text"[..].into(), Value::owned_str(vec![]))]);
        [empty_result, Value::owned_str(vec![]), Value::Null, Value::Object(vec![]), Value::Array(vec![])].iter().map(value_digest).collect()
    });
    matches!(side, Some((status, digest)) if *status == crate::fingerprint::RESULT && silent.contains(digest))
}

#[cfg(test)]
mod tests {
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Settings};

    const A: (&str, &str) = ("look", r#"{"at": "door"}"#);
    const B: (&str, &str) = ("walk", r#"{"to": "door"}"#);

    #[test]
    fn allows_below_w_warns_at_w_blocks_at_c_when_results_are_stable() {
        let mut run = Run::new(small()); // W = 3, C = 5
        assert_eq!(seen(&run.round(A.0, A.1, r#""a door""#)), ALLOW);
        assert_eq!(seen(&run.round(B.0, B.1, r#""at the door""#)), ALLOW);
        let v = run.round(A.0, A.1, r#""a door""#);
        assert_eq!(seen(&v), (Action::Warn, Detector::PingPong, 3));
        assert_eq!(v.paired_tool_name, "walk");
        assert_eq!(seen(&run.round(B.0, B.1, r#""at the door""#)), (Action::Warn, Detector::PingPong, 4));
        let v = run.call(A.0, A.1);
        assert_eq!(seen(&v), (Action::Block, Detector::PingPong, 5));
        assert_eq!(v.paired_tool_name, "walk");
        assert!(v.warning_key.starts_with("pingpong:"), "{}", v.warning_key);
        // The four calls of the tail before this one.
        assert_eq!(v.evidence_seqs, [1, 3, 5, 7]);
    }

    #[test]
    fn without_outcomes_it_only_warns() {
        let mut run = Run::new(small());
        let verdicts: Vec<_> = (0..6).map(|i| seen(&if i % 2 == 0 { run.call(A.0, A.1) } else { run.call(B.0, B.1) })).collect();
        assert_eq!(verdicts[..2], [ALLOW, ALLOW]);
        assert_eq!(verdicts[2..], [3, 4, 5, 6].map(|n| (Action::Warn, Detector::PingPong, n)));
    }

    #[test]
    fn changing_results_only_warn() {
        let mut run = Run::new(small());
        for i in 0..4 {
            let (tool, params) = if i % 2 == 0 { A } else { B };
            run.round(tool, params, &format!(r#""step {i}""#));
        }
        assert_eq!(seen(&run.call(A.0, A.1)), (Action::Warn, Detector::PingPong, 5));
    }

    /// One side answering nothing (an empty string): blocked by default, only warned when
    /// `ping_pong_needs_answers` asks both sides to say something.
    #[test]
    fn a_silent_side_only_warns_when_answers_are_needed() {
        for (needs_answers, action) in [(false, Action::Block), (true, Action::Warn)] {
            let mut run = Run::new(Settings { ping_pong_needs_answers: needs_answers, ..small() });
            for i in 0..4 {
                if i % 2 == 0 {
                    run.round(A.0, A.1, r#""a door""#);
                } else {
                    run.round(B.0, B.1, r#""""#);
                }
            }
            assert_eq!(seen(&run.call(A.0, A.1)), (action, Detector::PingPong, 5), "needs answers: {needs_answers}");
        }
    }

    #[test]
    fn off_when_switched_off() {
        let mut run = Run::new(Settings { ping_pong: false, ..small() });
        for i in 0..6 {
            let (tool, params) = if i % 2 == 0 { A } else { B };
            assert_eq!(seen(&run.call(tool, params)), ALLOW);
        }
    }
}
