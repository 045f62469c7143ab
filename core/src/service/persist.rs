//! The glue between the run store and a shared state store (`crate::state` holds the record
//! format): a held run encoded for writing, a stored run taken back in. Apart from the request
//! path because Python calls it on its own schedule (flushes, restores, lazy loads).

use super::merge::merge;
use super::retries::{Retries, RETRY_WINDOW};
use super::store::Entry;
use super::{Core, Decision};
use crate::engine::Verdict;

/// Run records as stored values (statestore/encoding.py's format, version 3): the magic
/// b"LWR\x03" and a zlib stream (RFC 1950) of the record's JSON at level 1, as `frame` there.
/// One compressor is reset between records instead of a new one each (its ~300 KB of tables
/// allocated and cleared per record cost ~3x the compression itself). Pure bytes to bytes, no
/// core state, so the flush runs it on a worker thread with the GIL let go.
pub struct Framer(Box<miniz_oxide::deflate::core::CompressorOxide>);

impl Default for Framer {
    fn default() -> Self {
        use miniz_oxide::deflate::core::{create_comp_flags_from_zip_params, CompressionStrategy, CompressorOxide};
        // Level 1, a 32 KiB window with a zlib header (window bits 15 > 0), default strategy.
        let flags = create_comp_flags_from_zip_params(1, 15, CompressionStrategy::Default as i32);
        Framer(Box::new(CompressorOxide::new(flags)))
    }
}

impl Framer {
    pub fn frame(&mut self, record: &[u8]) -> Vec<u8> {
        use miniz_oxide::deflate::core::{compress_to_output, TDEFLFlush, TDEFLStatus};
        self.0.reset();
        let mut out = Vec::with_capacity(4 + record.len() / 2);
        out.extend_from_slice(RUN_MAGIC);
        let (status, _) = compress_to_output(&mut self.0, record, TDEFLFlush::Finish, |chunk| {
            out.extend_from_slice(chunk);
            true
        });
        debug_assert!(matches!(status, TDEFLStatus::Done), "deflate of an in-memory record cannot fail");
        out
    }
}

/// One record framed (a new compressor: for one-off use; a batch uses one `Framer`).
pub fn frame(record: &[u8]) -> Vec<u8> {
    Framer::default().frame(record)
}

pub const RUN_MAGIC: &[u8; 4] = b"LWR\x03";

/// What became of a stored run handed to `Core::load_run`.
pub enum Loaded {
    Restored,
    /// Idle past the TTL: not taken in.
    Expired,
    /// Not the run that was asked for.
    Mismatch,
    /// Merged into the copy memory evaluated while the store was away (`merge_run`).
    Merged,
    /// Memory's copy is current (never marked, or merged already): the record is not used.
    Held,
}

impl Core {
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
        // Pending asks are stored with wall-clock times (a copy only for a run that has some).
        let shifted;
        let state = if entry.state.asks.is_some() {
            let mut copy = entry.state.clone();
            crate::engine::ask::shift_times(&mut copy, wall_now - now);
            shifted = copy;
            &shifted
        } else {
            &entry.state
        };
        Some(crate::state::encode(&crate::state::RunRecord {
            tenant: &entry.tenant,
            run_id: &entry.run_id,
            agent_id: &entry.agent_id,
            session_id: &entry.session_id,
            last_seen: wall_now - (now - entry.last_seen).max(0.0),
            events_evaluated: entry.events_evaluated,
            state,
            retries,
            tree: entry.tree.as_deref().map(|link| (link, wall_now - (now - link.started))),
        }))
    }

    /// Take in a stored run's record (keeper.py's restore and lazy load). `expect`: the
    /// (tenant, run_id) asked for, when one was. Err: the record is malformed (it names the field).
    pub fn load_run(&mut self, record: &[u8], wall_now: f64, now: f64, expect: Option<(&str, &str)>,
                    evictions: &mut Vec<&'static str>) -> Result<Loaded, String> {
        match self.stored_entry(record, wall_now, now, expect)? {
            Ok((entry, idle)) => {
                self.store.restore(entry, idle, now, evictions);
                Ok(Loaded::Restored)
            }
            Err(skipped) => Ok(skipped),
        }
    }

    /// A stored record after a failed load (keeper.py's retry): merged into the run memory
    /// evaluated meanwhile when it is held and marked unmerged (see `merge`), taken in as by
    /// `load_run` when it is not held, left alone when memory's copy is already current
    /// (`Held`). The mark is lifted in every case but `Held`'s (which has none).
    pub fn merge_run(&mut self, record: &[u8], wall_now: f64, now: f64, expect: (&str, &str),
                     evictions: &mut Vec<&'static str>) -> Result<Loaded, String> {
        let (tenant, run_id) = expect;
        let held = self.store.get(tenant, run_id).is_some();
        if held && !self.store.is_unmerged(tenant, run_id) {
            return Ok(Loaded::Held);
        }
        let stored = match self.stored_entry(record, wall_now, now, Some(expect)) {
            Ok(Ok(found)) => found,
            other => {
                // Nothing usable stored (expired, another run, malformed): memory's copy is all.
                self.store.clear_unmerged(tenant, run_id);
                return other.map(|o| o.err().unwrap_or(Loaded::Expired));
            }
        };
        self.store.clear_unmerged(tenant, run_id);
        let Some(memory) = self.store.get_mut(tenant, run_id) else {
            self.store.restore(stored.0, stored.1, now, evictions);
            return Ok(Loaded::Restored);
        };
        merge(memory, stored.0);
        self.store.changed(tenant, run_id);
        Ok(Loaded::Merged)
    }

    /// A record decoded into a run-store entry and its idle time, or why it is not taken in.
    fn stored_entry(&self, record: &[u8], wall_now: f64, now: f64, expect: Option<(&str, &str)>)
                    -> Result<Result<(Entry, f64), Loaded>, String> {
        let mut d = crate::state::decode(record, RETRY_WINDOW)?;
        crate::engine::ask::shift_times(&mut d.state, now - wall_now);
        let idle = (wall_now - d.last_seen).max(0.0);
        if idle > self.store.idle_ttl {
            return Ok(Err(Loaded::Expired));
        }
        if let Some((tenant, run_id)) = expect {
            if (d.tenant.as_str(), d.run_id.as_str()) != (tenant, run_id) {
                return Ok(Err(Loaded::Mismatch));
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
            // `started` is stored as wall-clock seconds: back on the store's clock.
            tree: d.tree.map(|mut link| {
                link.started = now - (wall_now - link.started);
                Box::new(link)
            }),
            unlinked_calls: 0,
            owner_gen: 0,
        };
        Ok(Ok((entry, idle)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A framed value is the magic and a zlib stream any zlib reads: checked against a stored
    /// value framed by encoding.py (zlib level 1) by tests/statestore/test_encoding.py; here the
    /// stream's own inflate gives the record back.
    #[test]
    fn a_framed_record_is_the_magic_and_a_zlib_stream_of_it() {
        let record = br#"{"tenant":"","run_id":"r","args":"00ff00ff00ff00ff"}"#.repeat(20);
        let value = frame(&record);
        assert_eq!(RUN_MAGIC, &value[..4]);
        assert_eq!(0x78, value[4], "a zlib header (deflate, 32K window)");
        assert_eq!(record, miniz_oxide::inflate::decompress_to_vec_zlib(&value[4..]).unwrap());
        assert!(value.len() < record.len() / 4, "compressed: {} of {}", value.len(), record.len());
    }

    /// A reused compressor gives each record its own complete stream, the same as a new one.
    #[test]
    fn a_reused_framer_frames_each_record_as_a_new_one_does() {
        let mut framer = Framer::default();
        let first = br#"{"args":"0123456789abcdef0123456789abcdef"}"#.repeat(50);
        let second = br#"{"run_id":"another"}"#.to_vec();
        for record in [&first, &second, &first] {
            let value = framer.frame(record);
            assert_eq!(frame(record), value);
            assert_eq!(*record, miniz_oxide::inflate::decompress_to_vec_zlib(&value[4..]).unwrap());
        }
    }
}
