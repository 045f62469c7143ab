//! How a decision looks from outside: the wire `Verdict`. A pure function of engine values,
//! shared by the request path and the Python binding.

use super::Decision;
use crate::engine::Action;
use crate::pb;

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
