//! duplicate_side_effect (opt-in, `loopwarden.duplicateSideEffect`): a mutating tool called again
//! with identical (projected) arguments after an identical call of the run succeeded. The repeat
//! would do its side effect twice (a second email, a second payment), so it is blocked at once,
//! naming the first call. Read-only and unclassified tools are never its to judge.

use super::context::{detection, Context, Detection};
use crate::engine::{Detector, Level, Settings};
use crate::tables::messages;
use crate::tool_rules::ToolClass;

pub(super) fn detect(ctx: &mut Context, s: &Settings) -> Option<Detection> {
    if !s.duplicate_side_effect || ctx.tool_class != ToolClass::Mutating {
        return None;
    }
    let mut done = ctx.side_effects.iter().filter(|e| e.succeeded && &*e.tool == ctx.tool && e.args == ctx.args);
    let first = done.next()?;
    let count = 1 + done.count() as u32;
    let first_call = match &first.call_id {
        Some(id) => format!("first call: seq {}, call id {id}", first.seq),
        None => format!("first call: seq {}", first.seq),
    };
    let key = format!("side_effect:{}", ctx.args_hash());
    let mut d = detection(
        Detector::DuplicateSideEffect,
        Level::Critical,
        count,
        messages::duplicate_side_effect_critical(ctx.spelled, first_call),
        key,
        Vec::new(),
    );
    // The first call may have left the history window: its seq and id are cited directly.
    d.cited = Some((vec![first.seq], first.call_id.iter().map(|id| id.to_string()).collect()));
    Some(d)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Event, Settings};
    use crate::tool_rules::{ToolClass, ToolRule, ToolRules};

    const EMAIL: (&str, &str) = ("send_email", r#"{"to": "a@example.com", "body": "hi"}"#);
    const READ: (&str, &str) = ("read", r#"{"path": "notes.txt"}"#);

    fn settings() -> Settings {
        let rule = |p: &str, class| ToolRule { pattern: p.into(), class, ..Default::default() };
        Settings {
            duplicate_side_effect: true,
            tool_rules: Arc::new(ToolRules::new(vec![rule("send_email", ToolClass::Mutating), rule("read", ToolClass::ReadOnly)])),
            ..small()
        }
    }

    #[test]
    fn a_second_identical_successful_mutating_call_is_blocked_naming_the_first() {
        let mut run = Run::new(settings());
        assert_eq!(seen(&run.round(EMAIL.0, EMAIL.1, r#"{"sent": true}"#)), ALLOW);
        let v = run.call(EMAIL.0, EMAIL.1);
        assert_eq!(seen(&v), (Action::Block, Detector::DuplicateSideEffect, 1));
        assert!(v.message.contains("first call: seq 1"), "{}", v.message);
        assert_eq!(v.evidence_seqs, [1]);
        // Other arguments are another action.
        assert_eq!(seen(&run.call(EMAIL.0, r#"{"to": "b@example.com", "body": "hi"}"#)), ALLOW);
    }

    #[test]
    fn read_only_tools_are_never_its_to_judge() {
        let mut run = Run::new(settings());
        run.round(READ.0, READ.1, r#""text""#);
        assert_eq!(seen(&run.call(READ.0, READ.1)), ALLOW);
    }

    #[test]
    fn a_failed_or_unfinished_call_may_be_retried() {
        let mut run = Run::new(settings());
        run.failing_round(EMAIL.0, EMAIL.1, "smtp timeout");
        assert_eq!(seen(&run.call(EMAIL.0, EMAIL.1)), ALLOW, "the first failed; the second is still pending");
        assert_eq!(seen(&run.call(EMAIL.0, EMAIL.1)), ALLOW, "nothing succeeded yet");
        let mut run = Run::new(settings());
        run.round(EMAIL.0, EMAIL.1, r#"{"isError": true, "content": [{"type": "text", "text": "quota"}]}"#);
        assert_eq!(seen(&run.call(EMAIL.0, EMAIL.1)), ALLOW, "isError is a failure");
    }

    #[test]
    fn the_call_id_is_named_and_an_annotated_class_counts_when_the_config_is_silent() {
        let mut run = Run::new(Settings { duplicate_side_effect: true, ..small() });
        let call = |run: &mut Run, id: &'static str, seq| {
            run.send(&Event::ToolCall { tool_name: "create_issue", params_json: "{}", tool_call_id: id, seq, tool_class: ToolClass::Mutating })
        };
        call(&mut run, "c1", 1);
        run.send(&Event::ToolOutcome { tool_name: "create_issue", params_json: "{}", tool_call_id: "c1", result_json: Some("{}"), error: None, seq: 2 });
        let v = call(&mut run, "c2", 3);
        assert_eq!(seen(&v), (Action::Block, Detector::DuplicateSideEffect, 1));
        assert!(v.message.contains("first call: seq 1, call id c1"), "{}", v.message);
        assert_eq!(v.evidence_call_ids, ["c1"]);
    }

    #[test]
    fn the_config_class_wins_over_the_annotation() {
        let mut run = Run::new(settings());
        let call = |run: &mut Run, seq| {
            run.send(&Event::ToolCall { tool_name: READ.0, params_json: READ.1, tool_call_id: "", seq, tool_class: ToolClass::Mutating })
        };
        call(&mut run, 1);
        run.result(READ.0, READ.1, r#""text""#);
        assert_eq!(seen(&call(&mut run, 3)), ALLOW);
    }

    /// Success is judged on the result as sent: an ignoreResult path cannot hide a failure.
    #[test]
    fn an_ignored_result_field_does_not_turn_a_failure_into_a_success() {
        use crate::tool_rules::parse_path;
        let rule = ToolRule { pattern: "send_email".into(), class: ToolClass::Mutating, ignore_result: vec![parse_path("$.isError").unwrap()], ..Default::default() };
        let mut run = Run::new(Settings { tool_rules: Arc::new(ToolRules::new(vec![rule])), ..settings() });
        run.round(EMAIL.0, EMAIL.1, r#"{"isError": true, "content": [{"type": "text", "text": "quota"}]}"#);
        assert_eq!(seen(&run.call(EMAIL.0, EMAIL.1)), ALLOW);
    }

    #[test]
    fn off_unless_enabled() {
        let mut run = Run::new(Settings { duplicate_side_effect: false, ..settings() });
        run.round(EMAIL.0, EMAIL.1, r#"{"sent": true}"#);
        assert_eq!(seen(&run.call(EMAIL.0, EMAIL.1)), ALLOW);
    }
}
