//! Parallel batches (`loopwarden.parallelBatches`, `loopwarden.criticalScope: "batch"`) and the
//! progress marks of `loopwarden.progressResetsRepeats`: what the engine remembers per record
//! (`Record::flags`) and per run (`Batch`) to tell calls issued together from calls made one
//! after another.
//!
//! A batch is the calls a model issued in one turn: the calls of one EvaluateRequest, the calls
//! sharing a `ToolCall.batch_id`, or, in a run that reports outcomes, a call issued while an
//! earlier call of the batch is still pending and no outcome has come back since the batch's
//! last call (the runner asked about it before it reported the earlier calls' outcomes). At most
//! 64 calls. Batches are recorded as links between records: a
//! record that joined the batch of the record before it carries LINK_EXPLICIT (same request or
//! batch id) or LINK_PENDING (issued while the batch was still pending). A pending link counts
//! only once the run has reported an outcome: a run whose calls never get outcomes would
//! otherwise be one endless batch, so it is judged call by call.

use std::collections::VecDeque;

use super::{Detector, Record, RunState, Settings};
use crate::fingerprint::PENDING;

/// Joined the batch of the record before it by its key (one EvaluateRequest, one batch id).
pub const LINK_EXPLICIT: u8 = 1;
/// Joined the batch of the record before it: issued while a call of that batch was pending.
pub const LINK_PENDING: u8 = 2;
const LINKS: u8 = LINK_EXPLICIT | LINK_PENDING;
/// Its outcome brought the run a (tool, args, result) triple it had not seen (progress).
pub const NEW_TRIPLE: u8 = 4;
/// Its outcome proves less when it repeats: a silent success or a transient error
/// (crate::inconclusive; kept only under `loopwarden.sameOutcome`).
pub const INCONCLUSIVE: u8 = 8;
/// The most calls one batch holds (a model's parallel calls of one turn).
pub const MAX_BATCH: u32 = 64;
/// Keys the service gives: an EvaluateRequest's are odd, a batch id's even (and never 0).
pub fn request_key(request: u64) -> u64 {
    (request << 1) | 1
}
pub fn batch_id_key(batch_id: &str) -> u64 {
    // XXH3, not std's DefaultHasher, whose algorithm may change between Rust releases: the same
    // batch id keys the same batch in every build of the core.
    (xxhash_rust::xxh3::xxh3_64(batch_id.as_bytes()) << 1).max(2)
}

/// The first critical of a run under criticalScope "batch": its batch and what it named.
#[derive(Clone, Debug)]
pub struct FirstCritical {
    pub batch: u32,
    pub detector: Detector,
    pub tool: String,
}

/// The run's current batch.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    /// Its key (request or batch id; 0: none).
    pub key: u64,
    /// Its number in the run, as criticalScope counts batches (1, 2, ...).
    pub number: u32,
    /// Calls linked into it (the 64 cap).
    pub size: u32,
    /// No outcome has been reported since its last call (transient): a request's calls join by
    /// its key only while they are issued back to back.
    pub open: bool,
    /// The run has reported an outcome: pending links count.
    pub outcomes_seen: bool,
    /// A call of it is in history (transient): the next one links to it.
    pub recorded: bool,
    pub critical: Option<Box<FirstCritical>>,
}

pub(crate) fn tracking(s: &Settings) -> bool {
    s.parallel_batches || scope_is_batch(s)
}

pub(crate) fn scope_is_batch(s: &Settings) -> bool {
    s.critical_scope == "batch"
}

fn counts(flags: u8, outcomes_seen: bool) -> bool {
    flags & LINK_EXPLICIT != 0 || (flags & LINK_PENDING != 0 && outcomes_seen)
}

/// Where a call goes: its link to the record before it, and the number of its batch. Updates
/// the run's batch; the link goes into the call's record if it is recorded.
pub(crate) fn place_call(state: &mut RunState) -> u8 {
    let hint = std::mem::take(&mut state.incoming_batch);
    let pending_in_batch = current_span(state.history()).any(|i| state.history()[i].status == PENDING);
    let batch = state.rare_mut().batch.get_or_insert_with(Default::default);
    let by_key = hint != 0 && hint == batch.key && (hint & 1 == 0 || batch.open);
    let link = if batch.number == 0 || batch.size >= MAX_BATCH {
        0
    } else if by_key {
        LINK_EXPLICIT
    } else if pending_in_batch && batch.open {
        // Only while the batch is being issued: once an outcome has come back, a call still
        // pending (a crashed tool, a host that sends no outcome on failure) no longer makes the
        // calls after it part of its batch, or one lost outcome would merge the rest of the run
        // into batches whose identical calls count once.
        LINK_PENDING
    } else {
        0
    };
    if link == 0 {
        batch.size = 1;
        batch.key = hint;
        batch.recorded = false;
    } else {
        batch.size += 1;
    }
    if !counts(link, batch.outcomes_seen) {
        batch.number += 1;
    }
    batch.open = true;
    link
}

/// The flags of the call's record and the batch id the detectors see for it (u32::MAX: a new
/// batch): a call linked to a batch none of whose calls is in history (they were blocked)
/// starts the batch in history.
pub(crate) fn record_link(state: &mut RunState, link: u8) -> u8 {
    let batch = state.rare_mut().batch.get_or_insert_with(Default::default);
    let flags = if batch.recorded { link } else { 0 };
    batch.recorded = true;
    flags
}

pub(crate) fn this_batch(state: &RunState, link: u8, ids: &[u32]) -> u32 {
    match &state.rare().batch {
        Some(b) if b.recorded && counts(link, b.outcomes_seen) => ids.last().copied().unwrap_or(u32::MAX),
        _ => u32::MAX,
    }
}

pub(crate) fn outcomes_seen(state: &RunState) -> bool {
    state.rare().batch.as_ref().is_some_and(|b| b.outcomes_seen)
}

/// After an outcome: the batch is no longer being issued, and pending links now count.
pub(crate) fn place_outcome(state: &mut RunState) {
    let batch = state.rare_mut().batch.get_or_insert_with(Default::default);
    batch.open = false;
    batch.outcomes_seen = true;
}

/// Indexes of the newest batch in history (its records linked to the newest one).
fn current_span(history: &VecDeque<Record>) -> impl Iterator<Item = usize> + '_ {
    let mut start = history.len();
    while start > 0 {
        start -= 1;
        if history[start].flags & LINKS == 0 {
            break;
        }
    }
    start..history.len()
}

/// Batch id of every record (ids grow with the index; equal ids: one batch).
pub(crate) fn batch_ids(history: &VecDeque<Record>, outcomes_seen: bool) -> Vec<u32> {
    let mut id = 0u32;
    history
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if i > 0 && !counts(r.flags, outcomes_seen) {
                id += 1;
            }
            id
        })
        .collect()
}

/// Did another call of record `index`'s batch already complete? (The run-wide breaker counts a
/// batch once: its first completed call decides whether it added to the streak.)
pub(crate) fn sibling_completed(history: &VecDeque<Record>, index: usize) -> bool {
    let mut start = index;
    while start > 0 && history[start].flags & LINKS != 0 {
        start -= 1;
    }
    let mut end = index + 1;
    while end < history.len() && history[end].flags & LINKS != 0 {
        end += 1;
    }
    (start..end).any(|i| i != index && history[i].status != PENDING)
}

/// progressResetsRepeats: the index below which a call's identical outcomes no longer count as
/// repeats: the newest record of another call that brought the run something new.
pub(crate) fn progress_floor(history: &VecDeque<Record>, is_this_call: impl Fn(&Record) -> bool) -> Option<usize> {
    (0..history.len()).rev().find(|&i| history[i].flags & NEW_TRIPLE != 0 && !is_this_call(&history[i])).map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::{batch_id_key, request_key};
    use crate::engine::testing::{seen, small, Run, ALLOW};
    use crate::engine::{Action, Detector, Settings};

    const EMPTY: &str = r#"{"content": [{"type": "text", "text": ""}]}"#;

    /// The `fast` preset's values (tables/loopwarden.toml), as the config resolves them.
    fn fast() -> Settings {
        Settings {
            enabled: Some(true),
            warning_threshold: 4,
            critical_threshold: 5,
            unknown_tool_threshold: 4,
            global_circuit_breaker_threshold: 8,
            abort_after_blocks: 3,
            argument_churn_warn_at: 6,
            argument_churn_block_at: 10,
            error_repeat_threshold: 5,
            run_wide_breaker_threshold: 6,
            ping_pong_needs_answers: true,
            parallel_batches: true,
            progress_resets_repeats: true,
            same_outcome_block_at: 3,
            same_outcome_inconclusive_block_at: 4,
            ..Settings::default()
        }
    }

    /// The verdicts of `calls` identical reads with identical results, after `before` ran.
    fn reads_after(settings: Settings, before: impl FnOnce(&mut Run), calls: usize) -> Vec<(Action, Detector, u32)> {
        let mut run = Run::new(settings);
        before(&mut run);
        (0..calls).map(|_| seen(&run.round("read", r#"{"path": "notes.md"}"#, r#""notes""#))).collect()
    }

    /// A call whose outcome never comes (a crashed tool), or one left open in a parallel batch,
    /// is no evidence: a later loop is warned and stopped exactly where it is without it.
    #[test]
    fn an_open_call_leaves_judgment_on() {
        for settings in [fast(), Settings { warning_threshold: 10, critical_threshold: 20, ..Settings { enabled: Some(true), ..Settings::default() } }] {
            let clean = reads_after(settings.clone(), |run| { run.round("list", "{}", r#""files""#); }, 25);
            assert!(clean.iter().any(|v| v.0 == Action::Block), "{clean:?}");
            let lost = reads_after(settings.clone(), |run| {
                run.round("list", "{}", r#""files""#);
                run.call("fetch", r#"{"url": "x"}"#);
            }, 25);
            assert_eq!(lost, clean, "one call without an outcome");
            let open_batch = reads_after(settings.clone(), |run| {
                run.round("list", "{}", r#""files""#);
                run.call("search", &search(1));
                run.call("search", &search(2));
                run.result("search", &search(1), EMPTY);
            }, 25);
            assert_eq!(open_batch, clean, "a loop that starts while a batch is open");
        }
    }

    fn search(i: u32) -> String {
        format!(r#"{{"q": "flights {i}"}}"#)
    }

    /// All calls of a fan-out, then all their outcomes: the calls' verdicts.
    fn fan_out(run: &mut Run, queries: std::ops::Range<u32>) -> Vec<(Action, Detector, u32)> {
        let verdicts: Vec<_> = queries.clone().map(|i| seen(&run.call("search", &search(i)))).collect();
        for i in queries {
            run.result("search", &search(i), EMPTY);
        }
        verdicts
    }

    #[test]
    fn three_fan_outs_of_distinct_searches_and_a_61st_are_not_churn() {
        let mut run = Run::new(fast());
        for round in 0..3 {
            assert!(fan_out(&mut run, round * 20..round * 20 + 20).iter().all(|v| v.0 == Action::Allow), "fan-out {round}");
        }
        let v = run.call("search", &search(60));
        assert_eq!(v.action, Action::Allow, "{v:?}");
    }

    /// The same run call by call (parallelBatches off) is churn: blocked in the second fan-out.
    #[test]
    fn without_batches_the_same_fan_outs_are_churn() {
        let mut run = Run::new(Settings { parallel_batches: false, ..fast() });
        fan_out(&mut run, 0..20);
        assert_eq!(seen(&run.call("search", &search(20))), (Action::Block, Detector::ArgumentChurn, 20));
    }

    /// Identical calls issued together are one decision: each batch of five identical calls adds
    /// one to the streak (W 3, C 5), so the loop is blocked in its sixth batch, not its second.
    /// (The run has reported an outcome, so calls issued while others are pending are a batch.)
    #[test]
    fn identical_calls_of_one_batch_count_once() {
        let mut run = Run::new(Settings { parallel_batches: true, ..small() });
        run.round("list", "{}", r#""files""#);
        let mut first_flag = None;
        for batch in 0..6 {
            let verdicts: Vec<_> = (0..5).map(|_| seen(&run.call("read", r#"{"path": "a"}"#))).collect();
            for _ in 0..5 {
                run.result("read", r#"{"path": "a"}"#, r#""same""#);
            }
            if let Some(v) = verdicts.iter().find(|v| v.0 != Action::Allow) {
                first_flag.get_or_insert((batch, *v));
            }
            if batch == 5 {
                assert_eq!(verdicts[0], (Action::Block, Detector::GenericRepeat, 5));
            }
        }
        assert_eq!(first_flag, Some((3, (Action::Warn, Detector::GenericRepeat, 3))));
    }

    /// A run that never reports outcomes is judged call by call: its repeats warn as before.
    #[test]
    fn a_run_without_outcomes_is_judged_call_by_call() {
        let mut run = Run::new(Settings { parallel_batches: true, ..small() });
        let verdicts: Vec<_> = (0..5).map(|_| seen(&run.call("read", r#"{"path": "a"}"#))).collect();
        assert_eq!(verdicts, [ALLOW, ALLOW, ALLOW, (Action::Warn, Detector::GenericRepeat, 3), (Action::Warn, Detector::GenericRepeat, 4)]);
    }

    /// One EvaluateRequest's calls are a batch even before the run reports an outcome; a batch
    /// id groups calls reported one by one.
    #[test]
    fn a_request_or_a_batch_id_is_a_batch() {
        for key in [request_key(7), batch_id_key("turn-3")] {
            let mut run = Run::new(Settings { parallel_batches: true, ..small() });
            let verdicts: Vec<_> = (0..5)
                .map(|_| {
                    run.state.incoming_batch = key;
                    let v = seen(&run.call("read", r#"{"path": "a"}"#));
                    if key & 1 == 0 {
                        run.result("read", r#"{"path": "a"}"#, r#""same""#);
                    }
                    v
                })
                .collect();
            assert_eq!(verdicts, [ALLOW; 5], "key {key}");
        }
    }

    /// 16 calls alternating one identical re-read with distinct searches returning the same
    /// empty result: the re-read is not a repeat once a search brought something new.
    #[test]
    fn a_reread_between_new_searches_is_not_blocked() {
        for (progress, blocked) in [(true, false), (false, true)] {
            // sameOutcome counts its evidence since the last progress too: off here with it.
            let same_outcome = if progress { 3 } else { 0 };
            let mut run = Run::new(Settings { progress_resets_repeats: progress, same_outcome_block_at: same_outcome, ..fast() });
            let mut actions = Vec::new();
            for i in 0..16 {
                let v = if i % 2 == 0 { run.round("read", r#"{"path": "notes.md"}"#, r#""notes""#) } else { run.round("search", &search(i), EMPTY) };
                actions.push(v.action);
            }
            assert_eq!(actions.iter().any(|a| matches!(a, Action::Block | Action::Abort)), blocked, "progress {progress}: {actions:?}");
        }
    }

    /// Identical consecutive re-reads are still blocked (nothing new in between): at C, and at
    /// sameOutcome's blockAt where it is on.
    #[test]
    fn consecutive_rereads_are_still_blocked() {
        for (settings, at) in [(Settings { same_outcome_block_at: 0, same_outcome_inconclusive_block_at: 0, ..fast() }, 5), (fast(), 3)] {
            let mut run = Run::new(settings);
            for _ in 0..at {
                run.round("read", r#"{"path": "notes.md"}"#, r#""notes""#);
            }
            assert_eq!(seen(&run.call("read", r#"{"path": "notes.md"}"#)), (Action::Block, Detector::GenericRepeat, at));
        }
    }

    /// A fan-out of calls that bring nothing new is one step of the run-wide streak.
    #[test]
    fn a_fan_out_is_one_step_of_the_run_wide_streak() {
        let mut run = Run::new(Settings { parallel_batches: true, run_wide_breaker_threshold: 3, ..small() });
        let calls = ["a", "b", "c", "d"].map(|p| format!(r#"{{"p": "{p}"}}"#));
        for c in &calls {
            run.round("read", c, r#""x""#);
        }
        for round in 0..2 {
            for c in &calls {
                assert_eq!(run.call("read", c).action, Action::Allow, "round {round}");
            }
            for c in &calls {
                run.result("read", c, r#""x""#);
            }
        }
        assert_eq!(run.state.no_new_streak, 2, "two batches, not eight calls");
    }

    fn batch_scope() -> Settings {
        Settings { critical_scope: "batch".into(), ..small() }
    }

    /// criticalScope "batch": the first critical blocks its later siblings, one recovery turn
    /// follows, and a second critical ends the run with loop_recovery_failed.
    #[test]
    fn a_batch_critical_blocks_its_siblings_and_a_second_one_aborts() {
        let mut run = Run::new(batch_scope());
        for _ in 0..5 {
            run.round("read", r#"{"path": "a"}"#, r#""same""#);
        }
        // One turn: three calls issued together (one request), the first of them the loop.
        let turn = |run: &mut Run, key: u64, calls: &[&str]| -> Vec<crate::engine::Verdict> {
            calls
                .iter()
                .map(|p| {
                    run.state.incoming_batch = request_key(key);
                    run.call("read", p)
                })
                .collect()
        };
        let first = turn(&mut run, 1, &[r#"{"path": "a"}"#, r#"{"path": "b"}"#, r#"{"path": "c"}"#]);
        assert_eq!(seen(&first[0]), (Action::Block, Detector::GenericRepeat, 5));
        for sibling in &first[1..] {
            assert_eq!((sibling.action, sibling.detector), (Action::Block, Detector::GenericRepeat));
            assert!(sibling.message.contains("one recovery turn"), "{}", sibling.message);
        }
        // The recovery turn: new calls run.
        let recovery = turn(&mut run, 2, &[r#"{"path": "d"}"#, r#"{"path": "e"}"#]);
        assert_eq!(recovery.iter().map(seen).collect::<Vec<_>>(), [ALLOW, ALLOW]);
        run.result("read", r#"{"path": "d"}"#, r#""new""#);
        run.result("read", r#"{"path": "e"}"#, r#""news""#);
        // The loop again: the run is over.
        let second = turn(&mut run, 3, &[r#"{"path": "a"}"#]);
        assert_eq!((second[0].action, second[0].error_code), (Action::Abort, "loop_recovery_failed"), "{:?}", second[0]);
        assert!(second[0].message.contains("after the recovery turn"), "{}", second[0].message);
        let after = run.call("other", "{}");
        assert_eq!((after.action, after.error_code), (Action::Abort, "loop_recovery_failed"));
    }

    /// criticalScope "call" (the default): siblings are judged on their own.
    #[test]
    fn call_scope_judges_siblings_on_their_own() {
        let mut run = Run::new(small());
        for _ in 0..5 {
            run.round("read", r#"{"path": "a"}"#, r#""same""#);
        }
        assert_eq!(run.call("read", r#"{"path": "a"}"#).action, Action::Block);
        assert_eq!(seen(&run.call("read", r#"{"path": "b"}"#)), ALLOW);
    }
}
