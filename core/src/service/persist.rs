//! The glue between the run store and a shared state store (`crate::stored` holds the stored
//! format): a held run encoded for writing, a stored run taken back in. Apart from the request
//! path because Python calls it on its own schedule (flushes, restores, lazy loads).

use super::merge::merge;
use super::retries::{Retries, RETRY_WINDOW};
use super::store::{Base, Entry};
use super::{Core, Decision};
use crate::engine::Verdict;

/// A run as a flush writes it: its stored value either way (stored.rs).
pub enum ForFlush {
    /// The full record.
    Record(Vec<u8>),
    /// A delta against the run's last full record.
    Delta(Vec<u8>),
}

/// What became of a stored run handed to `Core::load_run`.
pub enum Loaded {
    Restored,
    /// Restored from its full record; the delta stored after it did not apply and was left out.
    RestoredBaseOnly,
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
    /// The run's stored value (stored.rs), or None when it is not held. `wall_now` and
    /// `now` (the store's clock) turn its last event into wall-clock time.
    pub fn encode_run(&self, tenant: &str, run_id: &str, wall_now: f64, now: f64) -> Option<Vec<u8>> {
        let entry = self.store.get(tenant, run_id)?;
        Some(with_record(entry, wall_now, now, crate::stored::encode))
    }

    /// The run as a flush writes it, or None when it is not held. With `deltas` (a store that
    /// keeps a run's base beside its latest delta: the file store), a run whose last full record
    /// was written is written as a delta against it, only what changed since: its new history
    /// records and its other fields (small); a run with no base, or whose delta
    /// would pass half its base's size, is written in full and that record becomes its base.
    pub fn flush_record(&mut self, tenant: &str, run_id: &str, wall_now: f64, now: f64, deltas: bool) -> Option<ForFlush> {
        let entry = self.store.get_mut(tenant, run_id)?;
        let base = if deltas { entry.base } else { None };
        let (dropped, kept) = entry.state.unsaved();
        let written = with_record(entry, wall_now, now, |run| {
            if let Some(base) = base {
                let delta = crate::stored::encode_delta(run, base.id, dropped, kept);
                if delta.len() * 2 <= base.stored_len() {
                    return ForFlush::Delta(delta);
                }
            }
            ForFlush::Record(crate::stored::encode(run))
        });
        if let ForFlush::Record(record) = &written {
            entry.base = Some(Base::new(crate::stored::record_id(record), record.len()));
            entry.state.mark_saved();
            if let Some(retries) = entry.retries.as_mut() {
                retries.unsaved = 0;
            }
        }
        Some(written)
    }

    /// Take in a stored run's record (keeper.py's restore and lazy load), and the latest delta
    /// stored after it, if any (the file store keeps both). `expect`: the (tenant, run_id) asked
    /// for, when one was. Err: the record is malformed (it names the field). A delta that does
    /// not apply (another base, another run, malformed: the byte damage the file store contains)
    /// is left out and the run comes back as its record holds it: `Loaded::RestoredBaseOnly`.
    pub fn load_run(&mut self, record: &[u8], delta: Option<&[u8]>, wall_now: f64, now: f64,
                    expect: Option<(&str, &str)>, evictions: &mut Vec<&'static str>) -> Result<Loaded, String> {
        let (decoded, base, applied) = decode_stored(record, delta)?;
        match self.stored_entry(decoded, base, wall_now, now, expect)? {
            Ok((entry, idle)) => {
                self.store.restore(entry, idle, now, evictions);
                Ok(if applied || delta.is_none() { Loaded::Restored } else { Loaded::RestoredBaseOnly })
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
        let stored = match decode_stored(record, None).and_then(|(d, base, _)| self.stored_entry(d, base, wall_now, now, Some(expect))) {
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
        memory.base = None; // the merged run is none of the stored records: written in full next
        let (parent, root) = (memory.parent_id().to_string(), memory.root_id().to_string());
        if [parent, root].iter().any(|id| !id.is_empty() && self.store.get(tenant, id).is_none()) {
            self.store.orphans_possible = true; // the stored copy named a tree this replica lacks
        }
        self.store.changed(tenant, run_id);
        Ok(Loaded::Merged)
    }

    /// A decoded run as a run-store entry and its idle time, or why it is not taken in.
    fn stored_entry(&self, mut d: crate::decoded::Decoded, base: Option<Base>, wall_now: f64, now: f64, expect: Option<(&str, &str)>)
                    -> Result<Result<(Entry, f64), Loaded>, String> {
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
        let retries = d.retries.map(|crate::decoded::DecodedRetries { seqs, digests, next_slot, decisions, unsaved, .. }| {
            let decisions = decisions
                .into_iter()
                .map(|(slot, (seq, decision_id, verdict))| (slot, Decision { seq, run_id: d.run_id.clone(), verdict, decision_id }))
                .collect();
            Box::new(Retries::from_parts(&seqs, &digests, decisions, next_slot, unsaved))
        });
        let entry = Entry {
            tenant: d.tenant.into(),
            run_id: d.run_id.into(),
            state: d.state,
            agent_id: d.agent_id.into(),
            session_id: d.session_id.into(),
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
            lease_until: f64::INFINITY,
            base,
        };
        Ok(Ok((entry, idle)))
    }
}

/// `f` of the entry as a `RunRecord`.
fn with_record<R>(entry: &Entry, wall_now: f64, now: f64, f: impl FnOnce(&crate::stored::RunRecord) -> R) -> R {
    let retries = entry.retries.as_ref().map(|r| {
        let mut decisions: Vec<(usize, u64, &str, &Verdict)> =
            r.decisions().map(|(slot, d)| (*slot, d.seq, d.decision_id.as_str(), &d.verdict)).collect();
        decisions.sort_by_key(|d| d.0);
        crate::stored::RetriesRecord { seqs: r.seqs(), digests: r.digests(), next_slot: r.next_slot as usize, decisions,
                                       unsaved: r.unsaved as usize, window: RETRY_WINDOW }
    });
    // Pending asks are stored with wall-clock times (a copy only for a run that has some).
    let shifted;
    let state = if entry.state.rare().asks.is_some() {
        let mut copy = entry.state.clone();
        crate::engine::ask::shift_times(&mut copy, wall_now - now);
        shifted = copy;
        &shifted
    } else {
        &entry.state
    };
    f(&crate::stored::RunRecord {
        tenant: &entry.tenant,
        run_id: &entry.run_id,
        agent_id: &entry.agent_id,
        session_id: &entry.session_id,
        last_seen: wall_now - (now - entry.last_seen).max(0.0),
        events_evaluated: entry.events_evaluated,
        state,
        retries,
        tree: entry.tree.as_deref().map(|link| (link, wall_now - (now - link.started))),
    })
}

/// A stored record and the delta after it, decoded: the run (the delta applied when it is one of
/// this record's, of the same run), the record as its base, and whether the delta was applied.
/// A run read from a JSON-era value has no base: its next flush writes it whole, in this format.
fn decode_stored(record: &[u8], delta: Option<&[u8]>) -> Result<(crate::decoded::Decoded, Option<Base>, bool), String> {
    let stored = crate::stored::decode_value(record, RETRY_WINDOW)?;
    let mut decoded = stored.run;
    decoded.state.mark_saved(); // the record is the run's base as it stands
    let base = Base::new(stored.id, stored.len);
    let kept_base = (!stored.legacy).then_some(base);
    let Some(delta) = delta else { return Ok((decoded, kept_base, false)) };
    let applied = crate::stored::decode_delta(delta, RETRY_WINDOW).and_then(|(id, mut later, kept)| {
        if id != base.id || later.tenant != decoded.tenant || later.run_id != decoded.run_id {
            return Err("a delta of another record".into());
        }
        crate::stored::apply_delta(&decoded, &mut later, kept)?;
        Ok(later)
    });
    Ok(match applied {
        Ok(later) => (later, kept_base, true),
        Err(_) => (decoded, kept_base, false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::engine::Settings;
    use crate::pb;
    use crate::service::{Config, Limits, Summary};
    use std::collections::HashMap;

    fn core(settings: &Settings) -> Core {
        Core::new(Config { default: settings.clone(), ..Default::default() }, Limits::default(), 100, 3600.0, "test".into(), vec![])
    }

    /// xorshift64: the same "random" runs on every machine.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// The record without its `last_seen` (a wall-clock time that round-trips through the
    /// store's clock with float error).
    fn comparable(record: Vec<u8>) -> crate::state_pb::Run {
        use prost::Message;
        let mut run = crate::state_pb::Run::decode(&record[8..]).unwrap();
        run.last_seen = 0.0;
        run
    }

    /// The heart of deltas: whatever the engine did to a run between flushes (calls appended
    /// past the history's capacity, pending calls filled in out of order, batches, progress
    /// flags, user turns clearing the history, retries), the run taken back from its last full
    /// record and its latest delta is, field for field, the run memory holds. Thousands of
    /// steps over several settings, a flush at random points, every run checked after each.
    #[test]
    fn a_run_taken_back_from_its_base_and_latest_delta_is_the_run_in_memory() {
        let variants = [
            Settings { enabled: Some(true), history_size: 8, warning_threshold: 3, critical_threshold: 6, ..Default::default() },
            Settings { enabled: Some(true), history_size: 30, warning_threshold: 10, critical_threshold: 20,
                       user_turn_resets: true, parallel_batches: true, progress_resets_repeats: true,
                       run_wide_breaker_threshold: 12, exec_failure_streak: true, ..Default::default() },
            Settings { enabled: Some(true), history_size: 5, warning_threshold: 2, critical_threshold: 4,
                       user_turn_resets: true, duplicate_side_effect: true, ..Default::default() },
            // The detectors of loops without tool calls: their streaks are part of the run.
            Settings { enabled: Some(true), history_size: 6, warning_threshold: 4, critical_threshold: 8, user_turn_resets: true,
                       repeated_output_warn_at: 2, repeated_output_abort_at: 9, repeated_output_chunk_chars: 8,
                       repeated_output_chunk_repeats: 3, compaction_storm_abort_at: 9, stop_continuation_abort_at: 9,
                       repeated_final_answer_warn_at: 2, repeated_final_answer_abort_at: 9, ..Default::default() },
        ];
        let (wall, tools) = (1_700_000_000.0, ["read", "exec", "Bash", "process", "write"]);
        let (mut deltas, mut records) = (0, 0);
        for (variant, settings) in variants.iter().enumerate() {
            for seed in 1..=4u64 {
                let mut live = core(settings);
                let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(variant as u64);
                let mut stored: HashMap<String, (Vec<u8>, Option<Vec<u8>>)> = HashMap::new();
                let mut pending: HashMap<String, Vec<(String, String, String)>> = HashMap::new();
                let mut seqs: HashMap<String, u64> = HashMap::new();
                let mut summary = Summary::default();
                for step in 0..1500u64 {
                    let now = step as f64 * 0.01;
                    let run = format!("r{}", next(&mut rng) % 3);
                    let seq = seqs.entry(run.clone()).or_default();
                    *seq += 1;
                    let roll = next(&mut rng) % 46;
                    let kind = if roll < 18 {
                        let tool = tools[(next(&mut rng) % 5) as usize].to_string();
                        let params = format!(r#"{{"path":"/f/{}","action":"poll"}}"#, next(&mut rng) % 4);
                        let id = format!("c{step}");
                        pending.entry(run.clone()).or_default().push((tool.clone(), params.clone(), id.clone()));
                        let batch_id = if next(&mut rng).is_multiple_of(3) { format!("b{}", step / 4) } else { String::new() };
                        pb::event::Kind::ToolCall(pb::ToolCall { tool_name: tool, params_json: params, tool_call_id: id, batch_id, ..Default::default() })
                    } else if roll < 36 {
                        let waiting = pending.entry(run.clone()).or_default();
                        if waiting.is_empty() {
                            continue;
                        }
                        let (tool, params, id) = waiting.remove((next(&mut rng) % waiting.len() as u64) as usize);
                        let outcome = match next(&mut rng) % 4 {
                            0 => pb::tool_outcome::Outcome::Error(format!("failed {}", next(&mut rng) % 2)),
                            n => pb::tool_outcome::Outcome::ResultJson(format!(r#"{{"status":"running","n":{}}}"#, n % 2)),
                        };
                        pb::event::Kind::ToolOutcome(pb::ToolOutcome { tool_name: tool, params_json: params, tool_call_id: id,
                                                                        outcome: Some(outcome), duration_ms: 5 })
                    } else if roll < 37 {
                        pending.remove(&run);
                        pb::event::Kind::UserTurn(pb::UserTurn { prompt_id: format!("p{step}") })
                    } else if roll < 41 {
                        let text = ["done", "working on it", "abcdefgh".repeat(4).as_str(), "done "][(next(&mut rng) % 4) as usize].to_string();
                        pb::event::Kind::ModelOutput(pb::ModelOutput { text, output_kind: (next(&mut rng) % 4) as i32,
                                                                        stop_hook_active: next(&mut rng).is_multiple_of(2), ..Default::default() })
                    } else if roll < 42 {
                        pb::event::Kind::CompactionRetry(pb::CompactionRetry {})
                    } else {
                        // A flush of every run, then each taken back as a restart would.
                        for (run_id, (base, delta)) in stored.iter_mut() {
                            match live.flush_record("", run_id, wall, now, true) {
                                Some(ForFlush::Record(record)) => {
                                    records += 1;
                                    *base = record;
                                    *delta = None;
                                }
                                Some(ForFlush::Delta(value)) => {
                                    deltas += 1;
                                    *delta = Some(value);
                                }
                                None => unreachable!("every run stays held"),
                            }
                        }
                        for (run_id, (base, delta)) in &stored {
                            let mut restored = core(settings);
                            let loaded = restored.load_run(base, delta.as_deref(), wall, now, None, &mut Vec::new()).unwrap();
                            assert!(matches!(loaded, Loaded::Restored), "variant {variant} seed {seed} step {step}");
                            assert_eq!(comparable(live.encode_run("", run_id, wall, now).unwrap()),
                                       comparable(restored.encode_run("", run_id, wall, now).unwrap()),
                                       "variant {variant} seed {seed} step {step} run {run_id}");
                            // A delta against another base is left out, and says so.
                            if delta.is_some() {
                                // Another base of the same run (another id).
                                use prost::Message;
                                let mut run = crate::state_pb::Run::decode(&base[8..]).unwrap();
                                run.events_evaluated += 1000;
                                let other = crate::stored::encode_message(&run);
                                let loaded = core(settings).load_run(&other, delta.as_deref(), wall, now, None, &mut Vec::new()).unwrap();
                                assert!(matches!(loaded, Loaded::RestoredBaseOnly));
                            }
                        }
                        continue;
                    };
                    let event = pb::Event { run_id: run.clone(), seq: *seq, kind: Some(kind), ..Default::default() };
                    live.evaluate_event(&event, "", now, &mut summary);
                    if let std::collections::hash_map::Entry::Vacant(new) = stored.entry(run.clone()) {
                        let Some(ForFlush::Record(record)) = live.flush_record("", &run, wall, now, true) else {
                            panic!("a run's first write is a full record");
                        };
                        new.insert((record, None));
                    }
                }
            }
        }
        // Both kinds were written many times over (a test whose flushes were all full records
        // would prove nothing about deltas).
        assert!(deltas > 1000 && records > 100, "{deltas} deltas, {records} records");
    }

    /// A delta is what changed, not the run: a run with a full history written once costs, for
    /// one more call, a delta of a small part of its record (and no compression).
    #[test]
    fn a_delta_after_one_call_is_a_small_part_of_the_record() {
        let settings = Settings { enabled: Some(true), history_size: 30, warning_threshold: 10, critical_threshold: 20, ..Default::default() };
        let mut live = core(&settings);
        let mut summary = Summary::default();
        let call = |n: u64| pb::Event { run_id: "r".into(), seq: n, kind: Some(pb::event::Kind::ToolCall(pb::ToolCall {
            tool_name: "read".into(), params_json: format!(r#"{{"path":"/f/{n}"}}"#), tool_call_id: format!("c{n}"), ..Default::default() })), ..Default::default() };
        for n in 1..=30 {
            live.evaluate_event(&call(n), "", 0.0, &mut summary);
        }
        let Some(ForFlush::Record(record)) = live.flush_record("", "r", 0.0, 0.0, true) else { panic!("first: full") };
        live.evaluate_event(&call(31), "", 0.0, &mut summary);
        let Some(ForFlush::Delta(delta)) = live.flush_record("", "r", 0.0, 0.0, true) else { panic!("then: a delta") };
        assert!(delta.starts_with(crate::stored::DELTA_MAGIC));
        assert!(delta.len() * 4 < record.len(), "delta {} bytes, record {}", delta.len(), record.len());
        // Without deltas (a shared store), always the full record.
        live.evaluate_event(&call(32), "", 0.0, &mut summary);
        assert!(matches!(live.flush_record("", "r", 0.0, 0.0, false), Some(ForFlush::Record(_))));
    }

    /// A stored run's idle time runs on the wall clock from its last event, the time no replica
    /// held it included: past the store's TTL (3600 s here) it is not taken back.
    #[test]
    fn a_stored_run_idle_past_the_ttl_is_not_taken_back() {
        let settings = Settings { enabled: Some(true), ..Default::default() };
        let wall = 1_700_000_000.0;
        let mut live = core(&settings);
        let event = pb::Event { run_id: "r".into(), kind: Some(pb::event::Kind::ToolCall(pb::ToolCall { tool_name: "read".into(), ..Default::default() })), ..Default::default() };
        live.evaluate_event(&event, "", 5.0, &mut Summary::default());
        let record = live.encode_run("", "r", wall, 5.0).unwrap();
        for (idle, taken) in [(3599.0, true), (3601.0, false)] {
            let mut restarted = core(&settings);
            let loaded = restarted.load_run(&record, None, wall + idle, 1.0, None, &mut Vec::new()).unwrap();
            assert_eq!(matches!(loaded, Loaded::Restored), taken, "idle {idle} s");
            assert_eq!(matches!(loaded, Loaded::Expired), !taken, "idle {idle} s");
            assert_eq!(restarted.store.get("", "r").is_some(), taken);
        }
    }
}
