//! What the engine remembers about a run between events: its history of records, the warning
//! keys already announced, the post-compaction guard, the abort it ended in, the run-wide set
//! of outcomes seen and what the detectors of loops without tool calls count. Its own module because both the engine and the state store (`crate::stored`)
//! read and write it, and its layout is tuned for memory (76-byte records, boxed rare fields).

use std::collections::{HashSet, VecDeque};

use crate::carried_gen::Carried;
use crate::fingerprint::{ERROR, PENDING};
use crate::intern::{canonical, spelling_id, tool_id, tool_name, ExtraHandle, OVERFLOW};
pub use crate::intern::RecordExtra;

use super::Verdict;

/// Bound of `RunState::announced` (the oldest key goes first).
pub const MAX_ANNOUNCED_KEYS: usize = 512;
/// Bound of `RunState::seen_triples` (past it, new triples are not remembered).
pub const MAX_SEEN_TRIPLES: usize = 4096;
/// Bound of `RunState::side_effects` (the oldest goes first).
pub const MAX_SIDE_EFFECTS: usize = 256;

/// A tool name as records compare it: its interned id (OVERFLOW: compare names) and the name,
/// both normalised; and the id of the host's spelling a new record keeps (`spelled`: `Bash`
/// where `name` is `exec`; `id` itself when they agree or the spelling could not be kept).
#[derive(Clone, Copy)]
pub struct Tool<'a> {
    pub id: u16,
    pub name: &'a str,
    pub spelled: u16,
}

impl<'a> Tool<'a> {
    pub fn new(name: &'a str) -> Tool<'a> {
        let id = tool_id(name);
        Tool { id, name, spelled: id }
    }
    /// `name` as the host spelled it (`spelling`): only a spelling that differs costs a lookup.
    pub fn spelled(name: &'a str, spelling: &str) -> Tool<'a> {
        let id = tool_id(name);
        let spelled = if spelling == name { id } else { spelling_id(spelling, id) };
        Tool { id, name, spelled }
    }
}

/// The name a host sent, as messages and InspectRun show it: trimmed as normalisation trims it;
/// a blank one is the normalised name ("tool").
pub fn spelling_of<'a>(raw: &'a str, normalised: &'a str) -> &'a str {
    match raw.trim_matches(crate::json::py_isspace) {
        "" => normalised,
        trimmed => trimmed,
    }
}

/// One history record: 76 bytes (the seq's low 32 bits, the tool an interned u16 id, the rare
/// fields behind a u32 handle, among them a seq's high half), so a full default history of 30
/// is 2,280 bytes.
#[derive(Clone)]
pub struct Record {
    /// The low half of the seq (`seq()`); the high half, when not 0, is in the extras.
    seq: u32,
    pub args: [u8; 32],
    pub result: [u8; 32],
    /// The id of the tool as the host spelled it; matching uses `canonical` of it.
    tool: u16,
    pub status: u8,
    /// Batch links, progress and weak evidence (engine::batches: LINK_*, NEW_TRIPLE, INCONCLUSIVE); 0 unless
    /// parallelBatches, criticalScope "batch", progressResetsRepeats or sameOutcome is on.
    pub flags: u8,
    /// Rare: a pending call's id, the missing tool an error named, a tool name without an id.
    extra: ExtraHandle,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("seq", &self.seq())
            .field("tool", &self.tool())
            .field("args", &hex(&self.args))
            .field("result", &hex(&self.result))
            .field("status", &self.status)
            .field("flags", &self.flags)
            .field("extra", &self.extra.get())
            .finish()
    }
}

impl Record {
    /// A record as the engine makes one (`tool`: the normalised name).
    pub fn new(seq: u64, tool: &str, args: [u8; 32], result: [u8; 32], status: u8, call_id: Option<&str>,
               unknown: Option<&str>) -> Record {
        Record::of(seq, Tool::new(tool), args, result, status, call_id, unknown)
    }
    pub(crate) fn of(seq: u64, tool: Tool, args: [u8; 32], result: [u8; 32], status: u8, call_id: Option<&str>,
          unknown: Option<&str>) -> Record {
        let id = if tool.id == OVERFLOW { OVERFLOW } else { tool.spelled };
        let mut r = Record { seq: seq as u32, args, result, tool: id, status, flags: 0, extra: ExtraHandle::default() };
        let own_name = (tool.id == OVERFLOW).then(|| tool.name.into());
        r.extra = ExtraHandle::new(RecordExtra {
            call_id: call_id.map(Into::into), unknown: unknown.map(Into::into), tool: own_name, failure: None,
            seq_high: (seq >> 32) as u32, carried: Default::default(),
        });
        r
    }
    /// The seq of the event that formed the record (its low half here; a high half, rare, in the extras).
    #[inline]
    pub fn seq(&self) -> u64 {
        let high = if self.extra.is_some() { self.extra.get().map_or(0, |e| e.seq_high) } else { 0 };
        (high as u64) << 32 | self.seq as u64
    }
    /// The normalised name (what matching, keys and hashes use).
    pub fn tool(&self) -> &str {
        if self.tool == OVERFLOW {
            return self.extra.get().and_then(|e| e.tool.as_deref()).unwrap_or("");
        }
        tool_name(canonical(self.tool)).unwrap_or("")
    }
    /// The name as the host spelled it in the call that formed the record (messages, InspectRun);
    /// the normalised name when the spelling was not kept (past the name table's bound).
    pub fn spelling(&self) -> &str {
        if self.tool == OVERFLOW {
            return self.tool();
        }
        tool_name(self.tool).unwrap_or("")
    }
    /// Is this a record of `tool`? (An id comparison, but for names past the table's bound.)
    #[inline]
    pub fn is_tool(&self, tool: Tool) -> bool {
        self.canonical_id() == tool.id && (tool.id != OVERFLOW || self.tool() == tool.name)
    }
    #[inline]
    pub fn same_tool(&self, other: &Record) -> bool {
        let id = self.canonical_id();
        id == other.canonical_id() && (id != OVERFLOW || self.tool() == other.tool())
    }
    #[inline]
    fn canonical_id(&self) -> u16 {
        canonical(self.tool)
    }
    pub fn call_id(&self) -> Option<&str> {
        self.extra.get().and_then(|e| e.call_id.as_deref())
    }
    pub fn unknown(&self) -> Option<&str> {
        self.extra.get().and_then(|e| e.unknown.as_deref())
    }
    /// Completing a pending call: its id goes, the missing tool an error named comes, what it
    /// carries stays.
    pub(crate) fn complete(&mut self, unknown: Option<&str>) {
        let (seq_high, carried) = self.extra.get().map_or((0, Carried::default()), |e| (e.seq_high, e.carried));
        if self.tool != OVERFLOW && unknown.is_none() && seq_high == 0 && carried.is_empty() {
            self.extra = ExtraHandle::default();
            return;
        }
        let tool = self.extra.get().and_then(|e| e.tool.clone());
        self.extra = ExtraHandle::new(RecordExtra { call_id: None, unknown: unknown.map(Into::into), tool, failure: None, seq_high,
                                                    carried });
    }
    /// The ToolCall fields the record carries into InspectRun (carried_gen.rs).
    pub fn carried(&self) -> Carried {
        if !self.extra.is_some() {
            return Carried::default();
        }
        self.extra.get().map_or_else(Carried::default, |e| e.carried)
    }
    /// Sets what the record carries, keeping the other extras.
    pub fn set_carried(&mut self, carried: Carried) {
        if carried == self.carried() {
            return;
        }
        let mut extra = self.extra.get().cloned().unwrap_or_default();
        extra.carried = carried;
        self.extra = ExtraHandle::new(extra);
    }
    /// The identity of the terminal exec failure this record ended in (execFailureStreak).
    pub fn failure_key(&self) -> Option<&[u8; 32]> {
        self.extra.get().and_then(|e| e.failure.as_deref())
    }
    /// Sets (or clears) the failure identity, keeping the other extras.
    pub fn set_failure_key(&mut self, failure: Option<[u8; 32]>) {
        if failure.is_none() && self.failure_key().is_none() {
            return;
        }
        let mut extra = self.extra.get().cloned().unwrap_or_default();
        extra.failure = failure.map(Box::new);
        self.extra = ExtraHandle::new(extra);
    }
}

/// (tool, args digest, result status, result digest) of one observed outcome.
pub type Triple = (Box<str>, [u8; 32], u8, [u8; 32]);

#[derive(Clone, Debug)]
pub struct Guard {
    pub window_size: u32,
    pub observed: u32,
    pub first: Option<Triple>,
    pub all_identical: bool,
    pub seqs: Vec<u64>,
}

/// A call of a mutating tool, as duplicate_side_effect remembers it for the whole run (not only
/// the history window): pending until its outcome says it succeeded; a failed one is forgotten.
#[derive(Clone, Debug, PartialEq)]
pub struct SideEffect {
    pub tool: Box<str>,
    pub args: [u8; 32],
    pub seq: u64,
    pub call_id: Option<Box<str>>,
    pub succeeded: bool,
}

#[derive(Clone, Debug, Default)]
pub struct RunState {
    pub capacity: usize,
    /// Private: every change goes through the methods below, which keep `unsaved` true to it.
    history: VecDeque<Record>,
    /// Transient, never persisted: which records changed since the state store's last full
    /// record of the run, so a flush can write only those (service/persist.rs: deltas).
    unsaved: Unsaved,
    /// What most runs never have (warnings announced, the guard, an abort, the run-wide set of
    /// outcomes, side effects, batches, asks), in one box: 8 bytes in every run, not 56.
    rare: Option<Box<Rare>>,
    pub blocks: u32,
    pub no_new_streak: u32,
    /// Transient, never persisted: the batch key of the event being evaluated (the service sets
    /// it from ToolCall.batch_id or the EvaluateRequest; 0: none).
    pub incoming_batch: u64,
    /// What the incoming tool call carries into its record, set by the service like `incoming_batch`.
    pub incoming_carried: Carried,
}

/// A run's rare parts (`RunState::rare`): each None until the run needs it.
#[derive(Clone, Debug, Default)]
pub struct Rare {
    pub announced: Option<Box<Vec<(String, u32)>>>,
    pub guard: Option<Box<Guard>>,
    pub abort: Option<Box<Verdict>>,
    pub seen_triples: Option<Box<HashSet<u64>>>,
    /// duplicate_side_effect's memory (None unless it is on and a mutating tool was called).
    pub side_effects: Option<Box<Vec<SideEffect>>>,
    /// The run's current batch (engine::batches); None until batches are tracked.
    pub batch: Option<Box<super::batches::Batch>>,
    /// Pending asks and denied patterns (engine::ask); None unless an ASK was given.
    pub asks: Option<Box<super::ask::Asks>>,
    /// The detectors of loops without tool calls' memory (engine::output_memory); None unless
    /// one of them is on and the run sent a model output or a compaction.
    pub outputs: Option<Box<super::output_memory::OutputMemory>>,
}

static NO_RARE: Rare =
    Rare { announced: None, guard: None, abort: None, seen_triples: None, side_effects: None, batch: None, asks: None, outputs: None };

/// How the history differs from the one last saved in full (a *base*): `dropped` records of the
/// base left at the front, and every record from index `from` on is new or changed. History only
/// loses records at the front and gains them at the back, so `history[..from]` is exactly
/// `base[dropped..dropped + from]` and a delta need only carry `history[from..]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsaved {
    pub dropped: u32,
    /// u32::MAX: nothing changed or added since the base.
    pub from: u32,
}

impl Default for Unsaved {
    fn default() -> Self {
        Unsaved { dropped: 0, from: u32::MAX }
    }
}

impl RunState {
    pub fn new(capacity: usize) -> RunState {
        RunState { capacity, history: VecDeque::with_capacity(capacity.min(64)), ..Default::default() }
    }

    /// A state with this history (a stored run read back); its change mark says "nothing saved".
    pub fn with_history(capacity: usize, history: VecDeque<Record>) -> RunState {
        RunState { capacity, history, unsaved: Unsaved { dropped: 0, from: 0 }, ..Default::default() }
    }

    /// The run's rare parts (all None when it has none).
    #[inline]
    pub fn rare(&self) -> &Rare {
        self.rare.as_deref().unwrap_or(&NO_RARE)
    }
    /// The rare parts to change (made when the run has none: only to set one).
    pub fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Default::default)
    }
    /// The rare parts to change, when the run has any (to clear or update one).
    #[inline]
    pub fn rare_if_any(&mut self) -> Option<&mut Rare> {
        self.rare.as_deref_mut()
    }
    /// Rare parts put in whole (a stored run read back, a merge): none kept when all are None.
    pub fn set_rare(&mut self, rare: Rare) {
        let none = rare.announced.is_none() && rare.guard.is_none() && rare.abort.is_none() && rare.seen_triples.is_none()
            && rare.side_effects.is_none() && rare.batch.is_none() && rare.asks.is_none() && rare.outputs.is_none();
        self.rare = if none { None } else { Some(Box::new(rare)) };
    }
    /// The rare parts taken out (a merge), none left.
    pub fn take_rare(&mut self) -> Rare {
        self.rare.take().map(|r| *r).unwrap_or_default()
    }

    pub fn history(&self) -> &VecDeque<Record> {
        &self.history
    }

    /// The record at `index`, to change in place (an outcome filling a pending call, a flag).
    pub(crate) fn record_mut(&mut self, index: usize) -> &mut Record {
        self.changed_from(index);
        &mut self.history[index]
    }

    pub(crate) fn append(&mut self, record: Record) {
        while self.history.len() >= self.capacity && !self.history.is_empty() {
            self.pop_front();
        }
        self.changed_from(self.history.len());
        self.history.push_back(record);
    }

    pub(crate) fn resize(&mut self, capacity: usize) {
        while self.history.len() > capacity {
            self.pop_front();
        }
        self.capacity = capacity;
    }

    pub(crate) fn clear_history(&mut self) {
        self.history.clear();
        self.unsaved.from = 0;
    }

    /// The history taken out (a merge rebuilds it): nothing left counts as saved.
    pub(crate) fn take_history(&mut self) -> VecDeque<Record> {
        self.unsaved.from = 0;
        std::mem::take(&mut self.history)
    }

    /// A history rebuilt as a whole (a merge): nothing of it counts as saved.
    pub(crate) fn replace_history(&mut self, history: VecDeque<Record>) {
        self.history = history;
        self.unsaved.from = 0;
    }

    fn pop_front(&mut self) {
        self.history.pop_front();
        self.unsaved.dropped = self.unsaved.dropped.saturating_add(1);
        if self.unsaved.from != u32::MAX {
            self.unsaved.from = self.unsaved.from.saturating_sub(1);
        }
    }

    fn changed_from(&mut self, index: usize) {
        self.unsaved.from = self.unsaved.from.min(index as u32);
    }

    /// Records unchanged since the base: (records of the base dropped at the front, how many of
    /// the base's follow unchanged at the front of the history).
    pub fn unsaved(&self) -> (usize, usize) {
        (self.unsaved.dropped as usize, (self.unsaved.from as usize).min(self.history.len()))
    }

    /// Whether a warning of `key` at `count` is announced: the first of its pattern in the run,
    /// then the first of each new decade of its count (spec section 6); remembered here.
    pub(crate) fn announce(&mut self, key: &str, count: u32) -> bool {
        let decade = count / 10;
        let announced = self.rare_mut().announced.get_or_insert_with(Default::default);
        if let Some(entry) = announced.iter_mut().find(|(k, _)| k == key) {
            if decade <= entry.1 {
                return false;
            }
            entry.1 = decade;
            return true;
        }
        if announced.len() >= MAX_ANNOUNCED_KEYS {
            announced.remove(0);
        }
        announced.push((key.to_string(), decade));
        true
    }

    /// The history as it is now is the base (it was just saved in full).
    pub fn mark_saved(&mut self) {
        self.unsaved = Unsaved::default();
    }

    /// The history is `base[dropped..dropped + kept]` followed by new records (a run restored
    /// from a base and a delta: its next delta is still counted from that base).
    pub fn mark_unsaved(&mut self, dropped: usize, kept: usize) {
        self.unsaved = Unsaved { dropped: dropped as u32, from: kept as u32 };
    }
}

/// Digest equality as four machine words (history scans compare digests more than anything).
#[inline]
pub fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let word = |d: &[u8; 32], i: usize| u64::from_ne_bytes([d[i], d[i + 1], d[i + 2], d[i + 3], d[i + 4], d[i + 5], d[i + 6], d[i + 7]]);
    word(a, 0) == word(b, 0) && word(a, 8) == word(b, 8) && word(a, 16) == word(b, 16) && word(a, 24) == word(b, 24)
}

pub fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

pub fn args_hash_text(tool: &str, digest: &[u8; 32]) -> String {
    format!("{tool}:{}", hex(digest))
}

pub fn result_hash_text(status: u8, digest: &[u8; 32]) -> Option<String> {
    match status {
        PENDING => None,
        ERROR => Some(format!("error:{}", hex(digest))),
        _ => Some(hex(digest)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::RESULT;

    #[test]
    fn a_record_keeps_a_seq_past_32_bits_whole() {
        let wide = (3u64 << 32) | 7;
        let mut pending = Record::new(wide, "read", [1; 32], [0; 32], PENDING, None, None);
        assert_eq!((pending.seq(), std::mem::size_of::<Record>()), (wide, 76));
        pending.complete(None);
        pending.set_failure_key(Some([2; 32]));
        assert_eq!(pending.seq(), wide, "completing a call keeps its seq");
        let copy = pending.clone();
        assert_eq!((copy.seq(), copy.failure_key()), (wide, Some(&[2; 32])));
        let narrow = Record::new(7, "read", [1; 32], [3; 32], RESULT, Some("c1"), None);
        assert_eq!((narrow.seq(), narrow.call_id()), (7, Some("c1")));
    }
}
