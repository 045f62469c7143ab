//! What `service.py`, `store.py` and `retries.py` do per event, on raw protobuf: envelope
//! limits, the run store (LRU over all runs, idle TTL, eviction reasons), idempotent retries,
//! decision ids, and the per-request summary Python turns into metrics and decision log lines.
//!
//! Design. The store is a slab of runs with an intrusive doubly linked LRU list through it and
//! a hash map from a (tenant, run_id) hash to the run's slot: the list's head is the least
//! recently used run, so both the max-runs eviction and idle expiry pop from the front without
//! scanning live runs, and every per-event operation is O(1) in the number of runs. The Python
//! store shards its OrderedDicts by crc32 to get the same total order; one list gives it directly. Python
//! calls in from its one event loop thread, holding the GIL, so no lock is needed. An evicted or
//! ended run is gone entirely: a later event with its id starts from zero.

use std::collections::{HashMap, HashSet, VecDeque};

use prost::Message;

use crate::engine::{evaluate, hex, Action, Event, RunState, Settings, Verdict};
use crate::fingerprint::Catalog;
use crate::json::py_isspace;
use crate::pb;

pub const RECENT_DECISIONS: usize = 10;
pub const RETRY_WINDOW: usize = 64;

#[derive(Clone, Debug)]
pub struct Limits {
    pub max_params_bytes: usize,
    pub max_result_bytes: usize,
    pub max_run_id_chars: usize,
    pub max_tool_name_chars: usize,
    pub max_agent_id_chars: usize,
    pub max_session_id_chars: usize,
    pub max_tool_call_id_chars: usize,
    pub max_json_depth: usize,
    pub max_events_per_request: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_params_bytes: 1 << 20,
            max_result_bytes: 1 << 20,
            max_run_id_chars: 256,
            max_tool_name_chars: 256,
            max_agent_id_chars: 256,
            max_session_id_chars: 256,
            max_tool_call_id_chars: 256,
            max_json_depth: 64,
            max_events_per_request: 1000,
        }
    }
}

/// The compiled config: settings per agent id, the defaults, the tool catalog.
#[derive(Default)]
pub struct Config {
    pub default: Settings,
    pub agents: HashMap<String, Settings>,
    pub catalog: Catalog,
}

impl Config {
    fn settings_for(&self, agent_id: &str) -> &Settings {
        self.agents.get(agent_id).unwrap_or(&self.default)
    }
    pub fn agent_label<'a>(&self, agent_id: &'a str) -> &'a str {
        let agent = agent_id.trim_matches(py_isspace);
        if self.agents.contains_key(agent) { agent } else { "default" }
    }
}

#[derive(Clone)]
pub struct Decision {
    pub seq: u64,
    pub run_id: String,
    pub verdict: Verdict,
    pub decision_id: String,
}

#[derive(Default)]
pub(crate) struct Retries {
    pub(crate) seqs: Vec<u64>,
    pub(crate) digests: Vec<[u8; 8]>,
    pub(crate) decisions: HashMap<usize, Decision>,
    pub(crate) next_slot: usize,
}

impl Retries {
    fn find(&self, seq: u64, digest: &[u8; 8]) -> Option<usize> {
        (0..self.seqs.len()).find(|&i| self.seqs[i] == seq && &self.digests[i] == digest)
    }
    fn remember(&mut self, seq: u64, digest: [u8; 8], decision: Option<Decision>) {
        let slot = self.next_slot;
        if slot == self.seqs.len() {
            self.seqs.push(seq);
            self.digests.push(digest);
        } else {
            self.seqs[slot] = seq;
            self.digests[slot] = digest;
        }
        match decision {
            None => {
                self.decisions.remove(&slot);
            }
            Some(d) => {
                self.decisions.insert(slot, d);
            }
        }
        self.next_slot = (slot + 1) % RETRY_WINDOW;
    }
}

pub struct Entry {
    pub tenant: String,
    pub run_id: String,
    pub state: RunState,
    pub agent_id: String,
    pub session_id: String,
    last_seen: f64,
    touch: u64,
    pub events_evaluated: u64,
    recent: Option<VecDeque<Decision>>,
    retries: Option<Box<Retries>>,
    /// Changed since the last flush (only while a state store tracks changes).
    dirty: bool,
}

/// FNV-1a of (tenant, run_id): the map key, so a lookup allocates nothing; entries with the same
/// hash share a bucket and are told apart by their names.
fn key_hash(tenant: &str, run_id: &str) -> u64 {
    let mut hash: u64 = 0xcbf29ce484222325;
    for &b in tenant.as_bytes().iter().chain(&[0xFF]).chain(run_id.as_bytes()) {
        hash ^= b as u64;
        hash = hash.wrapping_mul(0x100000001b3);
    }
    hash
}

/// A slot of the store's slab: a run (None when free) and its links.
struct Slot {
    entry: Option<Entry>,
    /// LRU list, oldest first (NIL at either end).
    older: u32,
    newer: u32,
    /// Next slot whose key has the same hash (NIL ends the chain); for a free slot, the next free one.
    chain: u32,
}

const NIL: u32 = u32::MAX;

pub struct Store {
    pub max_runs: usize,
    pub idle_ttl: f64,
    /// Every run in one slab (no allocation per run beyond its own contents), with an intrusive
    /// doubly linked LRU list through it: touch, eviction and expiry are O(1) pointer swaps.
    slots: Vec<Slot>,
    /// Key hash -> first slot of the chain of runs with that hash.
    index: HashMap<u64, u32>,
    free: u32,
    oldest: u32,
    newest: u32,
    /// The slot found last: an event looks its run up several times, and this skips the hashing
    /// (atomic only so that the store is Sync, as a pyclass must be; there is one thread).
    last: std::sync::atomic::AtomicU32,
    touches: u64,
    size: usize,
    /// Change tracking for a state store (store.py's dirty dict): None when no store is set.
    changes: Option<Changes>,
}

/// Runs changed since the last flush. A changed run is flagged on its entry and its key listed
/// once (one allocation per run per flush interval, none per event); a run that ended, or was
/// evicted while evictions delete, is a key in `deleted`. A delete followed by a new run of the
/// same key is one write of the new run, as in store.py's dict (the write replaces the value).
struct Changes {
    listed: Vec<(String, String)>,
    flagged: usize,
    deleted: HashSet<(String, String)>,
    evictions_delete: bool,
}

pub type RunKey = (String, String);

impl Store {
    pub fn new(max_runs: usize, idle_ttl: f64) -> Store {
        Store {
            max_runs, idle_ttl, slots: Vec::new(), index: HashMap::new(), free: NIL, oldest: NIL, newest: NIL,
            last: std::sync::atomic::AtomicU32::new(NIL), touches: 0, size: 0, changes: None,
        }
    }
    pub fn track_changes(&mut self, evictions_delete: bool) {
        let changes = self.changes.get_or_insert_with(|| Changes { listed: Vec::new(), flagged: 0, deleted: HashSet::new(), evictions_delete });
        changes.evictions_delete = evictions_delete;
    }
    pub fn dirty_count(&self) -> usize {
        self.changes.as_ref().map_or(0, |c| c.flagged + c.deleted.len())
    }
    /// Flag the run in `slot` as changed (no-op without tracking or when already flagged).
    fn mark(&mut self, slot: u32) {
        let Some(changes) = self.changes.as_mut() else { return };
        let Some(entry) = self.slots[slot as usize].entry.as_mut() else { return };
        if entry.dirty {
            return;
        }
        entry.dirty = true;
        changes.flagged += 1;
        let key = (entry.tenant.clone(), entry.run_id.clone());
        if !changes.deleted.is_empty() {
            changes.deleted.remove(&key);
        }
        changes.listed.push(key);
    }
    fn mark_deleted(&mut self, tenant: &str, run_id: &str, eviction: bool) {
        if let Some(changes) = self.changes.as_mut() {
            if !eviction || changes.evictions_delete {
                changes.deleted.insert((tenant.to_string(), run_id.to_string()));
            }
        }
    }
    /// The runs changed since the last call, (key, still held), each once: deletes first, then
    /// the held runs in the order they first changed.
    pub fn take_dirty(&mut self) -> Vec<(RunKey, bool)> {
        let Some(changes) = self.changes.as_mut() else { return Vec::new() };
        let listed = std::mem::take(&mut changes.listed);
        let mut taken: Vec<(RunKey, bool)> = changes.deleted.drain().map(|k| (k, false)).collect();
        changes.flagged = 0;
        for key in listed {
            if let Some(entry) = self.get_mut(&key.0, &key.1) {
                if entry.dirty {
                    entry.dirty = false;
                    taken.push((key, true));
                }
            }
        }
        taken
    }
    /// Put back runs a failed flush did not write; a run changed again since keeps its mark.
    pub fn redirty(&mut self, items: Vec<(RunKey, bool)>) {
        if self.changes.is_none() {
            return;
        }
        for ((tenant, run_id), live) in items {
            if let Some(slot) = self.find(&tenant, &run_id) {
                self.mark(slot);
            } else if !live {
                self.mark_deleted(&tenant, &run_id, false);
            }
        }
    }
    /// No runs and no pending changes (tracking stays as it was).
    pub fn clear(&mut self) {
        let evictions_delete = self.changes.as_ref().map(|c| c.evictions_delete);
        *self = Store::new(self.max_runs, self.idle_ttl);
        if let Some(evictions_delete) = evictions_delete {
            self.track_changes(evictions_delete);
        }
    }
    /// Take in a stored run as most recently used, idle for `idle` seconds (store.py's restore:
    /// a held run of the same key is replaced; a full store evicts its least recently used run).
    pub(crate) fn restore(&mut self, mut entry: Entry, idle: f64, now: f64, evictions: &mut Vec<&'static str>) {
        if let Some(slot) = self.find(&entry.tenant, &entry.run_id) {
            self.release(slot);
        }
        if self.size >= self.max_runs && self.oldest != NIL {
            self.evict(self.oldest);
            evictions.push("max_runs");
        }
        self.touches += 1;
        entry.touch = self.touches;
        entry.last_seen = now - idle;
        entry.dirty = false;
        self.insert(entry);
    }
    pub fn len(&self) -> usize {
        self.size
    }
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
    fn entry_at(&self, slot: u32) -> Option<&Entry> {
        self.slots.get(slot as usize)?.entry.as_ref()
    }
    /// The slot of (tenant, run_id), if held.
    fn find(&self, tenant: &str, run_id: &str) -> Option<u32> {
        let last = self.last.load(std::sync::atomic::Ordering::Relaxed);
        if let Some(e) = self.entry_at(last) {
            if e.run_id == run_id && e.tenant == tenant {
                return Some(last);
            }
        }
        let mut slot = *self.index.get(&key_hash(tenant, run_id))?;
        while slot != NIL {
            let s = &self.slots[slot as usize];
            if let Some(e) = &s.entry {
                if e.run_id == run_id && e.tenant == tenant {
                    self.last.store(slot, std::sync::atomic::Ordering::Relaxed);
                    return Some(slot);
                }
            }
            slot = s.chain;
        }
        None
    }
    pub fn get(&self, tenant: &str, run_id: &str) -> Option<&Entry> {
        let slot = self.find(tenant, run_id)?;
        self.entry_at(slot)
    }
    fn get_mut(&mut self, tenant: &str, run_id: &str) -> Option<&mut Entry> {
        let slot = self.find(tenant, run_id)?;
        self.slots[slot as usize].entry.as_mut()
    }
    fn unlink(&mut self, slot: u32) {
        let (older, newer) = (self.slots[slot as usize].older, self.slots[slot as usize].newer);
        match older {
            NIL => self.oldest = newer,
            o => self.slots[o as usize].newer = newer,
        }
        match newer {
            NIL => self.newest = older,
            n => self.slots[n as usize].older = older,
        }
    }
    fn link_newest(&mut self, slot: u32) {
        let newest = self.newest;
        {
            let s = &mut self.slots[slot as usize];
            s.older = newest;
            s.newer = NIL;
        }
        match newest {
            NIL => self.oldest = slot,
            n => self.slots[n as usize].newer = slot,
        }
        self.newest = slot;
    }
    /// Take the run in `slot` out of the store (its hash chain, the LRU list) and free the slot.
    fn release(&mut self, slot: u32) -> Option<Entry> {
        let entry = self.slots[slot as usize].entry.take()?;
        let hash = key_hash(&entry.tenant, &entry.run_id);
        let next = self.slots[slot as usize].chain;
        if let Some(head) = self.index.get_mut(&hash) {
            if *head == slot {
                if next == NIL {
                    self.index.remove(&hash);
                } else {
                    *head = next;
                }
            } else {
                let mut at = *head;
                while at != NIL {
                    let following = self.slots[at as usize].chain;
                    if following == slot {
                        self.slots[at as usize].chain = next;
                        break;
                    }
                    at = following;
                }
            }
        }
        self.unlink(slot);
        let s = &mut self.slots[slot as usize];
        s.chain = self.free;
        s.older = NIL;
        s.newer = NIL;
        self.free = slot;
        self.size -= 1;
        if entry.dirty {
            if let Some(changes) = self.changes.as_mut() {
                changes.flagged -= 1;
            }
        }
        Some(entry)
    }
    /// An eviction (idle TTL, max runs): a delete for the state store when evictions delete.
    fn evict(&mut self, slot: u32) {
        if let Some(evicted) = self.release(slot) {
            self.mark_deleted(&evicted.tenant, &evicted.run_id, true);
        }
    }
    /// The run marked most recently used; false when none is held (or it idled past its TTL).
    fn touch(&mut self, tenant: &str, run_id: &str, now: f64, evictions: &mut Vec<&'static str>) -> bool {
        let Some(slot) = self.find(tenant, run_id) else { return false };
        let ttl = self.idle_ttl;
        let touch = self.touches + 1;
        let Some(entry) = self.slots[slot as usize].entry.as_mut() else { return false };
        if now - entry.last_seen > ttl {
            self.evict(slot);
            evictions.push("idle_ttl");
            return false;
        }
        entry.touch = touch;
        entry.last_seen = now;
        self.touches = touch;
        if self.newest != slot {
            self.unlink(slot);
            self.link_newest(slot);
        }
        self.mark(slot);
        true
    }
    fn create(&mut self, tenant: &str, run_id: &str, state: RunState, now: f64, evictions: &mut Vec<&'static str>) {
        if self.size >= self.max_runs && self.oldest != NIL {
            self.evict(self.oldest);
            evictions.push("max_runs");
        }
        self.touches += 1;
        let entry = Entry {
            tenant: tenant.to_string(),
            run_id: run_id.to_string(),
            state,
            agent_id: String::new(),
            session_id: String::new(),
            last_seen: now,
            touch: self.touches,
            events_evaluated: 0,
            recent: None,
            retries: None,
            dirty: false,
        };
        let slot = self.insert(entry);
        self.mark(slot);
    }
    /// Place a run in a free slot (or a new one) as the most recently used.
    fn insert(&mut self, entry: Entry) -> u32 {
        let hash = key_hash(&entry.tenant, &entry.run_id);
        let chain = self.index.get(&hash).copied().unwrap_or(NIL);
        let slot = if self.free != NIL {
            let slot = self.free;
            let s = &mut self.slots[slot as usize];
            self.free = s.chain;
            s.entry = Some(entry);
            s.chain = chain;
            slot
        } else {
            let slot = u32::try_from(self.slots.len()).ok().filter(|&s| s != NIL).expect("fewer than 2^32 - 1 runs");
            self.slots.push(Slot { entry: Some(entry), older: NIL, newer: NIL, chain });
            slot
        };
        self.index.insert(hash, slot);
        self.link_newest(slot);
        self.last.store(slot, std::sync::atomic::Ordering::Relaxed);
        self.size += 1;
        slot
    }
    /// run_end: free the run at once (not an eviction); a delete for the state store even when
    /// the run is held only there.
    pub fn remove(&mut self, tenant: &str, run_id: &str) -> bool {
        self.mark_deleted(tenant, run_id, false);
        match self.find(tenant, run_id) {
            Some(slot) => self.release(slot).is_some(),
            None => false,
        }
    }
    /// Drop runs idle longer than the TTL, oldest first; at most `budget`.
    pub fn expire_idle(&mut self, now: f64, budget: usize) -> usize {
        let cutoff = now - self.idle_ttl;
        let mut dropped = 0;
        while dropped < budget {
            let oldest = self.oldest;
            if !self.entry_at(oldest).is_some_and(|e| e.last_seen < cutoff) {
                break;
            }
            self.evict(oldest);
            dropped += 1;
        }
        dropped
    }
}

/// Metric increments of one request: (counter, labels) -> count.
#[derive(Default)]
pub struct Summary {
    pub counters: Vec<(u8, [&'static str; 2], String, u64)>,
    pub latency_buckets: Vec<u64>,
    pub latency_sum: f64,
    /// (log level, message, decision) of the decisions worth a log line.
    pub logs: Vec<LogLine>,
    pub evictions: Vec<&'static str>,
    /// Events of a lazily loaded request whose run was already in memory (runs_loaded{memory}).
    pub held_runs: u64,
}

pub struct LogLine {
    pub level: u8,
    pub message: String,
    pub decision_id: String,
    pub tenant: String,
    pub run_id: String,
    pub agent_id: String,
    pub session_id: String,
    pub seq: u64,
    pub verdict: Verdict,
    pub kind: &'static str,
}

pub mod counter {
    pub const EVENTS: u8 = 0; // kind
    pub const REJECTED: u8 = 1; // error code
    pub const VERDICTS: u8 = 2; // action, detector, agent (+tenant)
    pub const RETRIED: u8 = 3;
    pub const SHADOW: u8 = 4; // shadow action, detector
    pub const WARNINGS: u8 = 5; // detector, agent (+tenant)
    pub const BLOCKS: u8 = 6; // detector, agent (+tenant)
    pub const ESCALATION_ABORTS: u8 = 7; // detector, agent (+tenant)
    pub const GUARD_ABORTS: u8 = 8; // agent (+tenant)
}

pub const DEBUG: u8 = 10;
pub const INFO: u8 = 20;
pub const WARNING: u8 = 30;
pub const ERROR: u8 = 40;

impl Summary {
    fn count(&mut self, counter: u8, labels: [&'static str; 2], agent: &str) {
        for entry in self.counters.iter_mut() {
            if entry.0 == counter && entry.1 == labels && entry.2 == agent {
                entry.3 += 1;
                return;
            }
        }
        self.counters.push((counter, labels, agent.to_string(), 1));
    }
}

pub struct Core {
    pub config: Config,
    pub limits: Limits,
    pub store: Store,
    pub instance_id: String,
    decisions: u64,
    pub latency_bounds: Vec<f64>,
    pub debug_logs: bool,
    /// Tests only: evaluating a call of this tool panics (how a bug in the core would).
    pub panic_tool: Option<String>,
}

fn kind_name(kind: &Option<pb::event::Kind>) -> &'static str {
    match kind {
        Some(pb::event::Kind::ToolCall(_)) => "tool_call",
        Some(pb::event::Kind::ToolOutcome(_)) => "tool_outcome",
        Some(pb::event::Kind::CompactionRetry(_)) => "compaction_retry",
        Some(pb::event::Kind::RunEnd(_)) => "run_end",
        None => "unknown",
    }
}

/// What an event says (not its seq or ids), as 8 bytes: retries.py's `content_digest`, byte for
/// byte (the first 8 bytes of a sha256 over kind, tool, params, result or error, each text
/// preceded by its UTF-8 length as 8 big-endian bytes). The retry window is part of a run's
/// persisted state, so a run written by either engine must be recognised by the other. sha256,
/// not BLAKE2b: it hashes every event's whole text, and sha256 runs on the CPU's SHA extensions
/// in both engines (BLAKE2b in software was 22% of the core's time on the benchmark's traffic).
struct ContentHash(sha2::Sha256);

impl ContentHash {
    fn new() -> ContentHash {
        use sha2::Digest;
        ContentHash(sha2::Sha256::new())
    }
    fn update(&mut self, bytes: &[u8]) {
        use sha2::Digest;
        self.0.update(bytes);
    }
    fn text(&mut self, text: &str) {
        self.update(&(text.len() as u64).to_be_bytes());
        self.update(text.as_bytes());
    }
    fn finish(self) -> [u8; 8] {
        use sha2::Digest;
        let mut out = [0u8; 8];
        out.copy_from_slice(&self.0.finalize()[..8]);
        out
    }
}

pub fn content_digest(kind: &Option<pb::event::Kind>) -> [u8; 8] {
    let mut h = ContentHash::new();
    match kind {
        Some(pb::event::Kind::ToolCall(c)) => {
            h.update(b"c");
            h.text(&c.tool_name);
            h.text(&c.params_json);
        }
        Some(pb::event::Kind::ToolOutcome(o)) => {
            h.update(b"o");
            h.text(&o.tool_name);
            h.text(&o.params_json);
            match &o.outcome {
                Some(pb::tool_outcome::Outcome::Error(e)) => {
                    h.update(b"e");
                    h.text(e);
                }
                Some(pb::tool_outcome::Outcome::ResultJson(r)) => {
                    h.update(b"r");
                    h.text(r);
                }
                None => h.update(b"-"),
            }
        }
        Some(pb::event::Kind::CompactionRetry(_)) => h.update(b"k"),
        _ => h.update(b"x"),
    }
    h.finish()
}

fn too_long(what: &str, chars: usize, limit: usize) -> String {
    format!("{what} is {chars} characters; the limit is {limit}")
}

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

/// Refusals of a whole request (the transport's decode.py), decided on raw bytes.
pub enum Refusal {
    Undecodable,
    TooManyEvents,
    /// Not a refusal: with a shared state store, the request names runs not in memory (their
    /// ids) and nothing was evaluated; Python loads them and asks again (keeper.py).
    NotLoaded(Vec<String>),
}

/// What became of a stored run handed to `Core::load_run`.
pub enum Loaded {
    Restored,
    /// Idle past the TTL: not taken in.
    Expired,
    /// Not the run that was asked for.
    Mismatch,
}

const MAX_OTHER_FIELDS: usize = 64;

fn varint(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut result = 0u64;
    let mut shift = 0;
    loop {
        if *pos >= data.len() || shift > 63 {
            return None;
        }
        let byte = data[*pos];
        *pos += 1;
        result |= ((byte & 0x7F) as u64) << shift;
        if byte < 0x80 {
            return Some(result);
        }
        shift += 7;
    }
}

/// How many top-level field-1 messages `data` holds, counting at most limit + 1.
pub fn count_events(data: &[u8], limit: usize) -> Option<usize> {
    let (mut count, mut others, mut pos) = (0usize, 0usize, 0usize);
    while pos < data.len() {
        let tag = varint(data, &mut pos)?;
        let (field, wire) = (tag >> 3, tag & 7);
        match wire {
            2 => {
                let length = varint(data, &mut pos)? as usize;
                pos = pos.checked_add(length)?;
                if field == 1 {
                    count += 1;
                    if count > limit {
                        return Some(count);
                    }
                    continue;
                }
            }
            0 => {
                varint(data, &mut pos)?;
            }
            1 => pos += 8,
            5 => pos += 4,
            _ => return None,
        }
        others += 1;
        if others > MAX_OTHER_FIELDS {
            return None;
        }
    }
    if pos != data.len() {
        return None;
    }
    Some(count)
}

impl Core {
    pub fn new(config: Config, limits: Limits, max_runs: usize, idle_ttl: f64, instance_id: String, latency_bounds: Vec<f64>) -> Core {
        Core { config, limits, store: Store::new(max_runs, idle_ttl), instance_id, decisions: 0, latency_bounds, debug_logs: false, panic_tool: None }
    }

    pub fn set_decision_counter(&mut self, value: u64) {
        self.decisions = value;
    }

    fn next_decision_id(&mut self) -> String {
        self.decisions += 1;
        format!("{}-{:x}", self.instance_id, self.decisions)
    }

    /// `routed`: the stream's x-loopwarden-run-id ("" = none): events of other runs are refused.
    /// `lazy`: a shared state store holds runs this replica may not: runs the request names
    /// that are not in memory are returned (Refusal::NotLoaded) before anything is evaluated.
    pub fn evaluate_request(&mut self, data: &[u8], tenant: &str, routed: &str, now: f64, summary: &mut Summary, lazy: bool) -> Result<Vec<u8>, Refusal> {
        match count_events(data, self.limits.max_events_per_request) {
            None => return Err(Refusal::Undecodable),
            Some(n) if n > self.limits.max_events_per_request => return Err(Refusal::TooManyEvents),
            _ => {}
        }
        let request = pb::EvaluateRequest::decode(data).map_err(|_| Refusal::Undecodable)?;
        if lazy {
            self.not_loaded(&request.events, tenant, routed, summary)?;
        }
        summary.latency_buckets = vec![0; self.latency_bounds.len() + 1];
        let verdicts = request.events.iter().map(|event| verdict_message(&self.evaluate_timed(event, tenant, routed, now, summary))).collect();
        Ok(pb::EvaluateResponse { verdicts }.encode_to_vec())
    }

    /// Ok(None): the request has no event (the transport answers INVALID_ARGUMENT).
    pub fn check_request(&mut self, data: &[u8], tenant: &str, routed: &str, now: f64, summary: &mut Summary, lazy: bool) -> Result<Option<Vec<u8>>, Refusal> {
        let request = pb::CheckRequest::decode(data).map_err(|_| Refusal::Undecodable)?;
        let Some(event) = request.event else { return Ok(None) };
        if lazy {
            self.not_loaded(std::slice::from_ref(&event), tenant, routed, summary)?;
        }
        summary.latency_buckets = vec![0; self.latency_bounds.len() + 1];
        let decision = self.evaluate_timed(&event, tenant, routed, now, summary);
        Ok(Some(pb::CheckResponse { verdict: Some(verdict_message(&decision)) }.encode_to_vec()))
    }

    /// keeper.py's `missing`: the request's run ids (trimmed, run_end and misrouted events
    /// aside) not held in memory, each once; the held ones are counted in the summary.
    fn not_loaded(&self, events: &[pb::Event], tenant: &str, routed: &str, summary: &mut Summary) -> Result<(), Refusal> {
        let mut missing: Vec<String> = Vec::new();
        for event in events {
            if let Some(pb::event::Kind::RunEnd(_)) = event.kind {
                continue;
            }
            let run_id = event.run_id.trim_matches(py_isspace);
            if !routed.is_empty() && run_id != routed {
                continue;
            }
            if self.store.get(tenant, run_id).is_some() {
                summary.held_runs += 1;
            } else if !run_id.is_empty() && !missing.iter().any(|m| m == run_id) {
                missing.push(run_id.to_string());
            }
        }
        if missing.is_empty() { Ok(()) } else { Err(Refusal::NotLoaded(missing)) }
    }

    /// An EvaluateRequest's events, refused whole when it is undecodable or carries more events
    /// than the limit (counted on the raw bytes first, so a huge request is never parsed).
    pub fn decode_evaluate(&self, data: &[u8]) -> Result<Vec<pb::Event>, Refusal> {
        match count_events(data, self.limits.max_events_per_request) {
            None => return Err(Refusal::Undecodable),
            Some(n) if n > self.limits.max_events_per_request => return Err(Refusal::TooManyEvents),
            _ => {}
        }
        Ok(pb::EvaluateRequest::decode(data).map_err(|_| Refusal::Undecodable)?.events)
    }

    /// The runs `events` name that are not in memory (a shared state store loads them first).
    pub fn missing_runs(&self, events: &[pb::Event], tenant: &str, routed: &str, summary: &mut Summary) -> Vec<String> {
        match self.not_loaded(events, tenant, routed, summary) {
            Err(Refusal::NotLoaded(ids)) => ids,
            _ => Vec::new(),
        }
    }

    /// Decoded events, each evaluated and timed in order (one request's worth).
    pub fn evaluate_events(&mut self, events: &[pb::Event], tenant: &str, routed: &str, now: f64, summary: &mut Summary) -> Vec<Decision> {
        summary.latency_buckets = vec![0; self.latency_bounds.len() + 1];
        events.iter().map(|event| self.evaluate_timed(event, tenant, routed, now, summary)).collect()
    }

    /// The run's state-store record (state.rs), or None when it is not held. `wall_now` and
    /// `now` (the store's clock) turn its last event into wall-clock time.
    pub fn encode_run(&self, tenant: &str, run_id: &str, wall_now: f64, now: f64) -> Option<Vec<u8>> {
        let entry = self.store.get(tenant, run_id)?;
        let retries = entry.retries.as_ref().map(|r| {
            let mut decisions: Vec<(usize, u64, &str, &Verdict)> =
                r.decisions.iter().map(|(slot, d)| (*slot, d.seq, d.decision_id.as_str(), &d.verdict)).collect();
            decisions.sort_by_key(|d| d.0);
            crate::state::RetriesRecord { seqs: &r.seqs, digests: &r.digests, next_slot: r.next_slot, decisions }
        });
        Some(crate::state::encode(&crate::state::RunRecord {
            tenant: &entry.tenant,
            run_id: &entry.run_id,
            agent_id: &entry.agent_id,
            session_id: &entry.session_id,
            last_seen: wall_now - (now - entry.last_seen).max(0.0),
            events_evaluated: entry.events_evaluated,
            state: &entry.state,
            retries,
        }))
    }

    /// Take in a stored run's record (keeper.py's restore and lazy load). `expect`: the
    /// (tenant, run_id) asked for, when one was. Err: the record is malformed (it names the field).
    pub fn load_run(&mut self, record: &[u8], wall_now: f64, now: f64, expect: Option<(&str, &str)>,
                    evictions: &mut Vec<&'static str>) -> Result<Loaded, String> {
        let d = crate::state::decode(record, RETRY_WINDOW)?;
        let idle = (wall_now - d.last_seen).max(0.0);
        if idle > self.store.idle_ttl {
            return Ok(Loaded::Expired);
        }
        if let Some((tenant, run_id)) = expect {
            if (d.tenant.as_str(), d.run_id.as_str()) != (tenant, run_id) {
                return Ok(Loaded::Mismatch);
            }
        }
        let retries = d.retries.map(|crate::state::DecodedRetries { seqs, digests, next_slot, decisions }| {
            let decisions = decisions
                .into_iter()
                .map(|(slot, (seq, decision_id, verdict))| (slot, Decision { seq, run_id: d.run_id.clone(), verdict, decision_id }))
                .collect();
            Box::new(Retries { seqs, digests, decisions, next_slot })
        });
        let entry = Entry {
            tenant: d.tenant,
            run_id: d.run_id,
            state: d.state,
            agent_id: d.agent_id,
            session_id: d.session_id,
            last_seen: 0.0,
            touch: 0,
            events_evaluated: d.events_evaluated,
            recent: None,
            retries,
            dirty: false,
        };
        self.store.restore(entry, idle, now, evictions);
        Ok(Loaded::Restored)
    }

    fn evaluate_timed(&mut self, event: &pb::Event, tenant: &str, routed: &str, now: f64, summary: &mut Summary) -> Decision {
        let started = std::time::Instant::now();
        let decision = if !routed.is_empty() && event.run_id.trim_matches(py_isspace) != routed {
            self.misrouted(event, routed, summary)
        } else {
            self.evaluate_event(event, tenant, now, summary)
        };
        let seconds = started.elapsed().as_secs_f64();
        let bucket = self.latency_bounds.iter().position(|b| seconds <= *b).unwrap_or(self.latency_bounds.len());
        if let Some(slot) = summary.latency_buckets.get_mut(bucket) {
            *slot += 1;
        }
        summary.latency_sum += seconds;
        decision
    }

    fn envelope_error(&self, event: &pb::Event, run_id: &str) -> Option<Verdict> {
        let l = &self.limits;
        if run_id.is_empty() {
            return Some(Verdict::reject("missing_run_id", "run_id is required (a non-blank string)".into()));
        }
        let n = run_id.chars().count();
        if n > l.max_run_id_chars {
            return Some(Verdict::reject("run_id_too_long", format!("run_id is {n} characters; the limit is {}", l.max_run_id_chars)));
        }
        let n = event.agent_id.chars().count();
        if n > l.max_agent_id_chars {
            return Some(Verdict::reject("agent_id_too_long", too_long("agent_id", n, l.max_agent_id_chars)));
        }
        let n = event.session_id.chars().count();
        if n > l.max_session_id_chars {
            return Some(Verdict::reject("session_id_too_long", too_long("session_id", n, l.max_session_id_chars)));
        }
        let (tool_name, call_id, params) = match &event.kind {
            None => {
                return Some(Verdict::reject("missing_event_kind", "event has no kind: set one of tool_call, tool_outcome, compaction_retry, run_end".into()));
            }
            Some(pb::event::Kind::ToolCall(c)) => (&c.tool_name, &c.tool_call_id, &c.params_json),
            Some(pb::event::Kind::ToolOutcome(o)) => (&o.tool_name, &o.tool_call_id, &o.params_json),
            _ => return None,
        };
        let n = tool_name.chars().count();
        if n > l.max_tool_name_chars {
            return Some(Verdict::reject("tool_name_too_long", too_long("tool_name", n, l.max_tool_name_chars)));
        }
        let n = call_id.chars().count();
        if n > l.max_tool_call_id_chars {
            return Some(Verdict::reject("tool_call_id_too_long", too_long("tool_call_id", n, l.max_tool_call_id_chars)));
        }
        if params.len() > l.max_params_bytes {
            return Some(Verdict::reject("params_too_large", format!("params_json is {} bytes; the limit is {}", params.len(), l.max_params_bytes)));
        }
        if let Some(pb::event::Kind::ToolOutcome(o)) = &event.kind {
            let (name, text) = match &o.outcome {
                Some(pb::tool_outcome::Outcome::ResultJson(r)) => ("result_json", r),
                Some(pb::tool_outcome::Outcome::Error(e)) => ("error", e),
                None => return None,
            };
            if text.len() > l.max_result_bytes {
                return Some(Verdict::reject("result_too_large", format!("{name} is {} bytes; the limit is {}", text.len(), l.max_result_bytes)));
            }
        }
        None
    }

    /// REJECT `run_id_mismatch` (service.py's refuse_misrouted).
    fn misrouted(&self, event: &pb::Event, routed: &str, summary: &mut Summary) -> Decision {
        summary.count(counter::EVENTS, [kind_name(&event.kind), ""], "");
        let run_id = event.run_id.trim_matches(py_isspace);
        let head = |s: &str| py_repr(&s.chars().take(80).collect::<String>());
        let message = format!(
            "run_id {} differs from this stream's x-loopwarden-run-id {}; open one Evaluate stream per run (the header routes the stream to the run's replica)",
            head(run_id), head(routed)
        );
        self.rejected(event, run_id, Verdict::reject("run_id_mismatch", message), summary)
    }

    fn rejected(&self, event: &pb::Event, run_id: &str, verdict: Verdict, summary: &mut Summary) -> Decision {
        summary.count(counter::REJECTED, [verdict.error_code, ""], "");
        let agent = self.config.agent_label(&event.agent_id).to_string();
        summary.count(counter::VERDICTS, ["reject", "none"], &agent);
        Decision { seq: event.seq, run_id: run_id.to_string(), verdict, decision_id: String::new() }
    }

    pub fn evaluate_event(&mut self, event: &pb::Event, tenant: &str, now: f64, summary: &mut Summary) -> Decision {
        let kind = kind_name(&event.kind);
        summary.count(counter::EVENTS, [kind, ""], "");
        let run_id = event.run_id.trim_matches(py_isspace).to_string();
        if let Some(invalid) = self.envelope_error(event, &run_id) {
            return self.rejected(event, &run_id, invalid, summary);
        }
        if let Some(pb::event::Kind::RunEnd(_)) = event.kind {
            self.store.remove(tenant, &run_id);
            let agent = self.config.agent_label(&event.agent_id).to_string();
            summary.count(counter::VERDICTS, ["allow", "none"], &agent);
            return Decision { seq: event.seq, run_id, verdict: Verdict::allow(""), decision_id: String::new() };
        }
        let held = self.store.touch(tenant, &run_id, now, &mut summary.evictions);
        let mut digest: Option<[u8; 8]> = None;
        if held && event.seq != 0 {
            let entry = self.store.get(tenant, &run_id).expect("held");
            if let Some(retries) = &entry.retries {
                let d = content_digest(&event.kind);
                digest = Some(d);
                if let Some(slot) = retries.find(event.seq, &d) {
                    summary.count(counter::RETRIED, ["", ""], "");
                    if let Some(kept) = retries.decisions.get(&slot) {
                        return Decision { seq: event.seq, run_id, verdict: kept.verdict.clone(), decision_id: kept.decision_id.clone() };
                    }
                    let tool = match &event.kind {
                        Some(pb::event::Kind::ToolCall(c)) => crate::toolnames::normalize_tool_name(&c.tool_name),
                        Some(pb::event::Kind::ToolOutcome(o)) => crate::toolnames::normalize_tool_name(&o.tool_name),
                        _ => String::new(),
                    };
                    return Decision { seq: event.seq, run_id, verdict: Verdict::allow(&tool), decision_id: String::new() };
                }
            }
        }
        let event_agent = event.agent_id.trim_matches(py_isspace);
        let agent_id = if !event_agent.is_empty() {
            event_agent.to_string()
        } else if held {
            self.store.get(tenant, &run_id).map(|e| e.agent_id.clone()).unwrap_or_default()
        } else {
            String::new()
        };
        let created = !held;
        if created {
            let capacity = self.config.settings_for(&agent_id).history_size;
            self.store.create(tenant, &run_id, RunState::new(capacity), now, &mut summary.evictions);
        }
        let config = &self.config;
        let settings = config.settings_for(&agent_id);
        let max_depth = self.limits.max_json_depth;
        let entry = self.store.get_mut(tenant, &run_id).expect("created");
        let was_aborted = entry.state.abort.is_some();
        let state = &mut entry.state;
        let panic_tool = self.panic_tool.as_deref();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if let (Some(tool), Some(pb::event::Kind::ToolCall(c))) = (panic_tool, &event.kind) {
                assert!(c.tool_name != tool, "planted panic for a test");
            }
            let engine_event = match &event.kind {
                Some(pb::event::Kind::ToolCall(c)) => Event::ToolCall {
                    tool_name: &c.tool_name, params_json: &c.params_json, tool_call_id: &c.tool_call_id, seq: event.seq,
                },
                Some(pb::event::Kind::ToolOutcome(o)) => Event::ToolOutcome {
                    tool_name: &o.tool_name,
                    params_json: &o.params_json,
                    tool_call_id: &o.tool_call_id,
                    result_json: match &o.outcome {
                        Some(pb::tool_outcome::Outcome::ResultJson(r)) => Some(r.as_str()),
                        _ => None,
                    },
                    error: match &o.outcome {
                        Some(pb::tool_outcome::Outcome::Error(e)) => Some(e.as_str()),
                        _ => None,
                    },
                    seq: event.seq,
                },
                Some(pb::event::Kind::CompactionRetry(_)) => Event::CompactionRetry,
                _ => Event::RunEnd,
            };
            evaluate(state, &engine_event, settings, &config.catalog, max_depth)
        }));
        let verdict = match outcome {
            Ok(v) => v,
            Err(_) => return self.internal_error(event, tenant, &run_id, created, kind, summary),
        };
        let agent_label = self.config.agent_label(&agent_id).to_string();
        let entry = self.store.get_mut(tenant, &run_id).expect("held");
        entry.agent_id = agent_id;
        if !event.session_id.is_empty() {
            entry.session_id = event.session_id.clone();
        }
        let decision = if verdict.action == Action::Reject {
            Decision { seq: event.seq, run_id: run_id.clone(), verdict, decision_id: String::new() }
        } else {
            entry.events_evaluated += 1;
            let needs_id = !(verdict.action == Action::Allow && verdict.shadow_action.is_none());
            let decision_id = if needs_id {
                self.decisions += 1;
                format!("{}-{:x}", self.instance_id, self.decisions)
            } else {
                String::new()
            };
            let decision = Decision { seq: event.seq, run_id: run_id.clone(), verdict, decision_id };
            if !decision.decision_id.is_empty() {
                let recent = entry.recent.get_or_insert_with(|| VecDeque::with_capacity(RECENT_DECISIONS));
                if recent.len() >= RECENT_DECISIONS {
                    recent.pop_front();
                }
                recent.push_back(decision.clone());
            }
            if event.seq != 0 {
                let v = &decision.verdict;
                let plain = v.action == Action::Allow && v.message.is_empty() && v.shadow_action.is_none();
                let d = digest.unwrap_or_else(|| content_digest(&event.kind));
                entry.retries.get_or_insert_with(Default::default).remember(event.seq, d, if plain { None } else { Some(decision.clone()) });
            }
            decision
        };
        let (tenant_s, agent_s, session_s) = (entry.tenant.clone(), entry.agent_id.clone(), entry.session_id.clone());
        self.account(event, &decision, &agent_label, was_aborted, kind, (tenant_s, agent_s, session_s), summary);
        decision
    }

    fn internal_error(&mut self, event: &pb::Event, tenant: &str, run_id: &str, created: bool, kind: &'static str, summary: &mut Summary) -> Decision {
        if created {
            self.store.remove(tenant, run_id);
        }
        let decision_id = self.next_decision_id();
        let verdict = Verdict::reject(
            "internal_error",
            format!("loopwarden could not evaluate this event (decision {decision_id}); it changed nothing. The daemon log has the details under that id."),
        );
        summary.logs.push(LogLine {
            level: ERROR,
            message: "internal error evaluating an event; answered REJECT internal_error".into(),
            decision_id: decision_id.clone(),
            tenant: tenant.to_string(),
            run_id: run_id.to_string(),
            agent_id: String::new(),
            session_id: String::new(),
            seq: event.seq,
            verdict: verdict.clone(),
            kind,
        });
        let mut decision = self.rejected(event, run_id, verdict, summary);
        decision.decision_id = decision_id;
        decision
    }

    #[allow(clippy::too_many_arguments)]
    fn account(&self, event: &pb::Event, decision: &Decision, agent: &str, was_aborted: bool, kind: &'static str,
               who: (String, String, String), summary: &mut Summary) {
        let v = &decision.verdict;
        let detector = v.detector.name();
        summary.count(counter::VERDICTS, [v.action.name(), detector], agent);
        let log = |level: u8, message: &str, summary: &mut Summary| {
            summary.logs.push(LogLine {
                level,
                message: message.to_string(),
                decision_id: decision.decision_id.clone(),
                tenant: who.0.clone(),
                run_id: decision.run_id.clone(),
                agent_id: who.1.clone(),
                session_id: who.2.clone(),
                seq: event.seq,
                verdict: v.clone(),
                kind,
            });
        };
        if let Some(shadow) = v.shadow_action {
            summary.count(counter::SHADOW, [shadow.name(), detector], "");
            log(WARNING, &format!("shadow {} (not enforced)", shadow.name()), summary);
            return;
        }
        match v.action {
            Action::Allow => {
                if v.guard_armed {
                    log(INFO, &v.message, summary);
                }
            }
            Action::Reject => summary.count(counter::REJECTED, [v.error_code, ""], ""),
            Action::Warn => {
                if v.announce {
                    summary.count(counter::WARNINGS, [detector, ""], agent);
                    log(WARNING, "loop warning", summary);
                } else if self.debug_logs {
                    log(DEBUG, "loop warning (not announced)", summary);
                }
            }
            Action::Block => {
                summary.count(counter::BLOCKS, [detector, ""], agent);
                log(WARNING, "tool call blocked", summary);
            }
            Action::Abort => {
                if was_aborted {
                    if self.debug_logs {
                        log(DEBUG, "run already aborted", summary);
                    }
                    return;
                }
                if v.error_code == "tool_loop_persisted" {
                    summary.count(counter::ESCALATION_ABORTS, [detector, ""], agent);
                } else {
                    summary.count(counter::GUARD_ABORTS, ["", ""], agent);
                }
                log(ERROR, "run aborted", summary);
            }
        }
    }

    /// InspectRun's view of one run, or None.
    pub fn inspect(&self, tenant: &str, run_id: &str) -> Option<&Entry> {
        self.store.get(tenant, run_id.trim_matches(py_isspace))
    }
}

impl Entry {
    pub fn recent_decisions(&self) -> Vec<&Decision> {
        self.recent.as_ref().map(|r| r.iter().collect()).unwrap_or_default()
    }
}

/// Python's repr() of a str (the quoting and escapes of printable text).
pub fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

pub fn record_views(state: &RunState) -> Vec<(u64, String, String, String, String, String)> {
    state
        .history
        .iter()
        .map(|r| {
            (
                r.seq,
                r.tool().to_string(),
                format!("{}:{}", r.tool(), hex(&r.args)),
                r.call_id().unwrap_or("").to_string(),
                crate::engine::result_hash_text(r.status, &r.result).unwrap_or_default(),
                r.unknown().unwrap_or("").to_string(),
            )
        })
        .collect()
}

