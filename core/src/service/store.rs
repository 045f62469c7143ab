//! The run store (`store.py`): every run this replica holds, its LRU order, idle expiry and
//! eviction reasons, and which runs changed since a state store last flushed.
//!
//! Design. The store is a slab of runs with an intrusive doubly linked LRU list through it and
//! a hash map from a (tenant, run_id) hash to the run's slot: the list's head is the least
//! recently used run, so both the max-runs eviction and idle expiry pop from the front without
//! scanning live runs, and every per-event operation is O(1) in the number of runs. The Python
//! store shards its OrderedDicts by crc32 to get the same total order; one list gives it directly. Python
//! calls in from its one event loop thread, holding the GIL, so no lock is needed. An evicted or
//! ended run is gone entirely: a later event with its id starts from zero.
//!
//! Tenants. Each tenant's runs are also linked in a list of their own, so with a per-tenant quota
//! (set when the token file names two or more tenants) a tenant's new run past it evicts that
//! tenant's least recently used run in O(1), and a full store evicts from the tenant holding the
//! most: one tenant's flood of new runs never evicts another tenant's run within its share.

use std::collections::{HashMap, VecDeque};

use super::retries::Retries;
use super::Decision;
use crate::engine::RunState;

/// How many of a run's latest decisions with an id InspectRun shows.
pub const RECENT_DECISIONS: usize = 10;

/// A run's last full record in the state store: the base its deltas name, and its length (a
/// delta is written only while it is at most half of it; past that the run is written whole
/// again, which also bounds what a restore applies).
#[derive(Clone, Copy, Debug)]
pub struct Base {
    pub id: u64,
    /// Non-zero (a stored value is never empty), so an entry's `Option<Base>` is 16 bytes, not 24.
    len: std::num::NonZeroU32,
}

impl Base {
    pub fn new(id: u64, len: usize) -> Base {
        let len = u32::try_from(len).unwrap_or(u32::MAX).max(1);
        Base { id, len: std::num::NonZeroU32::new(len).expect("at least 1") }
    }
    pub fn stored_len(&self) -> usize {
        self.len.get() as usize
    }
}

pub struct Entry {
    pub tenant: Box<str>,
    pub run_id: Box<str>,
    pub state: RunState,
    pub agent_id: Box<str>,
    pub session_id: Box<str>,
    pub(super) last_seen: f64,
    pub(super) touch: u64,
    pub events_evaluated: u64,
    /// Boxed (8 bytes, not 32): most runs never get a decision with an id.
    #[allow(clippy::box_collection)]
    pub(super) recent: Option<Box<VecDeque<Decision>>>,
    pub(super) retries: Option<Box<Retries>>,
    /// Changed since the last flush (only while a state store tracks changes).
    pub(super) dirty: bool,
    /// Its place in a run tree and its budget totals (service/trees.rs); None for a plain run.
    pub tree: Option<Box<crate::tree_link::TreeLink>>,
    /// Tool calls evaluated while the run had no link: its totals begin from them when it gets one.
    pub(super) unlinked_calls: u64,
    /// The shared store's owner generation of the copy held here (keeper.py fences writes with
    /// it: a write is refused once another replica wrote since); 0: none known.
    pub owner_gen: u64,
    /// Until when (this core's clock) this replica's owner lease on the run is known to be live;
    /// past it another replica may have taken the run, so the run is named for a load (and the
    /// stored copy read) before it is evaluated again. Infinite: no lease watched.
    pub lease_until: f64,
    /// The run's last full record in the state store, the base its deltas are written against
    /// (service/persist.rs); None: its next write is a full record.
    pub(super) base: Option<Base>,
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
    /// Its tenant (an index into `Store::tenants`) and that tenant's own LRU list, oldest first.
    tenant: u32,
    tenant_older: u32,
    tenant_newer: u32,
    /// Next slot whose key has the same hash (NIL ends the chain); for a free slot, the next free one.
    chain: u32,
}

const NIL: u32 = u32::MAX;

/// One tenant's runs: how many are held, and the ends of its own LRU list through the slab, so
/// a tenant over its quota gives up its own least recently used run in O(1), whatever the others hold.
struct TenantRuns {
    count: usize,
    oldest: u32,
    newest: u32,
}

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
    /// Runs whose load from a shared store failed (keeper.py) -> their tree's root: evaluated
    /// from memory, and never written until merged with the stored copy (persist.rs
    /// `merge_run`), so a flush cannot replace a stored run it could not read. Empty but after
    /// an outage; a mark may precede its run (set before the event that creates it).
    unmerged: HashMap<RunKey, String>,
    /// Runs per tenant (kept whether or not a quota is set, so one can be set at any time);
    /// tenants are few (the token file's), so an entry is never dropped.
    tenants: Vec<TenantRuns>,
    tenant_ids: HashMap<String, u32>,
    /// Runs one tenant may hold (0: no per-tenant quota, a single-tenant daemon). A new run over
    /// it evicts the tenant's own least recently used run (`tenant_quota`); a full store then
    /// evicts from the tenant holding the most runs, never from one within its share.
    pub tenant_quota: usize,
    /// Some held run may descend from a run not held (its parent or root was evicted, expired or
    /// ended without it, or it was loaded without them). Until then every held run's ancestors
    /// are held, so a new run, not held itself, cannot be an ancestor of any held run, and the
    /// cycle check of a new child needs no walk up the tree: O(1) whatever the tree's depth.
    pub(super) orphans_possible: bool,
}

/// Runs changed since the last flush. A changed run is flagged on its entry and its key listed
/// once (one allocation per run per flush interval, none per event); a run that ended, or was
/// evicted while evictions delete, is a key in `deleted`. A delete followed by a new run of the
/// same key is one write of the new run, as in store.py's dict (the write replaces the value).
struct Changes {
    listed: Vec<(String, String)>,
    flagged: usize,
    /// `listed` may hold a run twice (see `written`).
    stale: bool,
    /// Deleted runs -> their tree's root (a non-root run's stored key names its root).
    deleted: HashMap<(String, String), String>,
    evictions_delete: bool,
}

pub type RunKey = (String, String);

impl Store {
    pub fn new(max_runs: usize, idle_ttl: f64) -> Store {
        Store {
            max_runs, idle_ttl, slots: Vec::new(), index: HashMap::new(), free: NIL, oldest: NIL, newest: NIL,
            last: std::sync::atomic::AtomicU32::new(NIL), touches: 0, size: 0, changes: None,
            unmerged: HashMap::new(),
            tenants: Vec::new(), tenant_ids: HashMap::new(), tenant_quota: 0, orphans_possible: false,
        }
    }
    pub fn track_changes(&mut self, evictions_delete: bool) {
        let changes = self.changes.get_or_insert_with(|| Changes { listed: Vec::new(), flagged: 0, stale: false, deleted: HashMap::new(), evictions_delete });
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
        let key = (entry.tenant.to_string(), entry.run_id.to_string());
        if !changes.deleted.is_empty() {
            changes.deleted.remove(&key);
        }
        changes.listed.push(key);
    }
    fn mark_deleted(&mut self, tenant: &str, run_id: &str, root: &str, eviction: bool) {
        if let Some(changes) = self.changes.as_mut() {
            if !eviction || changes.evictions_delete {
                changes.deleted.insert((tenant.to_string(), run_id.to_string()), root.to_string());
            }
        }
    }
    /// Flag a held run as changed (a child's notice or count reached it).
    pub(super) fn changed(&mut self, tenant: &str, run_id: &str) {
        if let Some(slot) = self.find(tenant, run_id) {
            self.mark(slot);
        }
    }
    /// The runs changed since the last call, (key, still held), each once: deletes first, then
    /// the held runs in the order they first changed.
    pub fn take_dirty(&mut self) -> Vec<(RunKey, bool)> {
        self.take_dirty_rooted().into_iter().map(|(key, live, _)| (key, live)).collect()
    }
    /// `take_dirty` with each run's tree root (the run itself for a root), which its stored key names.
    pub fn take_dirty_rooted(&mut self) -> Vec<(RunKey, bool, String)> {
        let Some(changes) = self.changes.as_mut() else { return Vec::new() };
        let listed = std::mem::take(&mut changes.listed);
        let mut taken: Vec<(RunKey, bool, String)> = changes.deleted.drain().map(|(k, root)| {
            let root = if root.is_empty() { k.1.clone() } else { root };
            (k, false, root)
        }).collect();
        changes.flagged = 0;
        // A run written mid-flush (`written`) and changed again is listed twice: its first
        // listing is stale, the last one places it (after its write).
        let stale = std::mem::take(&mut changes.stale);
        let last: HashMap<&RunKey, usize> =
            if stale { listed.iter().enumerate().map(|(at, key)| (key, at)).collect() } else { HashMap::new() };
        let current: Vec<bool> = if stale { listed.iter().enumerate().map(|(at, key)| last[key] == at).collect() } else { Vec::new() };
        drop(last);
        let mut kept = Vec::new();
        for (at, key) in listed.into_iter().enumerate() {
            if stale && !current[at] {
                continue;
            }
            if !self.unmerged.is_empty() && self.unmerged.contains_key(&key) {
                // Not read from the store yet: stays dirty until merged, never written over it.
                if self.get(&key.0, &key.1).is_some_and(|e| e.dirty) {
                    kept.push(key);
                }
                continue;
            }
            if let Some(entry) = self.get_mut(&key.0, &key.1) {
                if entry.dirty {
                    entry.dirty = false;
                    let root = entry.root_id().to_string();
                    taken.push((key, true, root));
                }
            }
        }
        if let Some(changes) = self.changes.as_mut() {
            changes.flagged = kept.len();
            changes.listed = kept;
        }
        taken
    }
    /// Mark a run whose load failed (held or about to be created): see `unmerged`. True when
    /// it was not marked yet.
    pub fn mark_unmerged(&mut self, tenant: &str, run_id: &str, root: &str) -> bool {
        let root = if root.is_empty() { run_id } else { root };
        self.unmerged.insert((tenant.to_string(), run_id.to_string()), root.to_string()).is_none()
    }
    pub fn is_unmerged(&self, tenant: &str, run_id: &str) -> bool {
        !self.unmerged.is_empty() && self.unmerged.contains_key(&(tenant.to_string(), run_id.to_string()))
    }
    /// The mark lifted (merged, or the store holds nothing to merge): the run is flushed again.
    pub fn clear_unmerged(&mut self, tenant: &str, run_id: &str) -> bool {
        !self.unmerged.is_empty() && self.unmerged.remove(&(tenant.to_string(), run_id.to_string())).is_some()
    }
    /// The marked runs, (tenant, run_id, root), for the keeper's background retry.
    pub fn unmerged(&self) -> Vec<(String, String, String)> {
        self.unmerged.iter().map(|((t, r), root)| (t.clone(), r.clone(), root.clone())).collect()
    }
    pub fn unmerged_count(&self) -> usize {
        self.unmerged.len()
    }
    /// The run is being written as it is now (a flush encoded it): a change since the last
    /// `take_dirty` is in what is written, so its mark is cleared. The next flush then lists the
    /// run by its first change *after this write*, so runs are written oldest-written first and
    /// none waits two flushes behind runs written after it. Its stale key in `listed` is
    /// skipped by `take_dirty` (it checks the mark).
    pub fn written(&mut self, tenant: &str, run_id: &str) {
        let Some(slot) = self.find(tenant, run_id) else { return };
        let Some(changes) = self.changes.as_mut() else { return };
        if let Some(entry) = self.slots[slot as usize].entry.as_mut() {
            if entry.dirty {
                entry.dirty = false;
                changes.flagged -= 1;
                changes.stale = true;
            }
        }
    }
    /// Put back runs a failed flush did not write; a run changed again since keeps its mark.
    pub fn redirty(&mut self, items: Vec<(RunKey, bool)>) {
        self.redirty_rooted(items.into_iter().map(|(key, live)| (key, live, String::new())).collect())
    }
    pub fn redirty_rooted(&mut self, items: Vec<(RunKey, bool, String)>) {
        if self.changes.is_none() {
            return;
        }
        for ((tenant, run_id), live, root) in items {
            if let Some(slot) = self.find(&tenant, &run_id) {
                // Its write failed, so the store may not hold the base its next delta would name.
                if let Some(entry) = self.slots[slot as usize].entry.as_mut() {
                    entry.base = None;
                }
                self.mark(slot);
            } else if !live {
                self.mark_deleted(&tenant, &run_id, &root, false);
            }
        }
    }
    /// No runs and no pending changes (tracking stays as it was).
    pub fn clear(&mut self) {
        let evictions_delete = self.changes.as_ref().map(|c| c.evictions_delete);
        let tenant_quota = self.tenant_quota;
        *self = Store::new(self.max_runs, self.idle_ttl);
        self.tenant_quota = tenant_quota;
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
        self.make_room(&entry.tenant, evictions);
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
            if super::same_text(&e.run_id, run_id) && super::same_text(&e.tenant, tenant) {
                return Some(last);
            }
        }
        let mut slot = *self.index.get(&key_hash(tenant, run_id))?;
        while slot != NIL {
            let s = &self.slots[slot as usize];
            if let Some(e) = &s.entry {
                if super::same_text(&e.run_id, run_id) && super::same_text(&e.tenant, tenant) {
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
    pub(super) fn get_mut(&mut self, tenant: &str, run_id: &str) -> Option<&mut Entry> {
        let slot = self.find(tenant, run_id)?;
        self.slots[slot as usize].entry.as_mut()
    }
    /// Take `slot` out of both LRU lists: the store's and its tenant's.
    fn unlink(&mut self, slot: u32) {
        let s = &self.slots[slot as usize];
        let (older, newer, tenant) = (s.older, s.newer, s.tenant as usize);
        let (tenant_older, tenant_newer) = (s.tenant_older, s.tenant_newer);
        match older {
            NIL => self.oldest = newer,
            o => self.slots[o as usize].newer = newer,
        }
        match newer {
            NIL => self.newest = older,
            n => self.slots[n as usize].older = older,
        }
        match tenant_older {
            NIL => self.tenants[tenant].oldest = tenant_newer,
            o => self.slots[o as usize].tenant_newer = tenant_newer,
        }
        match tenant_newer {
            NIL => self.tenants[tenant].newest = tenant_older,
            n => self.slots[n as usize].tenant_older = tenant_older,
        }
    }
    /// Put `slot` at the newest end of both LRU lists.
    fn link_newest(&mut self, slot: u32) {
        let newest = self.newest;
        let tenant = self.slots[slot as usize].tenant as usize;
        let tenant_newest = self.tenants[tenant].newest;
        {
            let s = &mut self.slots[slot as usize];
            s.older = newest;
            s.newer = NIL;
            s.tenant_older = tenant_newest;
            s.tenant_newer = NIL;
        }
        match newest {
            NIL => self.oldest = slot,
            n => self.slots[n as usize].newer = slot,
        }
        self.newest = slot;
        match tenant_newest {
            NIL => self.tenants[tenant].oldest = slot,
            n => self.slots[n as usize].tenant_newer = slot,
        }
        self.tenants[tenant].newest = slot;
    }
    /// The index of `tenant` in `tenants`, added on first use.
    fn tenant_index(&mut self, tenant: &str) -> u32 {
        if let Some(&index) = self.tenant_ids.get(tenant) {
            return index;
        }
        let index = u32::try_from(self.tenants.len()).expect("fewer than 2^32 tenants");
        self.tenants.push(TenantRuns { count: 0, oldest: NIL, newest: NIL });
        self.tenant_ids.insert(tenant.to_string(), index);
        index
    }
    /// Whether a new run of `tenant` would evict nothing (neither over the store's bound nor the tenant's quota).
    pub fn has_room(&self, tenant: &str) -> bool {
        self.size < self.max_runs && (self.tenant_quota == 0 || self.tenant_runs(tenant) < self.tenant_quota)
    }
    /// Runs `tenant` holds here.
    pub fn tenant_runs(&self, tenant: &str) -> usize {
        self.tenant_ids.get(tenant).map_or(0, |&index| self.tenants[index as usize].count)
    }
    /// Before a run of `tenant` is added: evict the tenant's own least recently used runs while it
    /// is at its quota, then, when the store is full, one run: the least recently used of the
    /// tenant most over its share (the most runs; on a tie, the one whose oldest run is older),
    /// or, with no quota, the store's least recently used.
    fn make_room(&mut self, tenant: &str, evictions: &mut Vec<&'static str>) {
        if self.tenant_quota > 0 {
            if let Some(&index) = self.tenant_ids.get(tenant) {
                while self.tenants[index as usize].count >= self.tenant_quota && self.tenants[index as usize].oldest != NIL {
                    self.evict(self.tenants[index as usize].oldest);
                    evictions.push("tenant_quota");
                }
            }
        }
        if self.size < self.max_runs || self.oldest == NIL {
            return;
        }
        let victim = if self.tenant_quota > 0 { self.oldest_of_largest_tenant() } else { self.oldest };
        self.evict(victim);
        evictions.push("max_runs");
    }
    /// The least recently used run of the tenant holding the most runs (ties: the older run).
    fn oldest_of_largest_tenant(&self) -> u32 {
        let touch_of = |slot: u32| self.entry_at(slot).map_or(u64::MAX, |e| e.touch);
        self.tenants.iter()
            .filter(|t| t.count > 0)
            .max_by(|a, b| a.count.cmp(&b.count).then_with(|| touch_of(b.oldest).cmp(&touch_of(a.oldest))))
            .map_or(self.oldest, |t| t.oldest)
    }
    /// Take the run in `slot` out of the store (its hash chain, the LRU list) and free the slot.
    fn release(&mut self, slot: u32) -> Option<Entry> {
        let entry = self.slots[slot as usize].entry.take()?;
        if entry.tree.as_ref().is_some_and(|link| link.children_created > 0) {
            self.orphans_possible = true; // its held descendants, if any, now lack an ancestor
        }
        if !self.unmerged.is_empty() {
            // An ended or evicted run has nothing left to merge (its stored copy stays as it is).
            self.unmerged.remove(&(entry.tenant.to_string(), entry.run_id.to_string()));
        }
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
        let tenant = self.slots[slot as usize].tenant as usize;
        self.tenants[tenant].count -= 1;
        let s = &mut self.slots[slot as usize];
        s.chain = self.free;
        s.older = NIL;
        s.newer = NIL;
        s.tenant_older = NIL;
        s.tenant_newer = NIL;
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
            self.mark_deleted(&evicted.tenant, &evicted.run_id, evicted.root_id(), true);
        }
    }
    /// The run marked most recently used; false when none is held (or it idled past its TTL).
    pub(super) fn touch(&mut self, tenant: &str, run_id: &str, now: f64, evictions: &mut Vec<&'static str>) -> bool {
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
    pub(super) fn create(&mut self, tenant: &str, run_id: &str, state: RunState, now: f64, evictions: &mut Vec<&'static str>) {
        self.make_room(tenant, evictions);
        self.touches += 1;
        let entry = Entry {
            tenant: tenant.into(),
            run_id: run_id.into(),
            state,
            agent_id: Box::default(),
            session_id: Box::default(),
            last_seen: now,
            touch: self.touches,
            events_evaluated: 0,
            recent: None,
            retries: None,
            dirty: false,
            tree: None,
            unlinked_calls: 0,
            owner_gen: 0,
            lease_until: f64::INFINITY,
            base: None,
        };
        let slot = self.insert(entry);
        self.mark(slot);
    }
    /// Place a run in a free slot (or a new one) as the most recently used.
    fn insert(&mut self, entry: Entry) -> u32 {
        if let Some(link) = &entry.tree {
            // A stored run taken in (a restart, a shared store's load) may come without its tree.
            let lacks = |id: &str| !id.is_empty() && self.find(&entry.tenant, id).is_none();
            if lacks(&link.parent) || lacks(&link.root) {
                self.orphans_possible = true;
            }
        }
        let hash = key_hash(&entry.tenant, &entry.run_id);
        let chain = self.index.get(&hash).copied().unwrap_or(NIL);
        let tenant = self.tenant_index(&entry.tenant);
        self.tenants[tenant as usize].count += 1;
        let slot = if self.free != NIL {
            let slot = self.free;
            let s = &mut self.slots[slot as usize];
            self.free = s.chain;
            s.entry = Some(entry);
            s.chain = chain;
            s.tenant = tenant;
            slot
        } else {
            let slot = u32::try_from(self.slots.len()).ok().filter(|&s| s != NIL).expect("fewer than 2^32 - 1 runs");
            self.slots.push(Slot { entry: Some(entry), older: NIL, newer: NIL, tenant, tenant_older: NIL, tenant_newer: NIL, chain });
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
        self.remove_rooted(tenant, run_id, "")
    }
    /// `remove`, naming the run's tree root for a run not held here ("" = the run itself).
    pub fn remove_rooted(&mut self, tenant: &str, run_id: &str, root: &str) -> bool {
        let root = self.get(tenant, run_id).map(|e| e.root_id().to_string()).unwrap_or_else(|| root.to_string());
        self.mark_deleted(tenant, run_id, &root, false);
        self.clear_unmerged(tenant, run_id);
        match self.find(tenant, run_id) {
            Some(slot) => self.release(slot).is_some(),
            None => false,
        }
    }
    pub fn set_owner_gen(&mut self, tenant: &str, run_id: &str, gen: u64) {
        if let Some(entry) = self.get_mut(tenant, run_id) {
            entry.owner_gen = gen;
        }
    }
    /// Note until when this replica's lease on a held run is known to be live (`lease_until`).
    pub fn set_lease(&mut self, tenant: &str, run_id: &str, until: f64) {
        if let Some(entry) = self.get_mut(tenant, run_id) {
            entry.lease_until = until;
        }
    }
    /// Held, read from the store (not unmerged) and its lease not lapsed at `now`: memory's copy
    /// may answer for the run. One lookup, and a float compare: this is on every lazy event.
    pub fn current(&self, tenant: &str, run_id: &str, now: f64) -> bool {
        self.get(tenant, run_id).is_some_and(|e| now < e.lease_until) && !self.is_unmerged(tenant, run_id)
    }
    /// Held and its lease lapsed at `now` (keeper.py then re-reads the stored copy).
    pub fn lease_lapsed(&self, tenant: &str, run_id: &str, now: f64) -> bool {
        self.get(tenant, run_id).is_some_and(|e| now >= e.lease_until)
    }
    /// Drop a held run without a delete for the state store (another replica owns it: the
    /// next event loads the owner's copy). False when it was not held.
    pub fn forget(&mut self, tenant: &str, run_id: &str) -> bool {
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

impl Entry {
    pub fn recent_decisions(&self) -> Vec<&Decision> {
        self.recent.as_ref().map(|r| r.iter().collect()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(run_id: &str) -> RunKey {
        ("t".to_string(), run_id.to_string())
    }

    /// The held run ids, least recently used first (the LRU list walked from its head).
    fn lru(store: &Store) -> Vec<String> {
        let mut out = Vec::new();
        let mut at = store.oldest;
        while at != NIL {
            out.push(store.slots[at as usize].entry.as_ref().expect("linked slots hold runs").run_id.to_string());
            at = store.slots[at as usize].newer;
        }
        out
    }

    /// Create `run_id` at `now`: the eviction reasons it caused.
    fn create(store: &mut Store, run_id: &str, now: f64) -> Vec<&'static str> {
        let mut evictions = Vec::new();
        store.create("t", run_id, RunState::new(30), now, &mut evictions);
        evictions
    }

    fn touch(store: &mut Store, run_id: &str, now: f64) -> (bool, Vec<&'static str>) {
        let mut evictions = Vec::new();
        let held = store.touch("t", run_id, now, &mut evictions);
        (held, evictions)
    }

    #[test]
    fn a_full_store_evicts_the_least_recently_used_run() {
        let mut store = Store::new(3, 100.0);
        for (i, run) in ["a", "b", "c"].iter().enumerate() {
            assert!(create(&mut store, run, i as f64).is_empty());
        }
        assert_eq!(lru(&store), ["a", "b", "c"]);
        assert_eq!(touch(&mut store, "a", 3.0), (true, vec![]));
        assert_eq!(lru(&store), ["b", "c", "a"]);

        assert_eq!(create(&mut store, "d", 4.0), ["max_runs"]);
        assert_eq!(lru(&store), ["c", "a", "d"]);
        assert!(store.get("t", "b").is_none());
        assert_eq!(create(&mut store, "e", 5.0), ["max_runs"]);
        assert_eq!(lru(&store), ["a", "d", "e"]);
        assert_eq!(store.len(), 3);
        assert_eq!(store.slots.len(), 3, "evicted slots are reused");
    }

    #[test]
    fn runs_are_told_apart_by_tenant_and_id() {
        let mut store = Store::new(10, 100.0);
        let mut evictions = Vec::new();
        store.create("t1", "run", RunState::new(30), 0.0, &mut evictions);
        store.create("t2", "run", RunState::new(30), 0.0, &mut evictions);
        store.get_mut("t2", "run").unwrap().agent_id = "second".into();
        assert_eq!(&*store.get("t1", "run").unwrap().agent_id, "");
        assert_eq!(&*store.get("t2", "run").unwrap().agent_id, "second");
        assert!(store.get("t3", "run").is_none());
    }

    #[test]
    fn a_touch_past_the_idle_ttl_evicts_the_run() {
        let mut store = Store::new(10, 5.0);
        create(&mut store, "a", 0.0);
        assert_eq!(touch(&mut store, "a", 5.0), (true, vec![]), "idle exactly the TTL: still held");
        assert_eq!(touch(&mut store, "a", 10.5), (false, vec!["idle_ttl"]));
        assert!(store.is_empty());
        assert_eq!(touch(&mut store, "missing", 11.0), (false, vec![]));
    }

    #[test]
    fn expire_idle_drops_the_oldest_first_within_its_budget() {
        let mut store = Store::new(10, 10.0);
        create(&mut store, "a", 0.0);
        create(&mut store, "b", 5.0);
        create(&mut store, "c", 20.0);
        // Cutoff 6: a and b are idle past the TTL; c is not.
        assert_eq!(store.expire_idle(16.0, 1), 1);
        assert_eq!(lru(&store), ["b", "c"]);
        assert_eq!(store.expire_idle(16.0, 10), 1);
        assert_eq!(lru(&store), ["c"]);
        assert_eq!(store.expire_idle(16.0, 10), 0);
    }

    #[test]
    fn expire_idle_follows_touches() {
        let mut store = Store::new(10, 10.0);
        create(&mut store, "a", 0.0);
        create(&mut store, "b", 1.0);
        touch(&mut store, "a", 8.0);
        assert_eq!(store.expire_idle(12.0, 10), 1);
        assert_eq!(lru(&store), ["a"]);
    }

    #[test]
    fn remove_frees_the_run_and_its_slot() {
        let mut store = Store::new(100, 100.0);
        for i in 0..50 {
            create(&mut store, &format!("run-{i}"), 0.0);
        }
        for i in (1..50).step_by(2) {
            assert!(store.remove("t", &format!("run-{i}")));
        }
        assert!(!store.remove("t", "run-1"), "already gone");
        assert!(!store.remove("t", "never-held"));
        assert_eq!(store.len(), 25);
        for i in 0..50 {
            assert_eq!(store.get("t", &format!("run-{i}")).is_some(), i % 2 == 0, "run-{i}");
        }
        create(&mut store, "new", 1.0);
        assert_eq!(store.slots.len(), 50, "a freed slot is reused");
        assert_eq!(lru(&store).last().map(String::as_str), Some("new"));
    }

    #[test]
    fn take_dirty_lists_each_changed_run_once_in_the_order_it_changed() {
        let mut store = Store::new(10, 100.0);
        store.track_changes(false);
        create(&mut store, "a", 0.0);
        create(&mut store, "b", 0.0);
        assert_eq!(store.dirty_count(), 2);
        assert_eq!(store.take_dirty(), [(key("a"), true), (key("b"), true)]);
        assert_eq!(store.take_dirty(), []);
        assert_eq!(store.dirty_count(), 0);

        touch(&mut store, "b", 1.0);
        touch(&mut store, "a", 2.0);
        touch(&mut store, "b", 3.0);
        assert_eq!(store.take_dirty(), [(key("b"), true), (key("a"), true)]);
    }

    #[test]
    fn an_ended_run_is_a_delete_and_a_new_run_of_its_key_a_write() {
        let mut store = Store::new(10, 100.0);
        store.track_changes(false);
        create(&mut store, "a", 0.0);
        create(&mut store, "b", 0.0);
        store.take_dirty();
        assert!(store.remove("t", "a"));
        assert!(!store.remove("t", "held-elsewhere"));
        let mut taken = store.take_dirty();
        taken.sort();
        assert_eq!(taken, [(key("a"), false), (key("held-elsewhere"), false)]);

        store.remove("t", "b");
        create(&mut store, "b", 1.0);
        assert_eq!(store.take_dirty(), [(key("b"), true)]);
    }

    #[test]
    fn evictions_are_deletes_only_when_asked() {
        for evictions_delete in [false, true] {
            let mut store = Store::new(1, 100.0);
            store.track_changes(evictions_delete);
            create(&mut store, "a", 0.0);
            store.take_dirty();
            assert_eq!(create(&mut store, "b", 1.0), ["max_runs"]);
            let expected = if evictions_delete { vec![(key("a"), false), (key("b"), true)] } else { vec![(key("b"), true)] };
            assert_eq!(store.take_dirty(), expected, "evictions_delete: {evictions_delete}");
        }
    }

    #[test]
    fn redirty_puts_back_what_a_failed_flush_did_not_write() {
        let mut store = Store::new(10, 100.0);
        store.track_changes(false);
        create(&mut store, "a", 0.0);
        create(&mut store, "b", 0.0);
        store.remove("t", "c");
        let mut failed = store.take_dirty();
        failed.sort();
        assert_eq!(failed, [(key("a"), true), (key("b"), true), (key("c"), false)]);

        touch(&mut store, "a", 1.0); // changed again since: keeps its one mark
        store.redirty(failed.clone());
        assert_eq!(store.dirty_count(), 3);
        let mut again = store.take_dirty();
        again.sort();
        assert_eq!(again, failed);
    }

    #[test]
    fn a_run_written_by_a_flush_is_listed_again_by_its_next_change() {
        let mut store = Store::new(10, 3600.0);
        store.track_changes(true);
        for id in ["a", "b", "c"] {
            create(&mut store, id, 0.0);
        }
        assert_eq!(3, store.take_dirty().len());
        // All three change again while the flush runs; "a" is written after its change.
        for id in ["a", "b", "c"] {
            store.changed("t", id);
        }
        store.written("t", "a");
        assert_eq!(2, store.dirty_count());
        store.changed("t", "a"); // changed after its write: listed behind b and c
        let order: Vec<RunKey> = store.take_dirty().into_iter().map(|(k, _)| k).collect();
        assert_eq!(vec![key("b"), key("c"), key("a")], order);
        assert_eq!(0, store.dirty_count());
    }

    #[test]
    fn without_tracking_nothing_is_listed() {
        let mut store = Store::new(10, 100.0);
        create(&mut store, "a", 0.0);
        store.remove("t", "a");
        assert_eq!(store.dirty_count(), 0);
        assert_eq!(store.take_dirty(), []);
        store.redirty(vec![(key("a"), true)]);
        assert_eq!(store.dirty_count(), 0);
    }

    /// Create `run_id` for `tenant` at `now`: the eviction reasons it caused.
    fn create_for(store: &mut Store, tenant: &str, run_id: &str, now: f64) -> Vec<&'static str> {
        let mut evictions = Vec::new();
        store.create(tenant, run_id, RunState::new(30), now, &mut evictions);
        evictions
    }

    /// (tenant, run id) of every held run, least recently used first.
    fn held(store: &Store) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut at = store.oldest;
        while at != NIL {
            let entry = store.slots[at as usize].entry.as_ref().expect("linked slots hold runs");
            out.push((entry.tenant.to_string(), entry.run_id.to_string()));
            at = store.slots[at as usize].newer;
        }
        out
    }

    #[test]
    fn a_tenant_over_its_quota_evicts_only_its_own_least_recently_used_run() {
        let mut store = Store::new(10, 1000.0);
        store.tenant_quota = 3;
        assert!(create_for(&mut store, "b", "b-1", 0.0).is_empty());
        for i in 0..3 {
            assert!(create_for(&mut store, "a", &format!("a-{i}"), 1.0 + i as f64).is_empty());
        }
        let mut evictions = Vec::new();
        assert!(store.touch("a", "a-0", 5.0, &mut evictions), "a-0 is now a's most recently used");
        // Ten times a's quota: every new run of a's pushes out a's own oldest, never b's run.
        for i in 3..30 {
            assert_eq!(create_for(&mut store, "a", &format!("a-{i}"), 10.0 + i as f64), ["tenant_quota"], "a-{i}");
            assert_eq!(store.tenant_runs("a"), 3);
            assert!(store.get("b", "b-1").is_some(), "b's run survives a-{i}");
        }
        assert_eq!(held(&store), [("b", "b-1"), ("a", "a-27"), ("a", "a-28"), ("a", "a-29")]
            .map(|(t, r)| (t.to_string(), r.to_string())));
        assert_eq!(store.len(), 4);
        assert_eq!(store.slots.len(), 4, "evicted slots are reused");
    }

    #[test]
    fn a_touch_keeps_a_run_in_its_tenants_lru_order() {
        let mut store = Store::new(10, 1000.0);
        store.tenant_quota = 2;
        create_for(&mut store, "a", "a-1", 0.0);
        create_for(&mut store, "a", "a-2", 1.0);
        let mut evictions = Vec::new();
        store.touch("a", "a-1", 2.0, &mut evictions);
        assert_eq!(create_for(&mut store, "a", "a-3", 3.0), ["tenant_quota"]);
        assert!(store.get("a", "a-2").is_none(), "the least recently used of a's runs goes");
        assert!(store.get("a", "a-1").is_some() && store.get("a", "a-3").is_some());
        assert!(store.remove("a", "a-1"));
        assert_eq!(store.tenant_runs("a"), 1);
        assert!(create_for(&mut store, "a", "a-4", 4.0).is_empty(), "an ended run frees its place in the quota");
    }

    #[test]
    fn a_full_store_evicts_from_the_tenant_most_over_its_share() {
        // Quotas that add up to more than the store: the whole store fills before a tenant's quota.
        let mut store = Store::new(5, 1000.0);
        store.tenant_quota = 4;
        create_for(&mut store, "b", "b-1", 0.0);
        create_for(&mut store, "c", "c-1", 1.0);
        for i in 0..3 {
            create_for(&mut store, "a", &format!("a-{i}"), 2.0 + i as f64);
        }
        // b holds the store's least recently used run, but a holds the most: a's oldest goes.
        assert_eq!(create_for(&mut store, "c", "c-2", 10.0), ["max_runs"]);
        assert!(store.get("a", "a-0").is_none());
        assert!(store.get("b", "b-1").is_some());
        // a and c now hold two each: the tie goes to the tenant whose oldest run is older (c's c-1).
        assert_eq!(create_for(&mut store, "b", "b-2", 11.0), ["max_runs"]);
        assert!(store.get("c", "c-1").is_none());
        assert_eq!(store.len(), 5);
    }

    #[test]
    fn without_a_quota_one_tenant_may_evict_another() {
        let mut store = Store::new(3, 1000.0);
        create_for(&mut store, "b", "b-1", 0.0);
        create_for(&mut store, "a", "a-1", 1.0);
        create_for(&mut store, "a", "a-2", 2.0);
        assert_eq!(create_for(&mut store, "a", "a-3", 3.0), ["max_runs"]);
        assert!(store.get("b", "b-1").is_none(), "single-tenant behaviour: the store's oldest run goes");
    }

    #[test]
    fn a_lowered_quota_trims_the_tenant_on_its_next_new_run() {
        let mut store = Store::new(100, 1000.0);
        for i in 0..6 {
            create_for(&mut store, "a", &format!("a-{i}"), i as f64);
        }
        store.tenant_quota = 3;
        assert_eq!(create_for(&mut store, "a", "a-6", 10.0), ["tenant_quota"; 4]);
        assert_eq!(store.tenant_runs("a"), 3);
        assert!(store.get("a", "a-4").is_some() && store.get("a", "a-5").is_some() && store.get("a", "a-6").is_some());
    }

    #[test]
    fn a_restored_run_counts_against_its_tenants_quota() {
        let mut store = Store::new(10, 1000.0);
        store.tenant_quota = 1;
        create_for(&mut store, "a", "a-1", 0.0);
        create_for(&mut store, "b", "b-1", 0.0);
        let entry = Entry {
            tenant: "a".into(), run_id: "a-2".into(), state: RunState::new(30), agent_id: Box::default(),
            session_id: Box::default(), last_seen: 0.0, touch: 0, events_evaluated: 0, recent: None, retries: None,
            dirty: false, tree: None, unlinked_calls: 0, owner_gen: 0, lease_until: f64::INFINITY, base: None,
        };
        let mut evictions = Vec::new();
        store.restore(entry, 0.0, 1.0, &mut evictions);
        assert_eq!(evictions, ["tenant_quota"]);
        assert!(store.get("a", "a-1").is_none() && store.get("a", "a-2").is_some() && store.get("b", "b-1").is_some());
    }

    #[test]
    fn clear_keeps_the_tenant_quota() {
        let mut store = Store::new(10, 1000.0);
        store.tenant_quota = 2;
        create_for(&mut store, "a", "a-1", 0.0);
        store.clear();
        assert_eq!(store.tenant_quota, 2);
        assert_eq!(store.tenant_runs("a"), 0);
    }

    #[test]
    fn forget_drops_a_run_without_a_delete() {
        let mut store = Store::new(10, 100.0);
        store.track_changes(false);
        create(&mut store, "a", 0.0);
        store.take_dirty();
        store.set_owner_gen("t", "a", 7);
        assert_eq!(store.get("t", "a").unwrap().owner_gen, 7);
        assert!(store.forget("t", "a"));
        assert!(!store.forget("t", "a"));
        assert!(store.get("t", "a").is_none());
        assert_eq!(store.take_dirty(), []);
    }

    #[test]
    fn a_run_whose_lease_lapsed_is_not_current() {
        let mut store = Store::new(10, 100.0);
        create(&mut store, "a", 0.0);
        assert!(store.current("t", "a", 1e12), "no lease watched: always current");
        store.set_lease("t", "a", 5.0);
        assert!(store.current("t", "a", 4.9) && !store.lease_lapsed("t", "a", 4.9));
        assert!(!store.current("t", "a", 5.0) && store.lease_lapsed("t", "a", 5.0));
        assert!(!store.current("t", "b", 0.0) && !store.lease_lapsed("t", "b", 0.0));
        assert!(store.mark_unmerged("t", "a", ""));
        store.set_lease("t", "a", f64::INFINITY);
        assert!(!store.current("t", "a", 0.0), "unmerged: not current");
    }

    #[test]
    fn clear_empties_the_store_and_keeps_tracking() {
        let mut store = Store::new(10, 100.0);
        store.track_changes(true);
        create(&mut store, "a", 0.0);
        store.clear();
        assert!(store.is_empty() && store.get("t", "a").is_none());
        assert_eq!(store.dirty_count(), 0);
        create(&mut store, "b", 0.0);
        assert_eq!(store.take_dirty(), [(key("b"), true)]);
    }
}
