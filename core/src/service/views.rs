//! How a decision looks from outside: the wire `Verdict`. A pure function of engine values,
//! shared by the request path and the Python binding; and an EvaluateResponse's bytes written
//! straight from the decisions.

use super::Decision;
use crate::engine::Action;
use crate::pb;
use prost::encoding::{encode_varint, encoded_len_varint};

pub fn verdict_message(d: &Decision) -> pb::Verdict {
    let v = &d.verdict;
    let mut m = pb::Verdict {
        seq: d.seq,
        run_id: d.run_id.clone(),
        action: v.action as i32,
        tool_name: v.tool_name.clone(),
        ..Default::default()
    };
    if v.action == Action::Allow && v.message.is_empty() {
        return m;
    }
    m.detector = v.detector as i32;
    m.level = v.level as i32;
    m.count = v.count;
    m.message = v.message.clone();
    m.warning_key = v.warning_key.clone();
    m.announce = v.announce;
    m.paired_tool_name = v.paired_tool_name.clone();
    m.error_code = v.error_code.to_string();
    m.decision_id = d.decision_id.clone();
    if !v.evidence_seqs.is_empty() {
        m.evidence = Some(pb::Evidence {
            seqs: v.evidence_seqs.clone(),
            tool_call_ids: v.evidence_call_ids.clone(),
            loop_started_seq: v.evidence_seqs[0],
        });
    }
    if let Some(shadow) = v.shadow_action {
        m.shadow = true;
        m.shadow_action = shadow as i32;
    }
    m
}

/// A verdict with only seq, run_id, action and tool_name (`verdict_message`'s early return).
fn plain(d: &Decision) -> bool {
    d.verdict.action == Action::Allow && d.verdict.message.is_empty()
}

fn string_len(tag_len: usize, s: &str) -> usize {
    if s.is_empty() { 0 } else { tag_len + encoded_len_varint(s.len() as u64) + s.len() }
}

fn put_string(out: &mut Vec<u8>, key: u8, s: &str) {
    if !s.is_empty() {
        out.push(key);
        encode_varint(s.len() as u64, out);
        out.extend_from_slice(s.as_bytes());
    }
}

/// The EvaluateResponse of `decisions`, byte for byte what prost writes for
/// `EvaluateResponse { verdicts: decisions.map(verdict_message) }`, without building the
/// messages: a plain verdict (most of them) is written field by field, in tag order, defaults
/// omitted as proto3 does; any other goes through `verdict_message`.
pub fn evaluate_response(decisions: &[Decision]) -> Vec<u8> {
    let mut out = Vec::with_capacity(decisions.len() * 40);
    for d in decisions {
        if !plain(d) {
            prost::encoding::message::encode(1, &verdict_message(d), &mut out);
            continue;
        }
        let action = d.verdict.action as i32 as u64;
        let len = if d.seq == 0 { 0 } else { 1 + encoded_len_varint(d.seq) }
            + string_len(1, &d.run_id)
            + if action == 0 { 0 } else { 1 + encoded_len_varint(action) }
            + string_len(1, &d.verdict.tool_name);
        out.push(0x0A); // field 1, length-delimited
        encode_varint(len as u64, &mut out);
        if d.seq != 0 {
            out.push(0x08); // 1: seq
            encode_varint(d.seq, &mut out);
        }
        put_string(&mut out, 0x12, &d.run_id); // 2: run_id
        if action != 0 {
            out.push(0x18); // 3: action
            encode_varint(action, &mut out);
        }
        put_string(&mut out, 0x62, &d.verdict.tool_name); // 12: tool_name
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Detector, Verdict};
    use prost::Message;

    fn decision(seq: u64, run_id: &str, verdict: Verdict) -> Decision {
        Decision { seq, run_id: run_id.into(), verdict, decision_id: if seq.is_multiple_of(2) { String::new() } else { format!("d-{seq}") } }
    }

    #[test]
    fn evaluate_response_is_the_bytes_prost_writes() {
        let long = "t".repeat(300);
        let mut warn = Verdict::allow("read");
        warn.action = Action::Warn;
        warn.detector = Detector::GenericRepeat;
        warn.message = "WARNING: repeated".into();
        warn.evidence_seqs = vec![3, 4];
        let mut allow_with_message = Verdict::allow("read");
        allow_with_message.message = "armed".into();
        let decisions = [
            decision(1, "run-1", Verdict::allow("read")),
            decision(0, "", Verdict::allow("")),
            decision(u64::MAX, &long, Verdict::allow(&long)),
            decision(7, "r", warn),
            decision(8, "r", allow_with_message),
            decision(9, "r", Verdict::reject("missing_run_id", "run_id is required".into())),
        ];
        for n in 0..=decisions.len() {
            let expected = pb::EvaluateResponse { verdicts: decisions[..n].iter().map(verdict_message).collect() }.encode_to_vec();
            assert_eq!(evaluate_response(&decisions[..n]), expected, "first {n}");
        }
    }
}
