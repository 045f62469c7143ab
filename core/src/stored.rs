//! A run as the state stores hold it: the messages of core/proto/loopwarden/state/v1/state.proto
//! (generated into state_pb.rs), framed here and nowhere else. The daemon moves these values as
//! bytes and never looks inside.
//!
//! A stored value is a magic, a checksum and a message, not compressed:
//!
//! ```text
//! b"LWR\x04" check Run             a run's full record
//! b"LWD\x02" check Delta           what changed since the run's full record (the file store keeps both)
//! b"LWX\x02" check ExemptionTable  a tenant's standing exemptions, a value beside its runs
//! ```
//!
//! `check` is the low 4 bytes of XXH3-64 of the message, little-endian. Most of a run's bytes are
//! digests, which a message takes as they come: without it a value damaged inside one (a bad copy,
//! a bad disk under Redis) would be read as a run that never was. The JSON era's values had
//! zlib's Adler-32 for this; damage is now refused the same way, costing that run only.
//!
//! A delta names its base by `record_id` (XXH3-64 of the base's whole value), keeps
//! `base[drop..drop + keep]` of the base's history and holds only the records after them, and
//! holds only the retry slots written since; every other field is whole. `decode_delta` +
//! `apply_delta` give the run back.
//!
//! Values written before version 4 (JSON, zlib-framed) are read by stored_json.rs, once: a run
//! read from one is written in this format at its next flush.
//!
//! Adding a persistent field: a new optional field in state.proto (absent = what a run had
//! before it), set in `run_message` and read in `read_state`/`read_run`; merge.rs says how a
//! stored copy and memory's combine. An older daemon skips a field it does not know.

use std::collections::{HashMap, HashSet, VecDeque};

use prost::Message;

use crate::engine::ask::{AskCause, Asks, Exemption, PendingAsk, MAX_DENIED_PATTERNS, MAX_PENDING_ASKS};
use crate::engine::batches::{Batch, FirstCritical};
use crate::engine::output_memory::{OutputMemory, Streak, MAX_STREAK_SEQS};
use crate::engine::{Detector, Guard, Record, RunState, SideEffect, Tool, Verdict, MAX_SIDE_EFFECTS};
use crate::state_pb as pb;
use crate::decoded::{action, error_code, level, Decoded, DecodedRetries, StoredRun};
use crate::tree_link::{Notice, Totals, TreeLink};

pub const RUN_MAGIC: &[u8; 4] = b"LWR\x04";
pub const DELTA_MAGIC: &[u8; 4] = b"LWD\x02";
pub const EXEMPTIONS_MAGIC: &[u8; 4] = b"LWX\x02";

/// The run's persisted fields, borrowed from its entry.
pub struct RunRecord<'a> {
    pub tenant: &'a str,
    pub run_id: &'a str,
    pub agent_id: &'a str,
    pub session_id: &'a str,
    pub last_seen: f64,
    pub events_evaluated: u64,
    pub state: &'a RunState,
    pub retries: Option<RetriesRecord<'a>>,
    /// The run's tree link and its start as wall-clock seconds (absent for a plain run).
    pub tree: Option<(&'a TreeLink, f64)>,
}

pub struct RetriesRecord<'a> {
    pub seqs: Vec<u64>,
    pub digests: Vec<[u8; 8]>,
    pub next_slot: usize,
    /// slot -> (seq, decision id, verdict), in slot order.
    pub decisions: Vec<(usize, u64, &'a str, &'a Verdict)>,
    /// Events remembered since the base (a delta writes only their slots).
    pub unsaved: usize,
    /// The ring's size (a delta's slots are counted back from `next_slot` around it).
    pub window: usize,
}

// ------------------------------------------------------------------ writing

/// The run's stored value.
pub fn encode(run: &RunRecord) -> Vec<u8> {
    framed(RUN_MAGIC, &run_message(run, 0))
}

/// A delta's stored value: the run as a delta of its base (`base`: the base value's
/// `record_id`) whose history keeps `base[dropped..dropped + kept]` and holds only the records
/// after them. See `decode_delta`.
pub fn encode_delta(run: &RunRecord, base: u64, dropped: usize, kept: usize) -> Vec<u8> {
    let mut message = run_message(run, kept);
    let (retry_slots, retry_len) = match (&run.retries, message.retries.as_mut()) {
        (Some(r), Some(stored)) => {
            let slots = delta_slots(r);
            stored.seqs = slots.iter().map(|&s| r.seqs[s]).collect();
            stored.digests = slots.iter().flat_map(|&s| r.digests[s]).collect();
            stored.decisions.retain(|d| slots.contains(&(d.slot as usize)));
            (slots.into_iter().map(|s| s as u32).collect(), r.seqs.len() as u32)
        }
        _ => (Vec::new(), 0),
    };
    let delta = pb::Delta { base, drop: dropped as u32, keep: kept as u32, run: Some(message), retry_slots, retry_len };
    framed(DELTA_MAGIC, &delta)
}

/// A run message as its stored value (`encode` builds the message from a run; tests alter one).
pub fn encode_message(run: &pb::Run) -> Vec<u8> {
    framed(RUN_MAGIC, run)
}

/// The id a delta names its base by: XXH3-64 of the base's stored value.
pub fn record_id(value: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(value)
}

const HEADER: usize = 8;

fn check(message: &[u8]) -> [u8; 4] {
    (xxhash_rust::xxh3::xxh3_64(message) as u32).to_le_bytes()
}

fn framed(magic: &[u8; 4], message: &impl Message) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + message.encoded_len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&[0; 4]);
    message.encode(&mut out).expect("a Vec grows to any length");
    let sum = check(&out[HEADER..]);
    out[4..HEADER].copy_from_slice(&sum);
    out
}

/// The message of a value framed with `magic`: None when the value has another magic, Err when
/// its checksum fails.
fn unframed<'v>(value: &'v [u8], magic: &[u8; 4], what: &str) -> Option<Result<&'v [u8], String>> {
    let rest = value.strip_prefix(magic.as_slice())?;
    Some(match rest.split_at_checked(4) {
        Some((sum, message)) if sum == check(message) => Ok(message),
        _ => Err(format!("{what}: checksum mismatch (damaged)")),
    })
}

/// The slots written since the base, oldest first.
fn delta_slots(r: &RetriesRecord) -> Vec<usize> {
    let (len, window) = (r.seqs.len(), r.window.max(1));
    (1..=r.unsaved.min(len)).rev().map(|back| (r.next_slot + window - back) % window).collect()
}

/// The run as its message; `skip`: the first records of the history left out (a delta's kept).
fn run_message(run: &RunRecord, skip: usize) -> pb::Run {
    pb::Run {
        tenant: run.tenant.into(),
        run_id: run.run_id.into(),
        agent_id: run.agent_id.into(),
        session_id: run.session_id.into(),
        last_seen: finite(run.last_seen),
        events_evaluated: run.events_evaluated,
        state: Some(state_message(run.state, skip)),
        retries: run.retries.as_ref().map(|r| pb::Retries {
            seqs: r.seqs.to_vec(),
            digests: r.digests.concat(),
            next_slot: r.next_slot as u32,
            decisions: r.decisions.iter().map(|(slot, seq, decision_id, verdict)| pb::Decision {
                slot: *slot as u32,
                seq: *seq,
                decision_id: decision_id.to_string(),
                verdict: Some(verdict_message(verdict)),
            }).collect(),
        }),
        tree: run.tree.map(|(link, started)| tree_message(link, started)),
    }
}

fn finite(f: f64) -> f64 {
    if f.is_finite() { f } else { 0.0 }
}

/// Distinct digests in first-seen order, each named by its index.
#[derive(Default)]
struct DigestTable {
    index: HashMap<[u8; 32], u32>,
    digests: Vec<Vec<u8>>,
}

impl DigestTable {
    fn at(&mut self, digest: &[u8; 32]) -> u32 {
        let next = self.digests.len() as u32;
        *self.index.entry(*digest).or_insert_with(|| {
            self.digests.push(digest.to_vec());
            next
        })
    }
}

fn state_message(state: &RunState, skip: usize) -> pb::RunState {
    let mut table = DigestTable::default();
    let history = state.history().iter().skip(skip).map(|r| pb::Record {
            seq: r.seq(),
            tool: r.tool().into(),
            args: table.at(&r.args),
            result: table.at(&r.result),
            status: r.status as u32,
            call_id: r.call_id().unwrap_or("").into(),
            unknown: r.unknown().map(str::to_string),
            failure_key: r.failure_key().map_or_else(Vec::new, |k| k.to_vec()),
            spelling: if r.spelling() != r.tool() { r.spelling().into() } else { String::new() },
            flags: r.flags as u32,
            carried: r.carried().stored(),
        }).collect();
    pb::RunState {
        capacity: state.capacity as u32,
        history,
        digests: table.digests,
        announced: state.rare().announced.as_ref().map(|keys| pb::Announced {
            keys: keys.iter().map(|(key, decade)| pb::AnnouncedKey { key: key.clone(), decade: *decade }).collect(),
        }),
        guard: state.rare().guard.as_ref().map(|g| pb::Guard {
            window_size: g.window_size,
            observed: g.observed,
            all_identical: g.all_identical,
            first: g.first.as_ref().map(|(tool, args, status, result)| pb::Triple {
                tool: tool.to_string(), args: args.to_vec(), status: *status as u32, result: result.to_vec(),
            }),
            seqs: g.seqs.clone(),
        }),
        abort: state.rare().abort.as_deref().map(verdict_message),
        blocks: state.blocks,
        seen_triples: state.rare().seen_triples.as_ref().map(|seen| {
            let mut keys: Vec<u64> = seen.iter().copied().collect();
            keys.sort_unstable();
            pb::SeenTriples { keys }
        }),
        no_new_streak: state.no_new_streak,
        side_effects: state.rare().side_effects.as_ref().map(|effects| pb::SideEffects {
            effects: effects.iter().map(|e| pb::SideEffect {
                tool: e.tool.to_string(), args: e.args.to_vec(), seq: e.seq, call_id: e.call_id.as_deref().map(str::to_string),
                succeeded: e.succeeded,
            }).collect(),
        }),
        batch: state.rare().batch.as_ref().map(|b| pb::Batch {
            number: b.number,
            size: b.size,
            outcomes_seen: b.outcomes_seen,
            critical: b.critical.as_ref().map(|c| pb::FirstCritical { batch: c.batch, detector: c.detector.name().into(), tool: c.tool.to_string() }),
        }),
        asks: state.rare().asks.as_ref().map(|asks| pb::Asks {
            pending: asks.pending.iter().map(|p| pb::PendingAsk {
                tool_call_id: p.tool_call_id.to_string(),
                decision_id: p.decision_id.to_string(),
                warning_key: p.warning_key.to_string(),
                tool: p.tool.to_string(),
                args: p.args.to_vec(),
                outcome: p.outcome.as_ref().map(outcome_message),
                asked_at: finite(p.asked_at),
                cause: p.cause.name().into(),
            }).collect(),
            denied: asks.denied.iter().map(|k| k.to_string()).collect(),
        }),
        outputs: state.rare().outputs.as_deref().map(outputs_message),
    }
}

fn streak_message(s: &Streak) -> pb::Streak {
    pb::Streak { digest: s.digest, count: s.count, chunky: s.chunky, seqs: s.seqs.clone() }
}

fn outputs_message(m: &OutputMemory) -> pb::Outputs {
    pb::Outputs {
        streaks: m.streaks.iter().map(streak_message).collect(),
        compactions: Some(streak_message(&m.compactions)),
        continuations: Some(streak_message(&m.continuations)),
        answers: Some(streak_message(&m.answers)),
        work_since_answer: m.work_since_answer,
    }
}

fn read_streak(s: Option<pb::Streak>) -> Streak {
    let s = s.unwrap_or_default();
    let skip = s.seqs.len().saturating_sub(MAX_STREAK_SEQS);
    Streak { digest: s.digest, count: s.count, chunky: s.chunky, seqs: s.seqs.into_iter().skip(skip).collect() }
}

/// Streaks past the three output kinds (a newer writer's) are not ours to read; missing ones are empty.
fn read_outputs(o: pb::Outputs) -> OutputMemory {
    let mut streaks = o.streaks.into_iter();
    OutputMemory {
        streaks: std::array::from_fn(|_| read_streak(streaks.next())),
        compactions: read_streak(o.compactions),
        continuations: read_streak(o.continuations),
        answers: read_streak(o.answers),
        work_since_answer: o.work_since_answer,
    }
}

fn outcome_message((status, result): &(u8, [u8; 32])) -> pb::Outcome {
    pb::Outcome { status: *status as u32, result: result.to_vec() }
}

pub fn verdict_message(v: &Verdict) -> pb::Verdict {
    pb::Verdict {
        action: v.action.name().into(),
        detector: v.detector.name().into(),
        level: v.level.name().into(),
        count: v.count,
        message: v.message.clone(),
        warning_key: v.warning_key.clone(),
        announce: v.announce,
        paired_tool_name: v.paired_tool_name.clone(),
        error_code: v.error_code.into(),
        tool_name: v.tool_name.clone(),
        evidence_seqs: v.evidence_seqs.clone(),
        evidence_call_ids: v.evidence_call_ids.clone(),
        shadow_action: v.shadow_action.map(|a| a.name().into()),
        guard_armed: v.guard_armed,
    }
}

fn totals_message(t: &Totals) -> pb::Totals {
    pb::Totals {
        tool_calls: t.tool_calls, tool_ms: t.tool_ms, input_tokens: t.input_tokens, output_tokens: t.output_tokens,
        cost_usd: finite(t.cost_usd), runs: t.runs,
    }
}

fn tree_message(link: &TreeLink, started: f64) -> pb::TreeLink {
    pb::TreeLink {
        parent: link.parent.clone(),
        root: link.root.clone(),
        depth: link.depth,
        children: link.children.clone(),
        children_created: link.children_created,
        started: finite(started),
        totals: Some(totals_message(&link.totals)),
        tree_totals: link.tree.as_deref().map(totals_message),
        notices: link.notices.iter().map(|n| pb::Notice {
            child: n.child.clone(), detector: n.detector.name().into(), tool: n.tool.clone(), head: n.head.clone(),
        }).collect(),
        warned: link.warned as u32,
        extensions: if link.extensions.iter().any(|&n| n > 0) { link.extensions.to_vec() } else { Vec::new() },
    }
}

// ------------------------------------------------------------------ reading

/// A stored run's value (this format or a JSON-era one). Err says what is wrong with it.
pub fn decode_value(value: &[u8], retry_window: usize) -> Result<StoredRun, String> {
    let Some(message) = unframed(value, RUN_MAGIC, "run") else {
        return crate::stored_json::read_run_value(value, retry_window);
    };
    let message = message?;
    let run = pb::Run::decode(message).map_err(|e| format!("run: {e}"))?;
    Ok(StoredRun { run: read_run(run, retry_window)?, id: record_id(value), len: value.len(), legacy: false })
}

/// The run a value holds (`decode_value` without what names it).
pub fn decode(value: &[u8], retry_window: usize) -> Result<Decoded, String> {
    decode_value(value, retry_window).map(|stored| stored.run)
}

/// A delta's value (`encode_delta`, or a JSON-era one): its base's id, the run as of the delta
/// with only the records after the kept ones in its history, and (dropped, kept) records of the
/// base. `apply_delta` puts the kept ones back.
pub fn decode_delta(value: &[u8], retry_window: usize) -> Result<(u64, Decoded, (usize, usize)), String> {
    let Some(message) = unframed(value, DELTA_MAGIC, "delta") else {
        return crate::stored_json::read_delta_value(value, retry_window);
    };
    let message = message?;
    let delta = pb::Delta::decode(message).map_err(|e| format!("delta: {e}"))?;
    let mut run = read_run(delta.run.ok_or("delta holds no run")?, retry_window)?;
    if let Some(retries) = run.retries.as_mut() {
        let slots: Vec<usize> = delta.retry_slots.iter().map(|&s| s as usize).collect();
        let len = delta.retry_len as usize;
        if slots.len() != retries.seqs.len() || len > retry_window || slots.iter().any(|&s| s >= len) {
            return Err("delta.retry_slots disagree with its window".into());
        }
        retries.unsaved = slots.len();
        retries.slots = Some((slots, len));
    }
    Ok((delta.base, run, (delta.drop as usize, delta.keep as usize)))
}

/// Is this value a delta (of either format)?
pub fn is_delta(value: &[u8]) -> bool {
    value.starts_with(DELTA_MAGIC) || value.starts_with(crate::stored_json::DELTA_MAGIC)
}

fn digest32(bytes: &[u8], what: &str) -> Result<[u8; 32], String> {
    bytes.try_into().map_err(|_| format!("{what} is not a 32-byte digest"))
}

fn status(s: u32, what: &str) -> Result<u8, String> {
    u8::try_from(s).ok().filter(|s| *s <= 2).ok_or_else(|| format!("{what} is not a result status"))
}

fn detector(name: &str, what: &str) -> Result<Detector, String> {
    Detector::from_name(name).ok_or_else(|| format!("{what} is not a detector: {name:?}"))
}

fn read_verdict(v: pb::Verdict, what: &str) -> Result<Verdict, String> {
    Ok(Verdict {
        action: action(&v.action, what)?,
        detector: detector(&v.detector, what)?,
        level: level(&v.level, what)?,
        count: v.count,
        message: v.message,
        warning_key: v.warning_key,
        announce: v.announce,
        paired_tool_name: v.paired_tool_name,
        error_code: error_code(&v.error_code, what)?,
        tool_name: v.tool_name,
        evidence_seqs: v.evidence_seqs,
        evidence_call_ids: v.evidence_call_ids,
        shadow_action: v.shadow_action.map(|a| action(&a, what)).transpose()?,
        guard_armed: v.guard_armed,
    })
}

fn read_run(run: pb::Run, retry_window: usize) -> Result<Decoded, String> {
    let retries = match run.retries {
        None => None,
        Some(r) => {
            if r.digests.len() != r.seqs.len() * 8 || r.seqs.len() > retry_window {
                return Err("run.retries columns disagree in length".into());
            }
            if r.next_slot as usize >= retry_window {
                return Err("run.retries.next_slot is out of range".into());
            }
            let digests = r.digests.chunks(8).map(|c| c.try_into().expect("8 bytes")).collect();
            let mut decisions = HashMap::with_capacity(r.decisions.len());
            for d in r.decisions {
                let verdict = read_verdict(d.verdict.unwrap_or_default(), "run.retries.decisions.verdict")?;
                decisions.insert(d.slot as usize, (d.seq, d.decision_id, verdict));
            }
            Some(DecodedRetries { seqs: r.seqs, digests, next_slot: r.next_slot as usize, decisions, slots: None, unsaved: 0 })
        }
    };
    Ok(Decoded {
        tenant: run.tenant,
        run_id: run.run_id,
        agent_id: run.agent_id,
        session_id: run.session_id,
        last_seen: if run.last_seen.is_finite() { run.last_seen } else { return Err("run.last_seen is not a number".into()) },
        events_evaluated: run.events_evaluated,
        state: read_state(run.state.ok_or("run holds no state")?)?,
        retries,
        tree: run.tree.map(read_tree).transpose()?,
    })
}

fn read_state(s: pb::RunState) -> Result<RunState, String> {
    let capacity = s.capacity as usize;
    let mut digests = Vec::with_capacity(s.digests.len());
    for (i, d) in s.digests.iter().enumerate() {
        digests.push(digest32(d, &format!("state.digests[{i}]"))?);
    }
    let digest = |at: u32, what: String| digests.get(at as usize).copied().ok_or_else(|| format!("{what} names no digest"));
    let mut history = VecDeque::with_capacity(s.history.len().max(capacity.min(64)));
    for (i, r) in s.history.into_iter().enumerate() {
        let what = |field: &str| format!("state.history[{i}].{field}");
        let spelled = if r.spelling.is_empty() {
            r.tool.as_str()
        } else if crate::toolnames::normalize_tool_name(&r.spelling) == r.tool {
            r.spelling.as_str()
        } else {
            return Err(format!("{} is not a spelling of {:?}", what("spelling"), r.tool));
        };
        let mut record = Record::of(
            r.seq,
            Tool::spelled(&r.tool, spelled),
            digest(r.args, what("args"))?,
            digest(r.result, what("result"))?,
            status(r.status, &what("status"))?,
            if r.call_id.is_empty() { None } else { Some(&r.call_id) },
            r.unknown.as_deref(),
        );
        if !r.failure_key.is_empty() {
            record.set_failure_key(Some(digest32(&r.failure_key, &what("failure_key"))?));
        }
        record.flags = u8::try_from(r.flags).map_err(|_| format!("{} is out of range", what("flags")))?;
        record.set_carried(crate::carried_gen::Carried::from_stored(r.carried.as_ref()));
        history.push_back(record);
    }
    let mut state = RunState::with_history(capacity, history);
    let announced = s.announced.map(|a| Box::new(a.keys.into_iter().map(|k| (k.key, k.decade)).collect()));
    let guard = match s.guard {
        None => None,
        Some(g) => Some(Box::new(Guard {
            window_size: g.window_size,
            observed: g.observed,
            first: match g.first {
                None => None,
                Some(t) => Some((t.tool.into_boxed_str(), digest32(&t.args, "state.guard.first.args")?,
                                 u8::try_from(t.status).map_err(|_| "state.guard.first.status is out of range")?,
                                 digest32(&t.result, "state.guard.first.result")?)),
            },
            all_identical: g.all_identical,
            seqs: g.seqs,
        })),
    };
    let abort = s.abort.map(|v| read_verdict(v, "state.abort").map(Box::new)).transpose()?;
    state.blocks = s.blocks;
    let seen_triples = s.seen_triples.map(|seen| Box::new(seen.keys.into_iter().collect::<HashSet<u64>>()));
    state.no_new_streak = s.no_new_streak;
    let side_effects = match s.side_effects {
        None => None,
        Some(list) => {
            let mut effects = Vec::with_capacity(list.effects.len().min(MAX_SIDE_EFFECTS));
            let skip = list.effects.len().saturating_sub(MAX_SIDE_EFFECTS);
            for e in list.effects.into_iter().skip(skip) {
                effects.push(SideEffect {
                    tool: e.tool.into(), args: digest32(&e.args, "state.side_effects.args")?, seq: e.seq,
                    call_id: e.call_id.map(Into::into), succeeded: e.succeeded,
                });
            }
            Some(Box::new(effects))
        }
    };
    let batch = match s.batch {
        None => None,
        Some(b) => Some(Box::new(Batch {
            number: b.number,
            size: b.size,
            outcomes_seen: b.outcomes_seen,
            critical: match b.critical {
                None => None,
                Some(c) => Some(Box::new(FirstCritical { batch: c.batch, detector: detector(&c.detector, "state.batch.critical.detector")?, tool: c.tool })),
            },
            ..Default::default()
        })),
    };
    let asks = match s.asks {
        None => None,
        Some(a) => {
            let mut asks = Asks::default();
            let skip = a.pending.len().saturating_sub(MAX_PENDING_ASKS);
            for p in a.pending.into_iter().skip(skip) {
                asks.pending.push(PendingAsk {
                    tool_call_id: p.tool_call_id.into(),
                    decision_id: p.decision_id.into(),
                    warning_key: p.warning_key.into(),
                    tool: p.tool.into(),
                    args: digest32(&p.args, "state.asks.pending.args")?,
                    outcome: p.outcome.map(|o| read_outcome(o, "state.asks.pending.outcome")).transpose()?,
                    asked_at: p.asked_at,
                    cause: AskCause::from_name(&p.cause).ok_or("state.asks.pending.cause is not an ask cause")?,
                });
            }
            let skip = a.denied.len().saturating_sub(MAX_DENIED_PATTERNS);
            asks.denied = a.denied.into_iter().skip(skip).map(Into::into).collect();
            Some(Box::new(asks))
        }
    };
    let outputs = s.outputs.map(|o| Box::new(read_outputs(o)));
    state.set_rare(crate::engine::Rare { announced, guard, abort, seen_triples, side_effects, batch, asks, outputs });
    Ok(state)
}

fn read_outcome(o: pb::Outcome, what: &str) -> Result<(u8, [u8; 32]), String> {
    Ok((status(o.status, what)?, digest32(&o.result, what)?))
}

fn read_totals(t: pb::Totals) -> Totals {
    Totals { tool_calls: t.tool_calls, tool_ms: t.tool_ms, input_tokens: t.input_tokens, output_tokens: t.output_tokens, cost_usd: t.cost_usd, runs: t.runs }
}

/// `started` stays wall-clock seconds (the caller converts).
fn read_tree(t: pb::TreeLink) -> Result<TreeLink, String> {
    let mut extensions = [0u32; 6];
    if !t.extensions.is_empty() {
        if t.extensions.len() != extensions.len() {
            return Err(format!("tree.extensions is not {} budget extensions", extensions.len()));
        }
        extensions.copy_from_slice(&t.extensions);
    }
    let mut notices = Vec::with_capacity(t.notices.len());
    for n in t.notices {
        notices.push(Notice { child: n.child, detector: detector(&n.detector, "tree.notices.detector")?, tool: n.tool, head: n.head });
    }
    Ok(TreeLink {
        parent: t.parent,
        root: t.root,
        depth: t.depth,
        children: t.children,
        children_created: t.children_created,
        totals: read_totals(t.totals.unwrap_or_default()),
        started: t.started,
        tree: t.tree_totals.map(|totals| Box::new(read_totals(totals))),
        notices,
        warned: u8::try_from(t.warned).map_err(|_| "tree.warned is out of range")?,
        extensions,
    })
}

/// A delta on its base (both decoded): the delta's run with the base's kept records first in
/// its history. Err when the base has fewer records than the delta keeps, or the history would
/// overflow its capacity (a delta of another base).
pub fn apply_delta(base: &Decoded, delta: &mut Decoded, (dropped, kept): (usize, usize)) -> Result<(), String> {
    if let Some(retries) = delta.retries.as_mut() {
        apply_retries(base.retries.as_ref(), retries)?;
    }
    let from_base = base.state.history();
    // (With nothing kept, `dropped` can pass the base's length: every record of it is gone.)
    if (kept > 0 && dropped + kept > from_base.len()) || kept + delta.state.history().len() > delta.state.capacity.max(1) {
        return Err(format!("delta keeps records {dropped}..{} of a base of {}", dropped + kept, from_base.len()));
    }
    let tail = delta.state.take_history();
    let mut history: VecDeque<Record> = if kept == 0 { VecDeque::new() } else { from_base.range(dropped..dropped + kept).cloned().collect() };
    history.extend(tail);
    delta.state.replace_history(history);
    delta.state.mark_unsaved(dropped, kept);
    Ok(())
}

/// A delta's retry slots written into its base's window (an empty one when the base had none).
fn apply_retries(base: Option<&DecodedRetries>, delta: &mut DecodedRetries) -> Result<(), String> {
    let Some((slots, len)) = delta.slots.take() else { return Ok(()) };
    let (mut seqs, mut digests, mut decisions) = match base {
        Some(b) => (b.seqs.clone(), b.digests.clone(), b.decisions.clone()),
        None => Default::default(),
    };
    for (i, &slot) in slots.iter().enumerate() {
        if slot < seqs.len() {
            seqs[slot] = delta.seqs[i];
            digests[slot] = delta.digests[i];
        } else if slot == seqs.len() {
            seqs.push(delta.seqs[i]);
            digests.push(delta.digests[i]);
        } else {
            return Err(format!("delta's retry slot {slot} is past its base's window of {}", seqs.len()));
        }
        decisions.remove(&slot);
    }
    if seqs.len() != len {
        return Err(format!("delta's retry window of {len} on a base of {}", seqs.len()));
    }
    decisions.extend(std::mem::take(&mut delta.decisions));
    (delta.seqs, delta.digests, delta.decisions) = (seqs, digests, decisions);
    Ok(())
}

// ------------------------------------------------------------------ exemptions

/// A tenant's standing exemptions as one stored value (service::exemptions). `to_wall`: added
/// to the in-memory times.
pub fn encode_exemptions(tenant: &str, exemptions: &[&Exemption], to_wall: f64) -> Vec<u8> {
    let table = pb::ExemptionTable {
        tenant: tenant.into(),
        exemptions: exemptions.iter().map(|e| pb::Exemption {
            id: e.id.clone(),
            agent_id: e.agent_id.clone(),
            tool: e.tool.clone(),
            args: e.args.to_vec(),
            outcome: e.outcome.as_ref().map(outcome_message),
            created_at: finite(e.created_at + to_wall),
            expires_at: finite(e.expires_at + to_wall),
            run_id: e.run_id.clone(),
        }).collect(),
    };
    framed(EXEMPTIONS_MAGIC, &table)
}

/// `encode_exemptions` read back (or a JSON-era table); `from_wall` is added to the stored times.
pub fn decode_exemptions(value: &[u8], from_wall: f64) -> Result<(String, Vec<Exemption>), String> {
    let Some(message) = unframed(value, EXEMPTIONS_MAGIC, "exemptions") else {
        return crate::stored_json::read_exemptions_value(value, from_wall);
    };
    let message = message?;
    let table = pb::ExemptionTable::decode(message).map_err(|e| format!("exemptions: {e}"))?;
    let mut exemptions = Vec::with_capacity(table.exemptions.len());
    for e in table.exemptions {
        exemptions.push(Exemption {
            args: digest32(&e.args, "exemptions.args")?,
            outcome: e.outcome.map(|o| read_outcome(o, "exemptions.outcome")).transpose()?,
            created_at: e.created_at + from_wall,
            expires_at: e.expires_at + from_wall,
            id: e.id,
            agent_id: e.agent_id,
            tool: e.tool,
            run_id: e.run_id,
        });
    }
    Ok((table.tenant, exemptions))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Action, Level};

    fn record<'a>(state: &'a RunState, tree: Option<(&'a TreeLink, f64)>) -> RunRecord<'a> {
        RunRecord { tenant: "t", run_id: "r", agent_id: "a", session_id: "s", last_seen: 12.5, events_evaluated: 3, state, retries: None, tree }
    }

    fn message(value: &[u8]) -> pb::Run {
        pb::Run::decode(&value[HEADER..]).unwrap()
    }

    /// A run's pending asks and denied patterns (engine::ask) survive a store; absent = none.
    #[test]
    fn asks_round_trip_and_are_optional() {
        use crate::engine::ask::{AskCause, Asks, PendingAsk};
        let mut state = RunState::new(4);
        let plain = encode(&record(&state, None));
        assert!(message(&plain).state.unwrap().asks.is_none(), "absent unless asked");
        assert!(decode(&plain, 16).unwrap().state.rare().asks.is_none());
        let asks = Asks {
            pending: vec![
                PendingAsk { tool_call_id: "c1".into(), decision_id: "lw-1".into(), warning_key: "generic:fetch:ab".into(), tool: "fetch".into(),
                             args: [7; 32], outcome: Some((1, [8; 32])), asked_at: 1700000000.5, cause: AskCause::Critical },
                PendingAsk { tool_call_id: "".into(), decision_id: "lw-2".into(), warning_key: "budget:tool_calls".into(), tool: "read".into(),
                             args: [9; 32], outcome: None, asked_at: 1700000001.0, cause: AskCause::Budget },
            ],
            denied: vec!["cycle:3:x".into()],
        };
        state.rare_mut().asks = Some(Box::new(asks.clone()));
        assert_eq!(*decode(&encode(&record(&state, None)), 16).unwrap().state.rare().asks.clone().unwrap(), asks);
    }

    #[test]
    fn side_effects_spellings_batches_and_failure_keys_round_trip() {
        let mut state = RunState::new(4);
        state.append(Record::of(1, Tool::spelled("exec", "Bash"), [1; 32], [0; 32], 1, Some("c1"), None));
        let mut second = Record::new(2, "exec", [1; 32], [2; 32], 2, None, Some("nope"));
        second.flags = 5;
        second.set_failure_key(Some([3; 32]));
        state.append(second);
        let effects = vec![
            SideEffect { tool: "send_email".into(), args: [7; 32], seq: 3, call_id: Some("c1".into()), succeeded: true },
            SideEffect { tool: "pay".into(), args: [9; 32], seq: 5, call_id: None, succeeded: false },
        ];
        state.rare_mut().side_effects = Some(Box::new(effects.clone()));
        state.rare_mut().batch = Some(Box::new(Batch {
            number: 3, size: 2, outcomes_seen: true,
            critical: Some(Box::new(FirstCritical { batch: 2, detector: Detector::GenericRepeat, tool: "read".into() })),
            ..Default::default()
        }));
        state.rare_mut().announced = Some(Box::new(vec![("z".into(), 2), ("a".into(), 1)]));
        state.rare_mut().seen_triples = Some(Box::new([5u64, 1, 9].into_iter().collect()));
        let back = decode(&encode(&record(&state, None)), 16).unwrap().state;
        let h: Vec<_> = back.history().iter().map(|r| (r.seq(), r.tool(), r.spelling(), r.call_id(), r.unknown(), r.flags, r.failure_key().copied(), r.status)).collect();
        assert_eq!(h, [(1, "exec", "Bash", Some("c1"), None, 0, None, 1), (2, "exec", "exec", None, Some("nope"), 5, Some([3; 32]), 2)]);
        assert_eq!(*back.rare().side_effects.clone().unwrap(), effects);
        let batch = back.rare().batch.clone().unwrap();
        assert_eq!((batch.number, batch.size, batch.outcomes_seen, batch.critical.unwrap().detector), (3, 2, true, Detector::GenericRepeat));
        assert_eq!(*back.rare().announced.clone().unwrap(), [("z".to_string(), 2), ("a".to_string(), 1)], "announced keys keep their order");
        assert_eq!(*back.rare().seen_triples.clone().unwrap(), [1u64, 5, 9].into_iter().collect());
        let plain = message(&encode(&record(&RunState::new(4), None))).state.unwrap();
        assert!(plain.side_effects.is_none() && plain.batch.is_none() && plain.announced.is_none() && plain.seen_triples.is_none());
    }

    /// The detectors of loops without tool calls' counts survive a store, their streaks whole;
    /// a run that kept none stores none.
    #[test]
    fn output_streaks_round_trip() {
        use crate::engine::output_memory::{OutputMemory, Streak};
        let mut state = RunState::new(4);
        let streak = |digest, count, chunky, seqs: &[u64]| Streak { digest, count, chunky, seqs: seqs.to_vec() };
        let memory = OutputMemory {
            streaks: [streak(u64::MAX, 3, 0, &[1, 2, 3]), streak(7, 1, 1, &[4]), Streak::default()],
            compactions: streak(0, 2, 0, &[5, 9]),
            continuations: streak(0, 1, 0, &[10]),
            answers: streak(42, 4, 0, &[11, 12, 13, 14]),
            work_since_answer: true,
        };
        state.rare_mut().outputs = Some(Box::new(memory.clone()));
        let back = decode(&encode(&record(&state, None)), 16).unwrap().state;
        assert_eq!(*back.rare().outputs.clone().unwrap(), memory);
        let plain = message(&encode(&record(&RunState::new(4), None))).state.unwrap();
        assert!(plain.outputs.is_none());
    }

    /// A run's tree link survives a store; a run without one reads as a plain run.
    #[test]
    fn tree_links_round_trip_and_are_optional() {
        let state = RunState::new(4);
        let mut link = TreeLink::new(0.0);
        link.parent = "p".into();
        link.root = "root".into();
        link.depth = 2;
        link.children = vec!["c1".into(), "c2".into()];
        link.children_created = 3;
        link.totals = Totals { tool_calls: 7, tool_ms: 1500, input_tokens: 10, output_tokens: 20, cost_usd: 0.25, runs: 1 };
        link.tree = Some(Box::new(Totals { tool_calls: 5_000_000_000, runs: 4, ..Default::default() }));
        link.notices = vec![Notice { child: "c1".into(), detector: Detector::GenericRepeat, tool: "read".into(), head: "read was \"called\"".into() }];
        link.warned = 0b101;
        link.extensions = [0, 2, 0, 0, 1, 0];
        let back = decode(&encode(&record(&state, Some((&link, 1234.5)))), 16).unwrap().tree.unwrap();
        assert_eq!((back.parent.as_str(), back.root.as_str(), back.depth, back.children_created), ("p", "root", 2, 3));
        assert_eq!((&back.children, &back.totals, back.tree.as_deref()), (&link.children, &link.totals, link.tree.as_deref()));
        assert_eq!((back.notices.clone(), back.warned, back.started, back.extensions), (link.notices.clone(), 0b101, 1234.5, [0, 2, 0, 0, 1, 0]));
        assert!(decode(&encode(&record(&state, None)), 16).unwrap().tree.is_none());
    }

    /// Damage anywhere in a value is refused (the checksum), never read as another run; a value
    /// whose message is whole but names what this engine does not know is refused naming it.
    #[test]
    fn damaged_or_foreign_values_are_refused() {
        let mut state = RunState::new(4);
        state.append(Record::new(1, "read", [1; 32], [2; 32], 1, None, None));
        let value = encode(&record(&state, None));
        for at in 4..value.len() {
            let mut bad = value.clone();
            bad[at] ^= 0x10;
            assert!(decode(&bad, 16).is_err(), "byte {at}");
        }
        assert!(decode(&value[..value.len() - 1], 16).is_err());
        let mut run = message(&value);
        run.state.as_mut().unwrap().history[0].args = 7;
        assert!(decode(&encode_message(&run), 16).err().unwrap().contains("state.history[0].args names no digest"));
        let mut run = message(&value);
        run.state.as_mut().unwrap().digests[0].pop();
        assert!(decode(&encode_message(&run), 16).err().unwrap().contains("state.digests[0] is not a 32-byte digest"));
        let mut run = message(&value);
        run.state.as_mut().unwrap().history[0].spelling = "Bash".into();
        assert!(decode(&encode_message(&run), 16).err().unwrap().contains("is not a spelling of"));
        assert!(decode(b"LWR\x05\0\0\0\0", 16).err().unwrap().contains("unknown run encoding"));
    }

    /// A delta holds the new records and the new retry slots only, and applies to its base.
    #[test]
    fn a_delta_applies_to_its_base() {
        let verdict = Verdict { action: Action::Warn, detector: Detector::GenericRepeat, level: Level::Warning, count: 3,
                                evidence_seqs: vec![1, 2], shadow_action: Some(Action::Block), ..Verdict::allow("read") };
        let mut state = RunState::new(16);
        for seq in 1..=10 {
            state.append(Record::new(seq, "read", [seq as u8; 32], [seq as u8; 32], 1, None, None));
        }
        let (seqs, digests) = (vec![11, 12, 13], vec![[1; 8], [2; 8], [3; 8]]);
        let retries = |unsaved| RetriesRecord { seqs: seqs.clone(), digests: digests.clone(), next_slot: 3, decisions: vec![(2, 13, "lw-3", &verdict)], unsaved, window: 64 };
        let base_value = encode(&RunRecord { retries: Some(retries(0)), ..record(&state, None) });
        let base = decode(&base_value, 64).unwrap();
        state.append(Record::new(11, "read", [11; 32], [0; 32], 1, None, None));
        let delta_value = encode_delta(&RunRecord { retries: Some(retries(1)), ..record(&state, None) }, record_id(&base_value), 0, 10);
        assert!(is_delta(&delta_value) && delta_value.len() * 2 < base_value.len());
        let (id, mut later, kept) = decode_delta(&delta_value, 64).unwrap();
        assert_eq!((id, later.state.history().len(), kept), (record_id(&base_value), 1, (0, 10)));
        apply_delta(&base, &mut later, kept).unwrap();
        assert_eq!(later.state.history().iter().map(|r| r.seq()).collect::<Vec<_>>(), (1..=11).collect::<Vec<_>>());
        assert_eq!(later.state.history()[10].args, [11; 32]);
        let r = later.retries.unwrap();
        assert_eq!((r.seqs, r.digests.len(), r.decisions[&2].1.as_str()), (seqs.clone(), 3, "lw-3"));
    }

    #[test]
    fn exemptions_round_trip_with_wall_clock_times() {
        let e = Exemption { id: "d-1".into(), agent_id: "a".into(), tool: "read".into(), args: [4; 32], outcome: Some((1, [5; 32])),
                            created_at: 10.0, expires_at: 70.0, run_id: "r".into() };
        let value = encode_exemptions("t", &[&e], 1000.0);
        let (tenant, back) = decode_exemptions(&value, -1000.0).unwrap();
        assert_eq!((tenant.as_str(), back), ("t", vec![e]));
    }
}

#[cfg(test)]
mod timing {
    use super::*;

    /// Not a check: `cargo test --release --lib stored::timing -- --ignored --nocapture` prints
    /// what encoding and decoding a 30-record run cost in the core alone.
    #[test]
    #[ignore]
    fn encode_and_decode_a_30_record_run() {
        let mut state = RunState::new(30);
        for seq in 0..30u64 {
            let mut args = [0u8; 32];
            args[..8].copy_from_slice(&(seq * 7919).to_le_bytes());
            state.append(Record::new(seq + 1, "read", args, [0; 32], 0, Some(&format!("c{seq}")), None));
        }
        let run = RunRecord { tenant: "", run_id: "run-17", agent_id: "", session_id: "", last_seen: 1.7e9, events_evaluated: 30, state: &state, retries: None, tree: None };
        let n = 20_000;
        let started = std::time::Instant::now();
        let mut bytes = 0;
        for _ in 0..n {
            bytes += encode(&run).len();
        }
        let encode_us = started.elapsed().as_secs_f64() / n as f64 * 1e6;
        let value = encode(&run);
        let started = std::time::Instant::now();
        for _ in 0..n {
            std::hint::black_box(decode(&value, 64).unwrap());
        }
        let decode_us = started.elapsed().as_secs_f64() / n as f64 * 1e6;
        let started = std::time::Instant::now();
        for _ in 0..n {
            std::hint::black_box(run_message(&run, 0));
        }
        let build_us = started.elapsed().as_secs_f64() / n as f64 * 1e6;
        println!("encode {encode_us:.2} us (message built {build_us:.2} us), decode {decode_us:.2} us, {} bytes", bytes / n);
    }
}
