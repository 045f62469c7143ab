//! Records of tools past the interned table's bound (each keeps its own copy of the name) are
//! told apart and shown exactly like interned ones. Its own test binary: it fills the table.

use loopwarden_core::engine::{evaluate, Action, Event, Record, RunState, Settings};
use loopwarden_core::fingerprint::{Catalog, PENDING, RESULT};
use loopwarden_core::intern::{tool_id, MAX_TOOL_IDS, OVERFLOW};

fn call<'a>(tool: &'a str, seq: u64) -> Event<'a> {
    Event::ToolCall { tool_name: tool, params_json: "{\"a\": 1}", tool_call_id: "", seq, tool_class: Default::default() }
}

/// (action, detector, count) of each call of `tools` in turn, on one run.
fn verdicts(tools: &[&str]) -> Vec<(Action, &'static str, u32)> {
    let settings = Settings { enabled: Some(true), ..Default::default() };
    let mut state = RunState::new(30);
    (0..30)
        .map(|seq| {
            let v = evaluate(&mut state, &call(tools[seq % tools.len()], seq as u64 + 1), &settings, &Catalog::default(), 64);
            (v.action, v.detector.name(), v.count)
        })
        .collect()
}

#[test]
fn tools_past_the_bound_keep_their_names() {
    let interned = (verdicts(&["in-a"]), verdicts(&["in-a", "in-b"]), verdicts(&["in-a", "in-b", "in-c"]));
    for i in 0..MAX_TOOL_IDS {
        tool_id(&format!("filler-{i}"));
    }
    assert_eq!(tool_id("past-the-bound"), OVERFLOW);

    let r = Record::new(7, "past-the-bound", [1; 32], [2; 32], RESULT, Some("call-1"), None);
    assert_eq!((r.tool(), r.call_id(), r.unknown(), r.seq()), ("past-the-bound", Some("call-1"), None, 7));
    let copy = r.clone();
    drop(r);
    assert_eq!(copy.tool(), "past-the-bound");
    let other = Record::new(8, "also-past", [1; 32], [2; 32], PENDING, None, None);
    assert!(!copy.same_tool(&other));

    // Two unknown tools alternating never count as one tool repeating.
    let settings = Settings { enabled: Some(true), ..Default::default() };
    let catalog = Catalog::default();
    let mut state = RunState::new(30);
    let mut last = None;
    for seq in 1..=12 {
        let tool = if seq % 2 == 0 { "past-a" } else { "past-b" };
        last = Some(evaluate(&mut state, &call(tool, seq), &settings, &catalog, 64));
    }
    let v = last.take().unwrap();
    assert_eq!(v.action, Action::Warn);
    assert_eq!(v.detector.name(), "ping_pong");
    assert_eq!(v.paired_tool_name, "past-b");
    let tools: Vec<&str> = state.history().iter().map(|r| r.tool()).collect();
    assert_eq!(&tools[..2], ["past-b", "past-a"]);

    // The same verdicts as interned tools get, call for call.
    assert_eq!(interned.0, verdicts(&["past-x"]));
    assert_eq!(interned.1, verdicts(&["past-x", "past-y"]));
    assert_eq!(interned.2, verdicts(&["past-x", "past-y", "past-z"]));
    assert!(interned.0.iter().any(|v| v.1 == "generic_repeat") && interned.1.iter().any(|v| v.1 == "ping_pong"));
}
