//! What lets a history record be 76 bytes instead of 104: its tool name as a u16 id into one
//! process-wide table, and its rare extras (a pending call's id, the missing tool an error
//! named, the high half of a seq past u32::MAX) behind a u32 handle instead of an 8-byte pointer.
//!
//! Tool names are shared by every record of every run (Python interns them the same way), up
//! to a bound past which a hostile stream of ever-new names gets no id: such a record keeps its
//! own copy of the name among its extras. Names with an id live as long as the process, as the
//! interned Arc<str>s before them did (the table never shrank).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Ids 0..MAX_TOOL_IDS name a table entry; OVERFLOW says "the name is in the record's extras".
pub const MAX_TOOL_IDS: usize = 65_535;
pub const OVERFLOW: u16 = u16::MAX;

const SEGMENT: usize = 256;
/// id -> name without a lock (history scans and views read names; only interning writes).
static SEGMENTS: [OnceLock<Box<[OnceLock<&'static str>]>>; MAX_TOOL_IDS / SEGMENT + 1] =
    [const { OnceLock::new() }; MAX_TOOL_IDS / SEGMENT + 1];
static IDS: OnceLock<Mutex<HashMap<&'static str, u16>>> = OnceLock::new();
/// id -> 1 + the id of the normalised name it spells (0: the name is itself normalised). A
/// record keeps the id of its host's spelling (`Bash`) and matches by this (`exec`): one load.
static CANONICAL: [AtomicU16; MAX_TOOL_IDS] = [const { AtomicU16::new(0) }; MAX_TOOL_IDS];

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The id of a (normalised) tool name, interning it while there is room; OVERFLOW after (and
/// for a name already interned as the spelling of another normalised name, which only a
/// normalisation that is not idempotent could give: records of it then compare by name).
pub fn tool_id(name: &str) -> u16 {
    let mut ids = locked(IDS.get_or_init(Default::default));
    if let Some(&id) = ids.get(name) {
        return if canonical(id) == id { id } else { OVERFLOW };
    }
    insert(&mut ids, name)
}

/// The id of a host's spelling of the normalised name `canonical_id` names (`Bash` of `exec`),
/// interning it while there is room. `canonical_id` itself when the spelling is the normalised
/// name, when there is no room, or when the spelling is already interned as another name.
pub fn spelling_id(spelling: &str, canonical_id: u16) -> u16 {
    if canonical_id == OVERFLOW || tool_name(canonical_id) == Some(spelling) {
        return canonical_id;
    }
    let mut ids = locked(IDS.get_or_init(Default::default));
    if let Some(&id) = ids.get(spelling) {
        return if canonical(id) == canonical_id { id } else { canonical_id };
    }
    let id = insert(&mut ids, spelling);
    if id == OVERFLOW {
        return canonical_id;
    }
    CANONICAL[id as usize].store(canonical_id + 1, Ordering::Release);
    id
}

/// The id of the normalised name an id spells (itself for a normalised name and OVERFLOW).
#[inline]
pub fn canonical(id: u16) -> u16 {
    match CANONICAL.get(id as usize).map_or(0, |c| c.load(Ordering::Acquire)) {
        0 => id,
        c => c - 1,
    }
}

fn insert(ids: &mut HashMap<&'static str, u16>, name: &str) -> u16 {
    let id = ids.len();
    if id >= MAX_TOOL_IDS {
        return OVERFLOW;
    }
    let name: &'static str = Box::leak(name.into());
    let segment = SEGMENTS[id / SEGMENT].get_or_init(|| (0..SEGMENT).map(|_| OnceLock::new()).collect());
    let _ = segment[id % SEGMENT].set(name);
    ids.insert(name, id as u16);
    id as u16
}

/// The name of an id `tool_id` returned (None for OVERFLOW).
pub fn tool_name(id: u16) -> Option<&'static str> {
    SEGMENTS.get(id as usize / SEGMENT)?.get()?.get(id as usize % SEGMENT)?.get().copied()
}

/// A record's rare fields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordExtra {
    pub call_id: Option<Box<str>>,
    pub unknown: Option<Box<str>>,
    /// The tool name of a record whose tool has no id (OVERFLOW).
    pub tool: Option<Box<str>>,
    /// The identity of a terminal exec failure (`crate::exec_failure`), when execFailureStreak is
    /// on: boxed, so the extras every pending call with an id holds grow by 8 bytes, not 33.
    pub failure: Option<Box<[u8; 32]>>,
    /// The high half of a seq past u32::MAX (a record keeps the low half itself).
    pub seq_high: u32,
    /// The ToolCall fields the record carries into InspectRun (carried_gen.rs).
    pub carried: crate::carried_gen::Carried,
}

impl RecordExtra {
    fn is_empty(&self) -> bool {
        self.call_id.is_none() && self.unknown.is_none() && self.tool.is_none() && self.failure.is_none()
            && self.seq_high == 0 && self.carried.is_empty()
    }
}

struct Extras {
    items: Vec<Option<Box<RecordExtra>>>,
    free: Vec<u32>,
}

static EXTRAS: Mutex<Extras> = Mutex::new(Extras { items: Vec::new(), free: Vec::new() });

/// Owner of one RecordExtra in the process-wide table (0: none). Cloning copies the extras into
/// a handle of its own; dropping frees them.
#[derive(Debug, Default)]
pub struct ExtraHandle(u32);

impl ExtraHandle {
    pub fn new(extra: RecordExtra) -> ExtraHandle {
        if extra.is_empty() {
            return ExtraHandle(0);
        }
        let mut extras = locked(&EXTRAS);
        let boxed = Some(Box::new(extra));
        match extras.free.pop() {
            Some(index) => {
                extras.items[index as usize] = boxed;
                ExtraHandle(index + 1)
            }
            None => {
                extras.items.push(boxed);
                let index = u32::try_from(extras.items.len()).expect("fewer than 2^32 record extras");
                ExtraHandle(index)
            }
        }
    }

    /// Has extras (without looking them up).
    #[inline]
    pub fn is_some(&self) -> bool {
        self.0 != 0
    }

    pub fn get(&self) -> Option<&RecordExtra> {
        if self.0 == 0 {
            return None;
        }
        let extras = locked(&EXTRAS);
        let extra: *const RecordExtra = &**extras.items.get(self.0 as usize - 1)?.as_ref()?;
        drop(extras);
        // SAFETY: the Box at this index belongs to this handle alone. Only `release` (from Drop
        // or `&mut self`) takes it out or frees it, and neither can run while the returned borrow
        // of `self` lives; the table's Vec may move the Box pointer, never the RecordExtra.
        Some(unsafe { &*extra })
    }

    fn release(&mut self) {
        if self.0 == 0 {
            return;
        }
        let index = self.0 - 1;
        self.0 = 0;
        let freed = {
            let mut extras = locked(&EXTRAS);
            let freed = extras.items.get_mut(index as usize).and_then(Option::take);
            extras.free.push(index);
            freed
        };
        drop(freed);
    }
}

impl Clone for ExtraHandle {
    fn clone(&self) -> ExtraHandle {
        match self.get() {
            Some(extra) => ExtraHandle::new(extra.clone()),
            None => ExtraHandle(0),
        }
    }
}

impl Drop for ExtraHandle {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_tool() {
        let a = tool_id("intern-test-read");
        assert_eq!(tool_id("intern-test-read"), a);
        assert_ne!(tool_id("intern-test-write"), a);
        assert_eq!(tool_name(a), Some("intern-test-read"));
    }

    #[test]
    fn a_spelling_has_an_id_of_its_own_that_folds_to_its_normalised_name() {
        let exec = tool_id("intern-test-exec");
        let bash = spelling_id("Intern-Test-Bash", exec);
        assert_ne!(bash, exec);
        assert_eq!((canonical(bash), canonical(exec)), (exec, exec));
        assert_eq!(spelling_id("Intern-Test-Bash", exec), bash, "interned once");
        assert_eq!(spelling_id("intern-test-exec", exec), exec, "the normalised name is its own spelling");
        let other = tool_id("intern-test-other");
        assert_eq!(spelling_id("Intern-Test-Bash", other), other, "a spelling of another name is not kept");
        assert_eq!(tool_id("Intern-Test-Bash"), OVERFLOW, "nor used as a normalised name: those compare by name");
        assert_eq!(spelling_id("x", OVERFLOW), OVERFLOW);
    }

    #[test]
    fn extras_are_owned() {
        let extra = RecordExtra { call_id: Some("c1".into()), ..Default::default() };
        let a = ExtraHandle::new(extra.clone());
        let b = a.clone();
        drop(a);
        assert_eq!(b.get(), Some(&extra));
        assert!(ExtraHandle::new(RecordExtra::default()).get().is_none());
    }
}
