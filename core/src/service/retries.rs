//! The retry window (`retries.py`): a client that resends an event it got no answer for (same
//! seq, same content) gets the verdict it was given the first time, and the run's state is not
//! touched twice. Apart from the store because it is per run, bounded, and persisted with the
//! run, so its content digest must match the Python engine's byte for byte.

use std::collections::HashMap;

use super::Decision;
use crate::pb;

/// How many of a run's latest evaluated events (seq not 0) the window remembers, as a ring.
pub const RETRY_WINDOW: usize = 64;

#[derive(Default)]
pub(crate) struct Retries {
    pub(crate) seqs: Vec<u64>,
    pub(crate) digests: Vec<[u8; 8]>,
    pub(crate) decisions: HashMap<usize, Decision>,
    pub(crate) next_slot: usize,
}

impl Retries {
    pub(super) fn find(&self, seq: u64, digest: &[u8; 8]) -> Option<usize> {
        (0..self.seqs.len()).find(|&i| self.seqs[i] == seq && &self.digests[i] == digest)
    }
    pub(super) fn remember(&mut self, seq: u64, digest: [u8; 8], decision: Option<Decision>) {
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
