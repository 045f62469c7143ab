//! A run evaluated from memory while its stored copy could not be read, merged with that copy
//! once the store answers (persist.rs `merge_run`; keeper.py marks, retries and calls it).
//!
//! Memory's copy began from nothing when the load failed, so everything in it arrived since:
//! it is the delta. The rules (docs/operations.md, "When a load fails"):
//! - history: the stored records, then memory's, the newest `capacity` kept; a stored call still
//!   pending whose tool and arguments memory holds a record of is dropped (its outcome came
//!   since). Detectors count streaks over this history, so 15 stored identical outcomes and 5
//!   since are a streak of 20.
//! - counters and budgets: stored plus memory's (events evaluated, blocks, tree totals, children
//!   created, budget extensions); a run's own `runs` total stays 1.
//! - sets: union (warning keys announced, outcomes seen run-wide, side effects, children, notices,
//!   denied patterns and pending asks by id); bounded as the engine bounds them, oldest first out.
//! - the run-wide no-new-outcome streak: when every outcome memory saw was already seen in the
//!   store, stored plus memory's plus one per outcome memory first saw (each reset memory's count,
//!   and none was new); otherwise memory's. A lower bound: the breaker may trip later, not earlier.
//! - one-of fields: the stored abort wins (an aborted run stays aborted); memory's guard, batch,
//!   output streaks (the detectors of loops without tool calls: a lower bound, as the breaker's),
//!   retry window, recent decisions, agent and session when it has them, else the stored ones.

use super::store::Entry;
use crate::engine::{RunState, MAX_ANNOUNCED_KEYS, MAX_SEEN_TRIPLES, MAX_SIDE_EFFECTS};
use crate::fingerprint::PENDING;

/// Fold `stored` (the store's copy) into `memory` (evaluated since the load failed).
pub(super) fn merge(memory: &mut Entry, stored: Entry) {
    memory.events_evaluated = memory.events_evaluated.saturating_add(stored.events_evaluated);
    if memory.agent_id.is_empty() {
        memory.agent_id = stored.agent_id;
    }
    if memory.session_id.is_empty() {
        memory.session_id = stored.session_id;
    }
    if memory.retries.is_none() {
        memory.retries = stored.retries;
    }
    merge_state(&mut memory.state, stored.state);
    memory.tree = match (memory.tree.take(), stored.tree) {
        (Some(mut mine), Some(theirs)) => {
            merge_link(&mut mine, *theirs);
            Some(mine)
        }
        (mine, theirs) => mine.or(theirs),
    };
}

fn merge_state(memory: &mut RunState, mut stored: RunState) {
    let since = memory.take_history();
    let mut history = stored.take_history();
    history.retain(|r| r.status != PENDING || !since.iter().any(|m| m.same_tool(r) && m.args == r.args));
    history.extend(since);
    let capacity = memory.capacity.max(1);
    while history.len() > capacity {
        history.pop_front();
    }
    memory.replace_history(history);
    let mut mine = memory.take_rare();
    merge_rare(&mut mine, stored.take_rare(), memory, &stored);
    memory.set_rare(mine);
}

/// The rare parts (`memory`, `stored`) of the two states (`counts`: memory's, where the run's
/// counts are merged; `theirs`: the stored state's counts).
fn merge_rare(memory: &mut crate::engine::Rare, stored: crate::engine::Rare, counts: &mut RunState, theirs: &RunState) {
    if let Some(theirs) = stored.announced {
        let mut keys = *theirs;
        for (key, count) in memory.announced.take().map(|b| *b).unwrap_or_default() {
            match keys.iter_mut().find(|(k, _)| *k == key) {
                Some(known) => known.1 = known.1.max(count),
                None => keys.push((key, count)),
            }
        }
        let excess = keys.len().saturating_sub(MAX_ANNOUNCED_KEYS);
        keys.drain(..excess);
        memory.announced = Some(Box::new(keys));
    }
    if memory.guard.is_none() {
        memory.guard = stored.guard;
    }
    if stored.abort.is_some() {
        memory.abort = stored.abort;
    }
    counts.blocks = counts.blocks.saturating_add(theirs.blocks);

    let seen_before = stored.seen_triples.as_deref();
    let nothing_new = match (seen_before, memory.seen_triples.as_deref()) {
        (Some(before), Some(mine)) => mine.is_subset(before).then_some(mine.len() as u32),
        (Some(_), None) => Some(0),
        _ => None,
    };
    if let Some(first_seen) = nothing_new {
        counts.no_new_streak = theirs.no_new_streak.saturating_add(counts.no_new_streak).saturating_add(first_seen);
    }
    if let Some(theirs) = stored.seen_triples {
        let mut seen = *theirs;
        for triple in memory.seen_triples.take().map(|b| *b).unwrap_or_default() {
            if seen.len() >= MAX_SEEN_TRIPLES {
                break;
            }
            seen.insert(triple);
        }
        memory.seen_triples = Some(Box::new(seen));
    }

    if let Some(theirs) = stored.side_effects {
        let mut effects = *theirs;
        for mine in memory.side_effects.take().map(|b| *b).unwrap_or_default() {
            effects.retain(|e| !(e.tool == mine.tool && e.args == mine.args));
            effects.push(mine);
        }
        let excess = effects.len().saturating_sub(MAX_SIDE_EFFECTS);
        effects.drain(..excess);
        memory.side_effects = Some(Box::new(effects));
    }
    if memory.batch.is_none() {
        memory.batch = stored.batch;
    }
    if memory.outputs.is_none() {
        memory.outputs = stored.outputs;
    }
    if let Some(theirs) = stored.asks {
        let mut asks = *theirs;
        if let Some(mine) = memory.asks.take() {
            for pending in mine.pending {
                if !asks.pending.iter().any(|p| p.decision_id == pending.decision_id) {
                    asks.pending.push(pending);
                }
            }
            for denied in mine.denied {
                if !asks.denied.contains(&denied) {
                    asks.denied.push(denied);
                }
            }
        }
        memory.asks = Some(Box::new(asks));
    }
}

fn merge_link(memory: &mut super::trees::TreeLink, stored: super::trees::TreeLink) {
    let own_runs = memory.totals.runs.max(stored.totals.runs);
    add_totals(&mut memory.totals, &stored.totals);
    memory.totals.runs = own_runs;
    memory.tree = match (memory.tree.take(), stored.tree) {
        (Some(mut mine), Some(theirs)) => {
            // Memory's tree count began at 1 for this run, which the stored count holds already.
            let runs = (mine.runs + theirs.runs).saturating_sub(1).max(1);
            add_totals(&mut mine, &theirs);
            mine.runs = runs;
            Some(mine)
        }
        (mine, theirs) => mine.or(theirs),
    };
    if memory.parent.is_empty() && memory.root.is_empty() {
        memory.parent = stored.parent;
        memory.root = stored.root;
        memory.depth = stored.depth;
    }
    let mut children = stored.children;
    for child in std::mem::take(&mut memory.children) {
        if !children.contains(&child) {
            children.push(child);
        }
    }
    let excess = children.len().saturating_sub(super::trees::MAX_LISTED_CHILDREN);
    children.drain(..excess);
    memory.children = children;
    memory.children_created = memory.children_created.saturating_add(stored.children_created);
    memory.started = memory.started.min(stored.started);
    for notice in stored.notices.into_iter().rev() {
        if !memory.notices.iter().any(|n| n.child == notice.child) {
            memory.notices.insert(0, notice);
        }
    }
    let excess = memory.notices.len().saturating_sub(super::trees::MAX_NOTICES);
    memory.notices.drain(..excess);
    memory.warned |= stored.warned;
    for (mine, theirs) in memory.extensions.iter_mut().zip(stored.extensions) {
        *mine = mine.saturating_add(theirs);
    }
}

fn add_totals(into: &mut super::trees::Totals, from: &super::trees::Totals) {
    into.tool_calls = into.tool_calls.saturating_add(from.tool_calls);
    into.tool_ms = into.tool_ms.saturating_add(from.tool_ms);
    into.input_tokens = into.input_tokens.saturating_add(from.input_tokens);
    into.output_tokens = into.output_tokens.saturating_add(from.output_tokens);
    into.cost_usd += from.cost_usd;
    into.runs = into.runs.saturating_add(from.runs);
}

#[cfg(test)]
mod tests {
    use crate::engine::{Action, Detector, Settings};
    use crate::pb;
    use crate::service::{Config, Core, Limits, Loaded, Summary};

    fn core() -> Core {
        let settings = Settings { enabled: Some(true), warning_threshold: 3, critical_threshold: 5, ..Default::default() };
        let mut core = Core::new(Config { default: settings, ..Default::default() }, Limits::default(), 100, 3600.0, "test".into(), vec![]);
        core.store.track_changes(false);
        core
    }

    fn event(run: &str, seq: u64, kind: pb::event::Kind) -> pb::Event {
        pb::Event { run_id: run.into(), seq, kind: Some(kind), ..Default::default() }
    }

    /// One call of `read {"p":1}` and its identical outcome: the call's verdict.
    fn round(core: &mut Core, run: &str, seq: u64) -> crate::engine::Verdict {
        let call = pb::event::Kind::ToolCall(pb::ToolCall { tool_name: "read".into(), params_json: r#"{"p":1}"#.into(), ..Default::default() });
        let verdict = core.evaluate_event(&event(run, seq * 2, call), "t", 1.0, &mut Summary::default()).verdict;
        let outcome = pb::event::Kind::ToolOutcome(pb::ToolOutcome {
            tool_name: "read".into(), params_json: r#"{"p":1}"#.into(),
            outcome: Some(pb::tool_outcome::Outcome::ResultJson(r#""same""#.into())), ..Default::default()
        });
        core.evaluate_event(&event(run, seq * 2 + 1, outcome), "t", 1.0, &mut Summary::default());
        verdict
    }

    /// A run with `rounds` identical outcomes as another replica stored it.
    fn stored(rounds: u64) -> Vec<u8> {
        let mut owner = core();
        for seq in 1..=rounds {
            round(&mut owner, "r", seq);
        }
        owner.encode_run("t", "r", 1000.0, 1.0).expect("held")
    }

    fn listed(core: &mut Core) -> Vec<String> {
        core.store.take_dirty().into_iter().map(|((_, run), _)| run).collect()
    }

    #[test]
    fn a_merged_history_is_the_stored_records_then_what_arrived_since() {
        let record = stored(4);
        let mut replica = core();
        assert!(replica.store.mark_unmerged("t", "r", ""));
        assert_eq!(round(&mut replica, "r", 10).action, Action::Allow, "from memory: a streak of 0");
        let merged = replica.merge_run(&record, 1000.0, 1.0, ("t", "r"), &mut Vec::new()).unwrap();
        assert!(matches!(merged, Loaded::Merged));
        let entry = replica.store.get("t", "r").unwrap();
        assert_eq!((entry.state.history().len(), entry.events_evaluated), (5, 10));
        let blocked = round(&mut replica, "r", 11);
        assert_eq!((blocked.action, blocked.detector, blocked.count), (Action::Block, Detector::GenericRepeat, 5),
                   "4 stored + 1 since = C");
    }

    #[test]
    fn an_unmerged_run_is_never_flushed_and_is_asked_for_again() {
        let mut replica = core();
        assert!(replica.store.mark_unmerged("t", "r", ""));
        round(&mut replica, "r", 1);
        round(&mut replica, "other", 1);
        assert_eq!(listed(&mut replica), ["other"], "the unmerged run stays out of the flush");
        assert_eq!(replica.store.dirty_count(), 1, "and waits, still dirty");
        let refs = [event("r", 5, pb::event::Kind::RunEnd(pb::RunEnd {}))];
        assert!(replica.missing_runs(&[], "t", "", 1.0, &mut Summary::default()).is_empty());
        let call = event("r", 6, pb::event::Kind::ToolCall(pb::ToolCall { tool_name: "read".into(), ..Default::default() }));
        let missing = replica.missing_runs(&[crate::service::EventRef::from(&call)], "t", "", 1.0, &mut Summary::default());
        assert_eq!(missing, [("r".to_string(), "r".to_string())], "held but unmerged: loaded again");
        assert!(replica.missing_runs(&[crate::service::EventRef::from(&refs[0])], "t", "", 1.0, &mut Summary::default()).is_empty());

        replica.merge_run(&stored(2), 1000.0, 1.0, ("t", "r"), &mut Vec::new()).unwrap();
        assert!(!replica.store.is_unmerged("t", "r"));
        assert_eq!(listed(&mut replica), ["r"], "merged: written at the next flush");
        assert_eq!(replica.store.get("t", "r").unwrap().state.history().len(), 3);
    }

    #[test]
    fn a_run_whose_lease_lapsed_is_asked_for_again_and_the_stored_copy_replaces_memory() {
        let mut replica = core();
        round(&mut replica, "r", 1);
        replica.store.set_lease("t", "r", 10.0);
        let call = event("r", 9, pb::event::Kind::ToolCall(pb::ToolCall { tool_name: "read".into(), ..Default::default() }));
        let refs = [crate::service::EventRef::from(&call)];
        assert!(replica.missing_runs(&refs, "t", "", 9.0, &mut Summary::default()).is_empty(), "lease live: memory answers");
        let missing = replica.missing_runs(&refs, "t", "", 10.0, &mut Summary::default());
        assert_eq!(missing, [("r".to_string(), "r".to_string())], "lease lapsed: read again");
        // Another replica took the run meanwhile (4 rounds stored): its copy replaces memory's.
        let outcome = replica.load_run(&stored(4), None, 1000.0, 1.0, Some(("t", "r")), &mut Vec::new()).unwrap();
        assert!(matches!(outcome, Loaded::Restored));
        assert_eq!(replica.store.get("t", "r").unwrap().state.history().len(), 4, "the stored history, not memory's one call");
        assert!(replica.missing_runs(&refs, "t", "", 10.0, &mut Summary::default()).is_empty(), "no lease watched yet");
    }

    #[test]
    fn a_held_run_never_marked_keeps_memory_and_one_not_held_is_restored() {
        let record = stored(3);
        let mut replica = core();
        round(&mut replica, "r", 1);
        assert!(matches!(replica.merge_run(&record, 1000.0, 1.0, ("t", "r"), &mut Vec::new()).unwrap(), Loaded::Held));
        assert_eq!(replica.store.get("t", "r").unwrap().state.history().len(), 1);

        let mut fresh = core();
        fresh.store.mark_unmerged("t", "r", "");
        assert!(matches!(fresh.merge_run(&record, 1000.0, 1.0, ("t", "r"), &mut Vec::new()).unwrap(), Loaded::Restored));
        assert_eq!(fresh.store.get("t", "r").unwrap().state.history().len(), 3);
        assert_eq!(fresh.store.unmerged_count(), 0);
    }

    #[test]
    fn the_merged_history_keeps_the_newest_capacity_records_and_sums_counters() {
        let record = stored(25);
        let mut replica = core();
        assert!(replica.store.mark_unmerged("t", "r", ""));
        for seq in 100..110 {
            round(&mut replica, "r", seq);
        }
        let blocks_since = replica.store.get("t", "r").unwrap().state.blocks;
        replica.merge_run(&record, 1000.0, 1.0, ("t", "r"), &mut Vec::new()).unwrap();
        let entry = replica.store.get("t", "r").unwrap();
        assert_eq!(entry.state.history().len(), entry.state.capacity);
        assert_eq!(entry.state.history().back().unwrap().seq(), 219, "memory's newest record last");
        assert_eq!(entry.events_evaluated, 70);
        let mut owner = core();
        for seq in 1..=25 {
            round(&mut owner, "r", seq);
        }
        assert_eq!(entry.state.blocks, owner.store.get("t", "r").unwrap().state.blocks + blocks_since);
    }

    #[test]
    fn ending_or_evicting_a_marked_run_lifts_its_mark() {
        let mut replica = core();
        assert!(replica.store.mark_unmerged("t", "r", ""));
        replica.store.mark_unmerged("t", "never-created", "");
        round(&mut replica, "r", 1);
        assert!(replica.store.remove("t", "r"));
        assert!(!replica.store.remove("t", "never-created"), "not held, but its mark goes too");
        assert_eq!(replica.store.unmerged_count(), 0);
    }
}
