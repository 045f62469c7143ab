//! The retry window (`retries.py`): a client that resends an event it got no answer for (same
//! seq, same content) gets the verdict it was given the first time, and the run's state is not
//! touched twice. Apart from the store because it is per run, bounded, and persisted with the
//! run, so its content digest must match the reference engine's byte for byte.

use std::collections::HashMap;

use super::wire::{kind_ref, KindRef, OutcomeRef};
use super::Decision;
use crate::pb;

/// How many of a run's latest evaluated events (seq not 0) the window remembers, as a ring.
pub const RETRY_WINDOW: usize = 64;

/// One remembered event: its seq as an offset from the window's base, and its content digest:
/// 10 bytes.
#[derive(Clone, Copy)]
struct Slot {
    offset: u16,
    digest: [u8; 8],
}

/// Laid out for memory: a run holds up to 64 slots of 10 bytes, its seqs as offsets from one
/// base (a client numbers a run's events from 1 up, so 64 of them span far less than 2^16);
/// seqs spread wider than that are kept whole in a side table made only then. Decisions are
/// kept only when the window holds some.
#[derive(Default)]
pub(crate) struct Retries {
    slots: Vec<Slot>,
    /// The seq an offset counts from (the lowest the window held when it was last set).
    base: u64,
    /// Every slot's seq, whole, while the window's seqs span more than an offset reaches.
    wide: Option<Box<[u64; RETRY_WINDOW]>>,
    /// slot -> the decision given there (only decisions worth repeating whole: not a plain ALLOW);
    /// boxed, 8 bytes and not 48, as most windows hold none.
    #[allow(clippy::box_collection)]
    decisions: Option<Box<HashMap<usize, Decision>>>,
    pub(crate) next_slot: u8,
    /// Events remembered since the run's last full record in the state store (at most the
    /// window): a delta writes only their slots (service/persist.rs).
    pub(crate) unsaved: u8,
}

impl Retries {
    /// An empty window for a run whose history holds `history` records: its slots are allocated
    /// for that many events at once, as the history's own are (a window grown 4, 8, 16, 32 slots
    /// at a time leaves each smaller allocation behind as a hole among the runs' live memory).
    pub(crate) fn for_history(history: usize) -> Retries {
        Retries { slots: Vec::with_capacity(history.clamp(4, RETRY_WINDOW)), ..Default::default() }
    }
    /// A window read back from the state store (seqs and digests slot by slot).
    pub(crate) fn from_parts(seqs: &[u64], digests: &[[u8; 8]], decisions: HashMap<usize, Decision>, next_slot: usize,
                             unsaved: usize) -> Retries {
        let len = seqs.len().min(digests.len()).min(RETRY_WINDOW);
        let mut retries = Retries {
            slots: digests[..len].iter().map(|&digest| Slot { offset: 0, digest }).collect(),
            base: 0,
            wide: None,
            decisions: (!decisions.is_empty()).then(|| Box::new(decisions)),
            next_slot: (next_slot % RETRY_WINDOW) as u8,
            unsaved: unsaved.min(RETRY_WINDOW) as u8,
        };
        let mut whole = Box::new([0; RETRY_WINDOW]);
        whole[..len].copy_from_slice(&seqs[..len]);
        retries.wide = Some(whole);
        retries.narrow();
        retries
    }
    pub(crate) fn seq(&self, slot: usize) -> u64 {
        match &self.wide {
            Some(whole) => whole[slot],
            None => self.base + self.slots[slot].offset as u64,
        }
    }
    pub(crate) fn seqs(&self) -> Vec<u64> {
        (0..self.slots.len()).map(|slot| self.seq(slot)).collect()
    }
    pub(crate) fn digests(&self) -> Vec<[u8; 8]> {
        self.slots.iter().map(|s| s.digest).collect()
    }
    pub(crate) fn decision(&self, slot: usize) -> Option<&Decision> {
        self.decisions.as_ref()?.get(&slot)
    }
    pub(crate) fn decisions(&self) -> impl Iterator<Item = (&usize, &Decision)> {
        self.decisions.iter().flat_map(|d| d.iter())
    }
    pub(super) fn find(&self, seq: u64, digest: &[u8; 8]) -> Option<usize> {
        if let Some(whole) = &self.wide {
            return (0..self.slots.len()).find(|&i| whole[i] == seq && &self.slots[i].digest == digest);
        }
        let offset = u16::try_from(seq.checked_sub(self.base)?).ok()?;
        (0..self.slots.len()).find(|&i| self.slots[i].offset == offset && &self.slots[i].digest == digest)
    }
    /// Offsets from the lowest seq held, when the seqs span no more than an offset reaches
    /// (the side table of whole seqs goes).
    fn narrow(&mut self) {
        let Some(whole) = &self.wide else { return };
        let held = &whole[..self.slots.len()];
        let (Some(&low), Some(&high)) = (held.iter().min(), held.iter().max()) else {
            self.wide = None;
            return;
        };
        if high - low > u16::MAX as u64 {
            return;
        }
        for (slot, &seq) in self.slots.iter_mut().zip(held) {
            slot.offset = (seq - low) as u16;
        }
        self.base = low;
        self.wide = None;
    }
    /// `seq` into `slot` (which holds the oldest event or is the next one past the end).
    fn place(&mut self, slot: usize, seq: u64) {
        if self.wide.is_none() {
            if self.slots.len() == 1 && slot == 0 {
                self.base = seq; // the only event held: it sets the base
            }
            if let Some(offset) = seq.checked_sub(self.base).and_then(|o| u16::try_from(o).ok()) {
                self.slots[slot].offset = offset;
                return;
            }
            // Out of reach of the base: every seq whole for a moment, then offsets again from
            // the lowest held if they now span little enough.
            let mut whole = Box::new([0; RETRY_WINDOW]);
            for (i, s) in whole.iter_mut().enumerate().take(self.slots.len()) {
                *s = self.base + self.slots[i].offset as u64;
            }
            self.wide = Some(whole);
        }
        if let Some(whole) = self.wide.as_mut() {
            whole[slot] = seq;
        }
        self.narrow();
    }
    pub(super) fn remember(&mut self, seq: u64, digest: [u8; 8], decision: Option<Decision>) {
        let slot = self.next_slot as usize;
        let remembered = Slot { offset: 0, digest };
        if slot == self.slots.len() {
            if self.slots.len() == self.slots.capacity() {
                // Grown to twice (at most the window), exactly: a Vec's own growth could overshoot it.
                let target = (self.slots.capacity() * 2).clamp(4, RETRY_WINDOW);
                self.slots.reserve_exact(target - self.slots.len());
            }
            self.slots.push(remembered);
        } else {
            self.slots[slot] = remembered;
        }
        self.place(slot, seq);
        match decision {
            None => {
                if let Some(decisions) = self.decisions.as_mut() {
                    decisions.remove(&slot);
                    if decisions.is_empty() {
                        self.decisions = None;
                    }
                }
            }
            Some(d) => {
                self.decisions.get_or_insert_with(Default::default).insert(slot, d);
            }
        }
        self.next_slot = ((slot + 1) % RETRY_WINDOW) as u8;
        self.unsaved = (self.unsaved as usize + 1).min(RETRY_WINDOW) as u8;
    }
}

/// What an event says (not its seq), as 8 bytes: retries.py's `content_digest`, byte for byte:
/// XXH3-64 (seed 0) over kind, tool, params, the tool call id when it has one, result or error,
/// each text preceded by its UTF-8 length as 8 big-endian bytes, written big-endian. The call id
/// is content: a client that numbers every call `seq 1` but names each call afresh sends new
/// events, not retries (without it, its first ALLOW came back for ever and no loop was blocked). The retry window is part of a run's
/// persisted state, so both engines take the same digest (tests/reference/xxh3.py is the
/// oracle's plain-Python XXH3).
///
/// Why XXH3 and not sha256: this digest is ours (no spec defines it), it hashes every event's
/// whole text, and a match also needs the same seq. It only has to tell a resent event from a
/// different one that reuses its seq, among a run's last 64; a client does not choose its
/// content to collide with its own earlier event, so a non-cryptographic 64-bit hash is as
/// safe here as a truncated sha256 (2^-64 per such event) at ~15x the speed: sha256 on the
/// CPU's SHA extensions was 15.6% of the core's time on grpc_bench's traffic.
struct ContentHash(xxhash_rust::xxh3::Xxh3);

impl ContentHash {
    fn new() -> ContentHash {
        ContentHash(xxhash_rust::xxh3::Xxh3::new())
    }
    fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    fn text(&mut self, text: &str) {
        self.update(&(text.len() as u64).to_be_bytes());
        self.update(text.as_bytes());
    }
    /// A call id only when there is one, so an event without ids keeps the digest it had.
    fn call_id(&mut self, id: &str) {
        if !id.is_empty() {
            self.update(b"i");
            self.text(id);
        }
    }
    fn finish(self) -> [u8; 8] {
        self.0.digest().to_be_bytes()
    }
}

pub fn content_digest(kind: &Option<pb::event::Kind>) -> [u8; 8] {
    content_digest_of(&kind_ref(kind))
}

/// `content_digest` of an event however it was read.
pub fn content_digest_of(kind: &Option<KindRef>) -> [u8; 8] {
    let mut h = ContentHash::new();
    match kind {
        // The class a caller sends is what it knows of the tool, not the event's content.
        Some(KindRef::ToolCall { tool_name, tool_call_id, params_json, .. }) => {
            h.update(b"c");
            h.text(tool_name);
            h.text(params_json);
            h.call_id(tool_call_id);
        }
        // A duration is how long the call took, not what it returned: a resend may carry another.
        Some(KindRef::ToolOutcome { tool_name, tool_call_id, params_json, outcome, .. }) => {
            h.update(b"o");
            h.text(tool_name);
            h.text(params_json);
            h.call_id(tool_call_id);
            match outcome {
                Some(OutcomeRef::Error(e)) => {
                    h.update(b"e");
                    h.text(e);
                }
                Some(OutcomeRef::ResultJson(r)) => {
                    h.update(b"r");
                    h.text(r);
                }
                None => h.update(b"-"),
            }
        }
        Some(KindRef::CompactionRetry) => h.update(b"k"),
        Some(KindRef::UserTurn { prompt_id }) => {
            h.update(b"u");
            h.text(prompt_id);
        }
        Some(KindRef::Usage { input_tokens, output_tokens, cost_usd, model }) => {
            h.update(b"g");
            h.update(&input_tokens.to_le_bytes());
            h.update(&output_tokens.to_le_bytes());
            h.update(&cost_usd.to_bits().to_le_bytes());
            h.text(model);
        }
        Some(KindRef::Approval { tool_call_id, decision_id, approved, scope, ttl_seconds }) => {
            h.update(b"a");
            h.text(tool_call_id);
            h.text(decision_id);
            h.update(&[*approved as u8]);
            h.update(&scope.to_le_bytes());
            h.update(&ttl_seconds.to_le_bytes());
        }
        Some(KindRef::ModelOutput { text, text_digest, output_kind, usage, stop_hook_active }) => {
            h.update(b"m");
            h.text(text);
            h.text(text_digest);
            h.update(&output_kind.to_le_bytes());
            h.update(&[*stop_hook_active as u8]);
            match usage {
                Some(u) => {
                    h.update(b"g");
                    h.update(&u.input_tokens.to_le_bytes());
                    h.update(&u.output_tokens.to_le_bytes());
                    h.update(&u.cost_usd.to_bits().to_le_bytes());
                    h.text(u.model);
                }
                None => h.update(b"-"),
            }
        }
        _ => h.update(b"x"),
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Action, Detector, Settings};
    use crate::service::{counter, Config, Core, Limits, Summary};

    fn call(tool: &str, params: &str) -> Option<pb::event::Kind> {
        Some(pb::event::Kind::ToolCall(pb::ToolCall { tool_name: tool.into(), params_json: params.into(), ..Default::default() }))
    }

    fn outcome(result: Option<&str>, error: Option<&str>) -> Option<pb::event::Kind> {
        let outcome = match (result, error) {
            (_, Some(e)) => Some(pb::tool_outcome::Outcome::Error(e.into())),
            (Some(r), None) => Some(pb::tool_outcome::Outcome::ResultJson(r.into())),
            (None, None) => None,
        };
        Some(pb::event::Kind::ToolOutcome(pb::ToolOutcome {
            tool_name: "fetch".into(), params_json: r#"{"url": "x"}"#.into(), tool_call_id: String::new(), outcome, duration_ms: 0,
        }))
    }

    /// retries.py's content_digest of the same events, computed by the reference engine (its
    /// plain-Python XXH3): the window is persisted and read by either engine.
    #[test]
    fn content_digest_is_the_python_engines() {
        let hex = |d: [u8; 8]| crate::engine::hex(&d);
        assert_eq!(hex(content_digest(&call("fetch", r#"{"url": "x"}"#))), "5b6ef9e212c25d04");
        assert_eq!(hex(content_digest(&outcome(Some(r#""ok""#), None))), "8eddf29004724497");
        assert_eq!(hex(content_digest(&outcome(None, Some("boom")))), "93b4db7e8f78e52a");
        assert_eq!(hex(content_digest(&outcome(None, None))), "a24fe6826f23ab43");
        assert_eq!(hex(content_digest(&Some(pb::event::Kind::CompactionRetry(pb::CompactionRetry {})))), "a921e3704fda881d");
        assert_eq!(hex(content_digest(&Some(pb::event::Kind::RunEnd(pb::RunEnd {})))), "eaf06c6480b2cd11");
        let turn = |id: &str| Some(pb::event::Kind::UserTurn(pb::UserTurn { prompt_id: id.into() }));
        assert_eq!(hex(content_digest(&turn(""))), "9cbcb82826676cd0");
        assert_eq!(hex(content_digest(&turn("p-1"))), "3c84dc299bfe8b38");
        // A call id, when there is one, is content (the digests above, without one, stay).
        let with_id = |id: &str| Some(pb::event::Kind::ToolCall(pb::ToolCall {
            tool_name: "fetch".into(), params_json: r#"{"url": "x"}"#.into(), tool_call_id: id.into(), ..Default::default() }));
        assert_eq!(hex(content_digest(&with_id("call-1"))), "d5d602adbe5d1b52");
        assert_eq!(hex(content_digest(&with_id(""))), "5b6ef9e212c25d04");
        let outcome_with_id = Some(pb::event::Kind::ToolOutcome(pb::ToolOutcome {
            tool_name: "fetch".into(), params_json: r#"{"url": "x"}"#.into(), tool_call_id: "call-1".into(),
            outcome: Some(pb::tool_outcome::Outcome::ResultJson(r#""ok""#.into())), duration_ms: 0 }));
        assert_eq!(hex(content_digest(&outcome_with_id)), "b40b48baceff2c6b");
        // Past 240 bytes (XXH3's long path, several 1,024-byte blocks) and multi-byte UTF-8.
        let long = format!(r#"{{"q": "{}"}}"#, "x".repeat(3000));
        assert_eq!(hex(content_digest(&call("fetch", &long))), "613127e9f0587ee2");
        let accents = format!(r#""{}""#, "é".repeat(700));
        assert_eq!(hex(content_digest(&outcome(Some(&accents), None))), "318da6207f9567ef");
    }

    /// Each text is length-prefixed, so moving bytes between fields changes the digest.
    #[test]
    fn content_digest_tells_fields_apart() {
        assert_ne!(content_digest(&call("ab", "c")), content_digest(&call("a", "bc")));
        assert_ne!(content_digest(&outcome(Some("x"), None)), content_digest(&outcome(None, Some("x"))));
    }

    fn plain(seq: u64) -> Decision {
        Decision { seq, run_id: "r".into(), verdict: crate::engine::Verdict::allow("t"), decision_id: format!("d-{seq}") }
    }

    #[test]
    fn the_window_is_a_ring_of_the_latest_events() {
        let mut retries = Retries::default();
        for seq in 1..=RETRY_WINDOW as u64 {
            retries.remember(seq, [seq as u8; 8], (seq == 1).then(|| plain(seq)));
        }
        assert_eq!(retries.find(1, &[1; 8]), Some(0));
        assert_eq!(retries.find(1, &[2; 8]), None, "same seq, other content");
        assert_eq!(retries.find(64, &[64; 8]), Some(63));
        assert_eq!(retries.decisions().count(), 1);

        // The 65th event takes the oldest slot, and the decision kept there goes with it.
        retries.remember(65, [65; 8], None);
        assert_eq!(retries.find(1, &[1; 8]), None);
        assert_eq!(retries.find(65, &[65; 8]), Some(0));
        assert_eq!(retries.decisions().count(), 0);
        assert_eq!(retries.next_slot, 1);
    }

    #[test]
    fn seqs_of_any_spread_are_remembered_whole() {
        let mut retries = Retries::for_history(30);
        let far = (7u64 << 32) | 5;
        retries.remember(1_000, [1; 8], None);
        retries.remember(900, [2; 8], None); // below the base: the base moves down
        assert!(retries.wide.is_none());
        retries.remember(far, [3; 8], None); // out of any offset's reach: whole seqs
        assert!(retries.wide.is_some());
        assert_eq!(retries.find(1_000, &[1; 8]), Some(0));
        assert_eq!(retries.find(900, &[2; 8]), Some(1));
        assert_eq!(retries.find(far, &[3; 8]), Some(2));
        assert_eq!(retries.find(far + 65_536, &[3; 8]), None, "another seq, same content");
        assert_eq!(retries.seqs(), vec![1_000, 900, far]);
        let back = Retries::from_parts(&retries.seqs(), &retries.digests(), HashMap::new(), 3, 3);
        assert_eq!((back.seqs(), back.find(far, &[3; 8]), back.next_slot), (vec![1_000, 900, far], Some(2), 3));

        // Once the far seq leaves the window, its seqs are offsets again.
        for seq in 2_000..2_000 + RETRY_WINDOW as u64 {
            retries.remember(seq, [4; 8], None);
        }
        assert!(retries.wide.is_none());
        assert_eq!(retries.find(far, &[3; 8]), None);
        assert_eq!(retries.find(2_000, &[4; 8]), Some(3));
        assert_eq!(retries.find(2_063, &[4; 8]), Some(2));
        assert_eq!(retries.seqs().len(), RETRY_WINDOW);
        assert_eq!(retries.slots.capacity(), RETRY_WINDOW, "grown exactly to the window");
        let narrow = Retries::from_parts(&[3, 9], &[[1; 8], [2; 8]], HashMap::new(), 2, 0);
        assert_eq!((narrow.wide.is_none(), narrow.base, narrow.find(9, &[2; 8]), narrow.find(8, &[2; 8])), (true, 3, Some(1), None));
    }

    fn core() -> Core {
        let settings = Settings { enabled: Some(true), warning_threshold: 2, critical_threshold: 4, ..Default::default() };
        Core::new(Config { default: settings, ..Default::default() }, Limits::default(), 100, 3600.0, "test".into(), vec![])
    }

    fn send(core: &mut Core, seq: u64, kind: Option<pb::event::Kind>, summary: &mut Summary) -> Decision {
        let event = pb::Event { run_id: "run-1".into(), seq, kind, ..Default::default() };
        core.evaluate_event(&event, "t", 1.0, summary)
    }

    fn history_len(core: &Core) -> usize {
        core.store.get("t", "run-1").unwrap().state.history().len()
    }

    #[test]
    fn a_resend_gets_the_earlier_verdict_and_changes_nothing() {
        let mut core = core();
        let mut summary = Summary::default();
        let fetch = || call("fetch", r#"{"url": "x"}"#);
        assert_eq!(send(&mut core, 1, fetch(), &mut summary).verdict.action, Action::Allow);
        assert_eq!(send(&mut core, 2, fetch(), &mut summary).verdict.action, Action::Allow);
        let first = send(&mut core, 3, fetch(), &mut summary);
        assert_eq!((first.verdict.action, first.verdict.detector, first.verdict.count), (Action::Warn, Detector::GenericRepeat, 2));
        assert_eq!(first.decision_id, "test-1");
        assert_eq!(history_len(&core), 3);

        let mut summary = Summary::default();
        let again = send(&mut core, 3, fetch(), &mut summary);
        assert_eq!((again.verdict.action, again.verdict.detector, again.verdict.count), (Action::Warn, Detector::GenericRepeat, 2));
        assert_eq!(again.decision_id, "test-1", "the same decision, id included");
        assert_eq!(history_len(&core), 3, "the run's state is not touched twice");
        assert_eq!(core.store.get("t", "run-1").unwrap().events_evaluated, 3);
        assert!(summary.counters.iter().any(|c| c.0 == counter::RETRIED && c.3 == 1));

        // A plain ALLOW is not kept but rebuilt, and changes nothing either.
        let again = send(&mut core, 2, fetch(), &mut summary);
        assert_eq!((again.verdict.action, again.verdict.tool_name.as_str(), again.decision_id.as_str()), (Action::Allow, "fetch", ""));
        assert_eq!(history_len(&core), 3);
    }

    #[test]
    fn the_same_seq_with_other_content_is_evaluated_again() {
        let mut core = core();
        let mut summary = Summary::default();
        for seq in 1..=3 {
            send(&mut core, seq, call("fetch", r#"{"url": "x"}"#), &mut summary);
        }
        let other = send(&mut core, 3, call("fetch", r#"{"url": "y"}"#), &mut summary);
        assert_eq!(other.verdict.action, Action::Allow, "new arguments: a new call");
        assert_eq!(history_len(&core), 4);
        let repeat = send(&mut core, 4, call("fetch", r#"{"url": "x"}"#), &mut summary);
        assert_eq!((repeat.verdict.action, repeat.verdict.count), (Action::Warn, 3), "and x's third repeat counts as one");
        assert!(!summary.counters.iter().any(|c| c.0 == counter::RETRIED));
    }

    #[test]
    fn a_retried_user_turn_is_answered_from_the_window_not_applied_twice() {
        let mut core = core();
        let mut summary = Summary::default();
        let turn = |id: &str| Some(pb::event::Kind::UserTurn(pb::UserTurn { prompt_id: id.into() }));
        for seq in 1..=2 {
            send(&mut core, seq, call("fetch", r#"{"url": "x"}"#), &mut summary);
        }
        assert_eq!(send(&mut core, 3, turn("p-1"), &mut summary).verdict.action, Action::Allow);
        assert_eq!(history_len(&core), 0, "the turn cleared the history");
        send(&mut core, 4, call("fetch", r#"{"url": "x"}"#), &mut summary);
        let mut summary = Summary::default();
        assert_eq!(send(&mut core, 3, turn("p-1"), &mut summary).verdict.action, Action::Allow);
        assert_eq!(history_len(&core), 1, "the resent turn is not applied again");
        assert!(summary.counters.iter().any(|c| c.0 == counter::RETRIED && c.3 == 1));
        // The same seq with another prompt is a new turn.
        send(&mut core, 3, turn("p-2"), &mut summary);
        assert_eq!(history_len(&core), 0);
    }

    #[test]
    fn seq_zero_is_never_a_retry() {
        let mut core = core();
        let mut summary = Summary::default();
        for _ in 0..3 {
            send(&mut core, 0, call("fetch", r#"{"url": "x"}"#), &mut summary);
        }
        assert_eq!(history_len(&core), 3);
        assert!(core.store.get("t", "run-1").unwrap().retries.is_none(), "no window without a seq");
    }
}
