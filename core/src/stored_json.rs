//! Reads the JSON stored runs written before version 4 (stored.rs): the record of
//! `statestore/encoding.py` versions 1 to 3 (b"LWR\x01".."LWR\x03" and a zlib stream of the
//! JSON), its delta (b"LWD\x01" and the JSON), a tenant's exemption table (b"LWX\x01" and a
//! zlib stream), and a bare record (a pre-state-store snapshot's runs, snapshot.py). Kept so old
//! state files and Redis values load unchanged; nothing writes this format any more, and a run
//! read from it is written in the new one at its next flush.
//!
//! The record as the JSON-era writer wrote it:
//!
//! ```text
//! {"tenant", "run_id", "agent_id", "session_id", "last_seen": wall-clock seconds,
//!  "events_evaluated",
//!  "state": {"history": {"capacity", "args": hex, "results": hex, "status": hex, "tools": [..],
//!                        "call_ids": [..], "seqs": [..], "unknown": null | [null | name, ..],
//!                        "failure_keys"?, "spellings"?, "flags"? (absent = none)},
//!            "announced": null | {key: decade} (insertion order: the oldest key goes first),
//!            "guard": null | {"window_size", "observed", "all_identical",
//!                             "first_triple": null | [tool, args hex, status, result hex], "seqs"},
//!            "abort": null | verdict, "blocks", "seen_triples": null | [u64, ..], "no_new_streak",
//!            "side_effects"?: [[tool, args hex, seq, call id | null, succeeded], ..],
//!            "batch"?: {"number", "size", "outcomes_seen", "critical": null | {"batch",
//!            "detector", "tool"}},
//!            "asks"?: {"pending": [[tool call id, decision id, warning key, tool, args hex,
//!            null | [status, result hex], asked_at, cause], ..], "denied": [warning key, ..]}},
//!  "retries": null | {"seqs", "digests": hex, "next_slot", "decisions": {"slot": {"seq",
//!                     "decision_id", "verdict"}}},
//!  "tree"?: {"parent", "root", "depth", "children", "children_created", "started", "totals": T,
//!            "tree_totals": null | T, "notices": [[child, detector, tool, head], ..], "warned",
//!            "extensions"?: [n, ..]}}
//!   T = {"tool_calls", "tool_ms", "input_tokens", "output_tokens", "cost_usd", "runs"}
//! ```
//!
//! A delta is the same object with "base" (XXH3-64 of its base record's JSON, hex), a history
//! with "drop", "keep" and only the records after the kept ones, and a retry window with
//! "slots" and "len". Versions 1 and 2 hashed retries (and version 1 run-wide outcomes)
//! differently: their retry window is dropped, and version 1's outcomes seen run-wide are
//! forgotten (the breaker can only trip later, never earlier).
//! The reader keeps object keys in order (the announced keys' order is state) and refuses
//! anything that is not such a record with a message naming the field.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::engine::{Detector, Guard, Record, RunState, SideEffect, Tool, Verdict, MAX_SIDE_EFFECTS};
use crate::decoded::{action, error_code, level, Decoded, DecodedRetries, StoredRun};
use crate::tree_link::{Notice, Totals, TreeLink};

pub const MAX_RECORD_DEPTH: usize = 16;
pub const RUN_MAGIC_V3: &[u8; 4] = b"LWR\x03";
pub const RUN_MAGIC_V2: &[u8; 4] = b"LWR\x02";
pub const RUN_MAGIC_V1: &[u8; 4] = b"LWR\x01";
pub const DELTA_MAGIC: &[u8; 4] = b"LWD\x01";
pub const EXEMPTIONS_MAGIC: &[u8; 4] = b"LWX\x01";
/// An inflated record larger than this is refused (a run's record is kilobytes).
const MAX_INFLATED: usize = 64 << 20;

fn inflate(stream: &[u8], what: &str) -> Result<Vec<u8>, String> {
    miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(stream, MAX_INFLATED).map_err(|e| format!("malformed {what}: {e:?}"))
}

/// A JSON-era run value (or a bare record), with the id and length its deltas weigh against.
pub fn read_run_value(value: &[u8], retry_window: usize) -> Result<StoredRun, String> {
    let (text, version) = match value.get(..4) {
        Some(m) if m == RUN_MAGIC_V3 => (inflate(&value[4..], "run")?, 3),
        Some(m) if m == RUN_MAGIC_V2 => (inflate(&value[4..], "run")?, 2),
        Some(m) if m == RUN_MAGIC_V1 => (inflate(&value[4..], "run")?, 1),
        _ if value.first() == Some(&b'{') => (value.to_vec(), 3),
        _ => return Err(format!("unknown run encoding {:?}", String::from_utf8_lossy(&value[..value.len().min(4)]))),
    };
    let mut run = decode(&text, retry_window)?;
    if version < 3 {
        run.retries = None;
    }
    if version == 1 && run.state.rare().seen_triples.is_some() {
        run.state.rare_mut().seen_triples = Some(Box::default());
        run.state.no_new_streak = 0;
    }
    Ok(StoredRun { id: record_id(&text), len: text.len(), run, legacy: true })
}

/// A JSON-era delta value (b"LWD\x01").
pub fn read_delta_value(value: &[u8], retry_window: usize) -> Result<(u64, Decoded, (usize, usize)), String> {
    let text = value.strip_prefix(DELTA_MAGIC.as_slice()).ok_or("not a delta")?;
    decode_delta(text, retry_window)
}

/// A JSON-era exemption table (b"LWX\x01").
pub fn read_exemptions_value(value: &[u8], from_wall: f64) -> Result<(String, Vec<crate::engine::ask::Exemption>), String> {
    let stream = value.strip_prefix(EXEMPTIONS_MAGIC.as_slice()).ok_or_else(|| format!("not an exemption table: {:?}", String::from_utf8_lossy(&value[..value.len().min(4)])))?;
    decode_exemptions(&inflate(stream, "exemption table")?, from_wall)
}

/// The id a JSON-era delta names its base by: XXH3-64 of the base record's JSON text.
fn record_id(text: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(text)
}

// ------------------------------------------------------------------ reading

/// A JSON value with object keys in document order (numbers kept as their text).
#[derive(Debug)]
enum J {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.pos))
    }
    fn ws(&mut self) {
        while self.pos < self.text.len() && matches!(self.text[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }
    fn eat(&mut self, b: u8) -> bool {
        self.ws();
        if self.text.get(self.pos) == Some(&b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn value(&mut self, depth: usize) -> Result<J, String> {
        if depth > MAX_RECORD_DEPTH {
            return self.fail("nested too deep");
        }
        self.ws();
        match self.text.get(self.pos) {
            None => self.fail("unexpected end"),
            Some(b'{') => {
                self.pos += 1;
                let mut entries = Vec::new();
                if self.eat(b'}') {
                    return Ok(J::Obj(entries));
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    if !self.eat(b':') {
                        return self.fail("expected ':'");
                    }
                    let value = self.value(depth + 1)?;
                    entries.push((key, value));
                    if self.eat(b',') {
                        continue;
                    }
                    if self.eat(b'}') {
                        return Ok(J::Obj(entries));
                    }
                    return self.fail("expected ',' or '}'");
                }
            }
            Some(b'[') => {
                self.pos += 1;
                let mut items = Vec::new();
                if self.eat(b']') {
                    return Ok(J::Arr(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    if self.eat(b',') {
                        continue;
                    }
                    if self.eat(b']') {
                        return Ok(J::Arr(items));
                    }
                    return self.fail("expected ',' or ']'");
                }
            }
            Some(b'"') => Ok(J::Str(self.string()?)),
            Some(b't') if self.text[self.pos..].starts_with(b"true") => {
                self.pos += 4;
                Ok(J::Bool(true))
            }
            Some(b'f') if self.text[self.pos..].starts_with(b"false") => {
                self.pos += 5;
                Ok(J::Bool(false))
            }
            Some(b'n') if self.text[self.pos..].starts_with(b"null") => {
                self.pos += 4;
                Ok(J::Null)
            }
            Some(b'-' | b'0'..=b'9') => {
                let start = self.pos;
                while self.pos < self.text.len() && matches!(self.text[self.pos], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                    self.pos += 1;
                }
                Ok(J::Num(String::from_utf8_lossy(&self.text[start..self.pos]).into_owned()))
            }
            Some(_) => self.fail("unexpected character"),
        }
    }
    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self.text.get(self.pos..self.pos + 4).ok_or("truncated \\u escape")?;
        let text = std::str::from_utf8(digits).map_err(|_| "bad \\u escape")?;
        self.pos += 4;
        u32::from_str_radix(text, 16).map_err(|_| "bad \\u escape".to_string())
    }
    fn string(&mut self) -> Result<String, String> {
        if self.text.get(self.pos) != Some(&b'"') {
            return self.fail("expected a string");
        }
        self.pos += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(&b) = self.text.get(self.pos) else { return self.fail("unterminated string") };
            self.pos += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.text.get(self.pos) else { return self.fail("unterminated string") };
                    self.pos += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let first = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&first) && self.text[self.pos..].starts_with(b"\\u") {
                                self.pos += 2;
                                let second = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&second) {
                                    return self.fail("lone surrogate");
                                }
                                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                            } else {
                                first
                            };
                            match char::from_u32(code) {
                                Some(c) => c,
                                None => return self.fail("lone surrogate"),
                            }
                        }
                        _ => return self.fail("bad escape"),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                _ => out.push(b),
            }
        }
        String::from_utf8(out).map_err(|_| format!("invalid UTF-8 in a string before byte {}", self.pos))
    }
}

fn parse(text: &[u8]) -> Result<J, String> {
    let mut p = Parser { text, pos: 0 };
    let value = p.value(0)?;
    p.ws();
    if p.pos != text.len() {
        return p.fail("trailing data");
    }
    Ok(value)
}

/// Field access with errors that name the field's path.
struct At<'a> {
    value: &'a J,
    path: String,
}

impl<'a> At<'a> {
    fn field(&self, name: &str) -> Result<At<'a>, String> {
        match self.value {
            J::Obj(entries) => match entries.iter().rev().find(|(k, _)| k == name) {
                Some((_, v)) => Ok(At { value: v, path: format!("{}.{name}", self.path) }),
                None => Err(format!("{} has no field {name:?}", self.path)),
            },
            _ => Err(format!("{} is not an object", self.path)),
        }
    }
    fn is_null(&self) -> bool {
        matches!(self.value, J::Null)
    }
    /// A key newer records may hold: None when it is absent or null.
    fn absent_or_null(&self, name: &str) -> Result<Option<At<'a>>, String> {
        match self.value {
            J::Obj(entries) if !entries.iter().any(|(k, _)| k == name) => Ok(None),
            _ => self.opt(name),
        }
    }
    fn opt(&self, name: &str) -> Result<Option<At<'a>>, String> {
        let f = self.field(name)?;
        Ok(if f.is_null() { None } else { Some(f) })
    }
    fn str(&self) -> Result<&'a str, String> {
        match self.value {
            J::Str(s) => Ok(s),
            _ => Err(format!("{} is not a string", self.path)),
        }
    }
    fn u64(&self) -> Result<u64, String> {
        match self.value {
            J::Num(n) => n.parse::<u64>().map_err(|_| format!("{} is not an unsigned 64-bit integer: {n}", self.path)),
            _ => Err(format!("{} is not an integer", self.path)),
        }
    }
    fn u32(&self) -> Result<u32, String> {
        u32::try_from(self.u64()?).map_err(|_| format!("{} is out of range", self.path))
    }
    fn f64(&self) -> Result<f64, String> {
        match self.value {
            J::Num(n) => n.parse::<f64>().ok().filter(|f| f.is_finite()).ok_or_else(|| format!("{} is not a number: {n}", self.path)),
            _ => Err(format!("{} is not a number", self.path)),
        }
    }
    fn bool(&self) -> Result<bool, String> {
        match self.value {
            J::Bool(b) => Ok(*b),
            _ => Err(format!("{} is not a boolean", self.path)),
        }
    }
    fn items(&self) -> Result<Vec<At<'a>>, String> {
        match self.value {
            J::Arr(items) => Ok(items.iter().enumerate().map(|(i, v)| At { value: v, path: format!("{}[{i}]", self.path) }).collect()),
            _ => Err(format!("{} is not an array", self.path)),
        }
    }
    fn entries(&self) -> Result<Vec<(&'a str, At<'a>)>, String> {
        match self.value {
            J::Obj(entries) => Ok(entries.iter().map(|(k, v)| (k.as_str(), At { value: v, path: format!("{}.{k}", self.path) })).collect()),
            _ => Err(format!("{} is not an object", self.path)),
        }
    }
    fn hex(&self) -> Result<Vec<u8>, String> {
        let text = self.str()?.as_bytes();
        if text.len() % 2 != 0 {
            return Err(format!("{} is not hex (odd length)", self.path));
        }
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        };
        text.chunks(2)
            .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| format!("{} is not hex", self.path))
    }
}

fn digest32(bytes: &[u8]) -> [u8; 32] {
    let mut d = [0u8; 32];
    d.copy_from_slice(bytes);
    d
}

fn hex32(at: &At) -> Result<[u8; 32], String> {
    let bytes = at.hex()?;
    if bytes.len() != 32 {
        return Err(format!("{} is not a 32-byte digest", at.path));
    }
    Ok(digest32(&bytes))
}

fn action_at(at: &At) -> Result<crate::engine::Action, String> {
    action(at.str()?, &at.path)
}

fn read_verdict(at: &At) -> Result<Verdict, String> {
    let detector_name = at.field("detector")?;
    let detector = Detector::from_name(detector_name.str().unwrap_or(""))
        .ok_or_else(|| format!("{} is not a detector", detector_name.path))?;
    let level_at = at.field("level")?;
    let level = level(level_at.str()?, &level_at.path)?;
    let code_at = at.field("error_code")?;
    let error_code = error_code(code_at.str()?, &code_at.path)?;
    Ok(Verdict {
        action: action_at(&at.field("action")?)?,
        detector,
        level,
        count: at.field("count")?.u32()?,
        message: at.field("message")?.str()?.to_string(),
        warning_key: at.field("warning_key")?.str()?.to_string(),
        announce: at.field("announce")?.bool()?,
        paired_tool_name: at.field("paired_tool_name")?.str()?.to_string(),
        error_code,
        tool_name: at.field("tool_name")?.str()?.to_string(),
        evidence_seqs: at.field("evidence_seqs")?.items()?.iter().map(At::u64).collect::<Result<_, _>>()?,
        evidence_call_ids: at.field("evidence_call_ids")?.items()?.iter().map(|i| i.str().map(str::to_string)).collect::<Result<_, _>>()?,
        shadow_action: match at.opt("shadow_action")? {
            None => None,
            Some(a) => Some(action_at(&a)?),
        },
        guard_armed: match at.field("guard_armed") {
            Ok(b) => b.bool()?,
            Err(_) => false,
        },
    })
}

/// The state, and for a delta's the (dropped, kept) records of its base (`encode_delta`).
fn read_state(at: &At) -> Result<(RunState, Option<(usize, usize)>), String> {
    let h = at.field("history")?;
    let capacity = h.field("capacity")?.u64()? as usize;
    let kept = match h.absent_or_null("keep")? {
        None => None,
        Some(keep) => Some((h.field("drop")?.u64()? as usize, keep.u64()? as usize)),
    };
    let args = h.field("args")?.hex()?;
    let results = h.field("results")?.hex()?;
    let status = h.field("status")?.hex()?;
    let tools = h.field("tools")?.items()?;
    let call_ids = h.field("call_ids")?.items()?;
    let seqs = h.field("seqs")?.items()?;
    let unknown = match h.opt("unknown")? {
        None => None,
        Some(u) => Some(u.items()?),
    };
    let failure_keys = match h.absent_or_null("failure_keys")? {
        None => None,
        Some(f) => Some(f.items()?),
    };
    let flags = match h.absent_or_null("flags")? {
        None => None,
        Some(f) => Some(f.hex()?),
    };
    let spellings = match h.absent_or_null("spellings")? {
        None => None,
        Some(s) => Some(s.items()?),
    };
    let size = tools.len();
    if spellings.as_ref().is_some_and(|s| s.len() != size) {
        return Err(format!("{} columns disagree in length", h.path));
    }
    if failure_keys.as_ref().is_some_and(|f| f.len() != size) || flags.as_ref().is_some_and(|f| f.len() != size) {
        return Err(format!("{} columns disagree in length", h.path));
    }
    if args.len() != size * 32 || results.len() != size * 32 || status.len() != size || call_ids.len() != size
        || seqs.len() != size || unknown.as_ref().is_some_and(|u| u.len() != size)
    {
        return Err(format!("{} columns disagree in length", h.path));
    }
    let mut history = VecDeque::with_capacity(size.max(capacity.min(64)));
    for i in 0..size {
        let call_id = call_ids[i].str()?;
        let missing = match &unknown {
            Some(u) if !u[i].is_null() => Some(u[i].str()?),
            _ => None,
        };
        if status[i] > 2 {
            return Err(format!("{}.status[{i}] is not a result status", h.path));
        }
        let tool = tools[i].str()?;
        let spelled = match &spellings {
            Some(s) if !s[i].is_null() => {
                let spelled = s[i].str()?;
                if crate::toolnames::normalize_tool_name(spelled) != tool {
                    return Err(format!("{}.spellings[{i}] is not a spelling of {tool:?}", h.path));
                }
                spelled
            }
            _ => tool,
        };
        history.push_back(Record::of(
            seqs[i].u64()?,
            Tool::spelled(tool, spelled),
            digest32(&args[i * 32..(i + 1) * 32]),
            digest32(&results[i * 32..(i + 1) * 32]),
            status[i],
            if call_id.is_empty() { None } else { Some(call_id) },
            missing,
        ));
        if let Some(keys) = &failure_keys {
            if !keys[i].is_null() {
                history.back_mut().expect("just pushed").set_failure_key(Some(hex32(&keys[i])?));
            }
        }
        if let (Some(f), Some(r)) = (&flags, history.back_mut()) {
            r.flags = f[i];
        }
    }
    let announced = match at.opt("announced")? {
        None => None,
        Some(a) => Some(Box::new(a.entries()?.into_iter().map(|(k, v)| Ok((k.to_string(), v.u32()?))).collect::<Result<Vec<_>, String>>()?)),
    };
    let guard = match at.opt("guard")? {
        None => None,
        Some(g) => {
            let first = match g.opt("first_triple")? {
                None => None,
                Some(t) => {
                    let parts = t.items()?;
                    if parts.len() != 4 {
                        return Err(format!("{} is not a triple", t.path));
                    }
                    let status = u8::try_from(parts[2].u64()?).map_err(|_| format!("{} is out of range", parts[2].path))?;
                    Some((Box::<str>::from(parts[0].str()?), hex32(&parts[1])?, status, hex32(&parts[3])?))
                }
            };
            Some(Box::new(Guard {
                window_size: g.field("window_size")?.u32()?,
                observed: g.field("observed")?.u32()?,
                first,
                all_identical: g.field("all_identical")?.bool()?,
                seqs: g.field("seqs")?.items()?.iter().map(At::u64).collect::<Result<_, _>>()?,
            }))
        }
    };
    let abort = match at.opt("abort")? {
        None => None,
        Some(v) => Some(Box::new(read_verdict(&v)?)),
    };
    let seen_triples = match at.opt("seen_triples")? {
        None => None,
        Some(s) => Some(Box::new(s.items()?.iter().map(At::u64).collect::<Result<HashSet<u64>, _>>()?)),
    };
    let mut state = RunState::with_history(capacity, history);
    state.blocks = at.field("blocks")?.u32()?;
    state.no_new_streak = at.field("no_new_streak")?.u32()?;
    let side_effects = read_side_effects(at)?.map(Box::new);
    let batch = read_batch(at)?;
    let asks = read_asks(at)?;
    state.set_rare(crate::engine::Rare { announced, guard, abort, seen_triples, side_effects, batch, asks, outputs: None });
    Ok((state, kept))
}

fn read_batch(at: &At) -> Result<Option<Box<crate::engine::batches::Batch>>, String> {
    let Some(b) = at.absent_or_null("batch")? else { return Ok(None) };
    let critical = match b.opt("critical")? {
        None => None,
        Some(c) => {
            let name = c.field("detector")?.str()?;
            let detector = Detector::from_name(name).ok_or_else(|| format!("{}.detector is not a detector id", c.path))?;
            Some(Box::new(crate::engine::batches::FirstCritical {
                batch: c.field("batch")?.u32()?,
                detector,
                tool: c.field("tool")?.str()?.to_string(),
            }))
        }
    };
    Ok(Some(Box::new(crate::engine::batches::Batch {
        number: b.field("number")?.u32()?,
        size: b.field("size")?.u32()?,
        outcomes_seen: b.field("outcomes_seen")?.bool()?,
        critical,
        ..Default::default()
    })))
}

/// `asks`: absent or null = none.
fn read_asks(at: &At) -> Result<Option<Box<crate::engine::ask::Asks>>, String> {
    use crate::engine::ask::{AskCause, Asks, PendingAsk, MAX_DENIED_PATTERNS, MAX_PENDING_ASKS};
    let Some(a) = at.absent_or_null("asks")? else { return Ok(None) };
    let mut asks = Asks::default();
    for item in a.field("pending")?.items()?.iter().rev().take(MAX_PENDING_ASKS).rev() {
        let parts = item.items()?;
        if parts.len() != 8 {
            return Err(format!("{} is not a pending ask [call id, decision id, key, tool, args, outcome, asked_at, cause]", item.path));
        }
        let cause = AskCause::from_name(parts[7].str()?).ok_or_else(|| format!("{} is not an ask cause", parts[7].path))?;
        asks.pending.push(PendingAsk {
            tool_call_id: parts[0].str()?.into(),
            decision_id: parts[1].str()?.into(),
            warning_key: parts[2].str()?.into(),
            tool: parts[3].str()?.into(),
            args: hex32(&parts[4])?,
            outcome: read_outcome(&parts[5])?,
            asked_at: parts[6].f64()?,
            cause,
        });
    }
    for key in a.field("denied")?.items()?.iter().rev().take(MAX_DENIED_PATTERNS).rev() {
        asks.denied.push(key.str()?.into());
    }
    Ok(Some(Box::new(asks)))
}

/// null | [status, result hex].
fn read_outcome(at: &At) -> Result<Option<(u8, [u8; 32])>, String> {
    if at.is_null() {
        return Ok(None);
    }
    let parts = at.items()?;
    if parts.len() != 2 {
        return Err(format!("{} is not an outcome [status, result]", at.path));
    }
    let status = u8::try_from(parts[0].u64()?).ok().filter(|s| *s <= 2).ok_or_else(|| format!("{} is not a result status", parts[0].path))?;
    Ok(Some((status, hex32(&parts[1])?)))
}

/// `side_effects`: absent or null = none; each [tool, args hex, seq, call id | null, succeeded].
fn read_side_effects(at: &At) -> Result<Option<Vec<SideEffect>>, String> {
    let Ok(list) = at.field("side_effects") else { return Ok(None) };
    if list.is_null() {
        return Ok(None);
    }
    let mut effects = Vec::new();
    for item in list.items()?.iter().rev().take(MAX_SIDE_EFFECTS).rev() {
        let parts = item.items()?;
        if parts.len() != 5 {
            return Err(format!("{} is not a side effect [tool, args, seq, call id, succeeded]", item.path));
        }
        effects.push(SideEffect {
            tool: parts[0].str()?.into(),
            args: hex32(&parts[1])?,
            seq: parts[2].u64()?,
            call_id: if parts[3].is_null() { None } else { Some(parts[3].str()?.into()) },
            succeeded: parts[4].bool()?,
        });
    }
    Ok(Some(effects))
}

fn read_totals(at: &At) -> Result<Totals, String> {
    Ok(Totals {
        tool_calls: at.field("tool_calls")?.u64()?,
        tool_ms: at.field("tool_ms")?.u64()?,
        input_tokens: at.field("input_tokens")?.u64()?,
        output_tokens: at.field("output_tokens")?.u64()?,
        cost_usd: at.field("cost_usd")?.f64()?,
        runs: at.field("runs")?.u64()?,
    })
}

/// `tree`: absent or null = a plain run. `started` stays wall-clock seconds (the caller converts).
fn read_tree(run: &At) -> Result<Option<TreeLink>, String> {
    let Some(at) = run.absent_or_null("tree")? else { return Ok(None) };
    let mut notices = Vec::new();
    for item in at.field("notices")?.items()? {
        let parts = item.items()?;
        if parts.len() != 4 {
            return Err(format!("{} is not a notice [child, detector, tool, head]", item.path));
        }
        let detector = Detector::from_name(parts[1].str()?).ok_or_else(|| format!("{} is not a detector", parts[1].path))?;
        notices.push(Notice { child: parts[0].str()?.to_string(), detector, tool: parts[2].str()?.to_string(), head: parts[3].str()?.to_string() });
    }
    let warned = at.field("warned")?.u64()?;
    let mut extensions = [0u32; 6];
    if let Some(list) = at.absent_or_null("extensions")? {
        let items = list.items()?;
        if items.len() != extensions.len() {
            return Err(format!("{} is not {} budget extensions", list.path, extensions.len()));
        }
        for (slot, item) in extensions.iter_mut().zip(&items) {
            *slot = item.u32()?;
        }
    }
    Ok(Some(TreeLink {
        parent: at.field("parent")?.str()?.to_string(),
        root: at.field("root")?.str()?.to_string(),
        depth: at.field("depth")?.u32()?,
        children: at.field("children")?.items()?.iter().map(|c| c.str().map(str::to_string)).collect::<Result<_, _>>()?,
        children_created: at.field("children_created")?.u32()?,
        totals: read_totals(&at.field("totals")?)?,
        started: at.field("started")?.f64()?,
        tree: match at.opt("tree_totals")? {
            None => None,
            Some(t) => Some(Box::new(read_totals(&t)?)),
        },
        notices,
        warned: u8::try_from(warned).map_err(|_| format!("{}.warned is out of range", at.path))?,
        extensions,
    }))
}

fn decode(text: &[u8], retry_window: usize) -> Result<Decoded, String> {
    match decode_as(text, retry_window)? {
        (decoded, None, None) => Ok(decoded),
        _ => Err("run is a delta, not a record".into()),
    }
}

/// A delta (`encode_delta`): its base's id, the run as of the delta with only the records after
/// the kept ones in its history, and (dropped, kept) records of the base. `apply_delta` puts
/// the kept ones back.
fn decode_delta(text: &[u8], retry_window: usize) -> Result<(u64, Decoded, (usize, usize)), String> {
    match decode_as(text, retry_window)? {
        (decoded, Some(base), Some(kept)) => Ok((base, decoded, kept)),
        _ => Err("delta names no base or kept records".into()),
    }
}

/// A decoded record or delta: the run, a delta's base id and its (dropped, kept) base records.
type DecodedAs = (Decoded, Option<u64>, Option<(usize, usize)>);

fn decode_as(text: &[u8], retry_window: usize) -> Result<DecodedAs, String> {
    let root = parse(text)?;
    let run = At { value: &root, path: "run".into() };
    let base = match run.absent_or_null("base")? {
        None => None,
        Some(b) => {
            let raw = b.hex()?;
            let bytes: [u8; 8] = raw.as_slice().try_into().map_err(|_| format!("{} is not 8 bytes of hex", b.path))?;
            Some(u64::from_be_bytes(bytes))
        }
    };
    let (state, kept) = read_state(&run.field("state")?)?;
    let retries = match run.opt("retries")? {
        None => None,
        Some(r) => {
            let seqs: Vec<u64> = r.field("seqs")?.items()?.iter().map(At::u64).collect::<Result<_, _>>()?;
            let slots = match r.absent_or_null("slots")? {
                None => None,
                Some(list) => {
                    let slots: Vec<usize> = list.items()?.iter().map(|s| s.u64().map(|s| s as usize)).collect::<Result<_, _>>()?;
                    let len = r.field("len")?.u64()? as usize;
                    if slots.len() != seqs.len() || len > retry_window || slots.iter().any(|&s| s >= len) {
                        return Err(format!("{}.slots disagree with its window", r.path));
                    }
                    Some((slots, len))
                }
            };
            let raw = r.field("digests")?.hex()?;
            if raw.len() != seqs.len() * 8 || seqs.len() > retry_window {
                return Err(format!("{} columns disagree in length", r.path));
            }
            let digests = raw.chunks(8).map(|c| {
                let mut d = [0u8; 8];
                d.copy_from_slice(c);
                d
            }).collect();
            let next_slot = r.field("next_slot")?.u64()? as usize;
            if next_slot >= retry_window {
                return Err(format!("{}.next_slot is out of range", r.path));
            }
            let mut decisions = HashMap::new();
            for (slot, d) in r.field("decisions")?.entries()? {
                let slot: usize = slot.parse().map_err(|_| format!("{} is not a slot number", d.path))?;
                decisions.insert(slot, (d.field("seq")?.u64()?, d.field("decision_id")?.str()?.to_string(), read_verdict(&d.field("verdict")?)?));
            }
            let unsaved = slots.as_ref().map_or(0, |(slots, _)| slots.len());
            Some(DecodedRetries { seqs, digests, next_slot, decisions, slots, unsaved })
        }
    };
    Ok((Decoded {
        tenant: run.field("tenant")?.str()?.to_string(),
        run_id: run.field("run_id")?.str()?.to_string(),
        agent_id: run.field("agent_id")?.str()?.to_string(),
        session_id: run.field("session_id")?.str()?.to_string(),
        last_seen: run.field("last_seen")?.f64()?,
        events_evaluated: run.field("events_evaluated")?.u64()?,
        state,
        retries,
        tree: read_tree(&run)?,
    }, base, kept))
}

// ------------------------------------------------------------------ exemptions

/// A JSON-era exemption table's JSON read back; `from_wall` is added to the stored times. Err names the field.
fn decode_exemptions(text: &[u8], from_wall: f64) -> Result<(String, Vec<crate::engine::ask::Exemption>), String> {
    let root = parse(text)?;
    let at = At { value: &root, path: "exemptions".into() };
    let tenant = at.field("tenant")?.str()?.to_string();
    let mut exemptions = Vec::new();
    for e in at.field("exemptions")?.items()? {
        exemptions.push(crate::engine::ask::Exemption {
            id: e.field("id")?.str()?.to_string(),
            agent_id: e.field("agent_id")?.str()?.to_string(),
            tool: e.field("tool")?.str()?.to_string(),
            args: hex32(&e.field("args")?)?,
            outcome: read_outcome(&e.field("outcome")?)?,
            created_at: e.field("created_at")?.f64()? + from_wall,
            expires_at: e.field("expires_at")?.f64()? + from_wall,
            run_id: e.field("run_id")?.str()?.to_string(),
        });
    }
    Ok((tenant, exemptions))
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_keeps_key_order_and_unescapes() {
        let parsed = parse("{\"z\":\"a\\\"b\\\\c\\n\\u0001é😀\",\"a\":1}".as_bytes()).unwrap();
        let J::Obj(entries) = parsed else { panic!("not an object") };
        assert_eq!(vec!["z", "a"], entries.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>());
        assert!(matches!(&entries[0].1, J::Str(s) if s == "a\"b\\c\n\u{1}é😀"));
    }

    #[test]
    fn a_lone_surrogate_and_deep_nesting_are_refused() {
        assert!(parse(br#""\ud800""#).is_err());
        assert!(parse(br#""\ud83d\ude00""#).is_ok());
        let deep = "[".repeat(MAX_RECORD_DEPTH + 2) + &"]".repeat(MAX_RECORD_DEPTH + 2);
        assert!(parse(deep.as_bytes()).unwrap_err().contains("nested too deep"));
    }

    /// Version 1 and 2 values lose what their old digests name; a version 3 value keeps it.
    #[test]
    fn older_versions_drop_what_their_old_digests_name() {
        let record = br#"{"tenant":"","run_id":"r","agent_id":"","session_id":"","last_seen":1.0,"events_evaluated":2,
            "state":{"history":{"capacity":4,"args":"","results":"","status":"","tools":[],"call_ids":[],"seqs":[],"unknown":null},
                     "announced":null,"guard":null,"abort":null,"blocks":0,"seen_triples":[1,2],"no_new_streak":3},
            "retries":{"seqs":[5],"digests":"0101010101010101","next_slot":1,"decisions":{}}}"#;
        let framed = |magic: &[u8]| [magic, &miniz_oxide::deflate::compress_to_vec_zlib(record, 1)].concat();
        let v3 = read_run_value(&framed(RUN_MAGIC_V3), 64).unwrap();
        assert!(v3.legacy && v3.run.retries.is_some() && v3.run.state.no_new_streak == 3);
        assert_eq!(v3.id, record_id(record), "a JSON-era delta names its base by the record's text");
        let v2 = read_run_value(&framed(RUN_MAGIC_V2), 64).unwrap().run;
        assert!(v2.retries.is_none() && v2.state.rare().seen_triples.as_ref().unwrap().len() == 2);
        let v1 = read_run_value(&framed(RUN_MAGIC_V1), 64).unwrap().run;
        assert!(v1.retries.is_none() && v1.state.rare().seen_triples.clone().unwrap().is_empty() && v1.state.no_new_streak == 0);
        assert!(read_run_value(record, 64).is_ok(), "a bare record (a snapshot's run)");
        assert!(read_run_value(b"LWR\x03not zlib", 64).err().unwrap().contains("malformed run"));
    }
}
