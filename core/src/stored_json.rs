//! A run as the state stores hold it: the JSON record of `statestore/encoding.py` (version 1),
//! written and read by this engine exactly as by the Python one, so a file or Redis store
//! written by either engine is read by the other.
//!
//! The record (Python's `snapshot._encode_state` / `_encode_retries` and `encoding.encode_run`):
//!
//! ```text
//! {"tenant", "run_id", "agent_id", "session_id", "last_seen": wall-clock seconds,
//!  "events_evaluated",
//!  "state": {"history": {"capacity", "args": hex, "results": hex, "status": hex, "tools": [..],
//!                        "call_ids": [..], "seqs": [..], "unknown": null | [null | name, ..]},
//!            "announced": null | {key: decade} (insertion order: the oldest key goes first),
//!            "guard": null | {"window_size", "observed", "all_identical",
//!                             "first_triple": null | [tool, args hex, status, result hex], "seqs"},
//!            "abort": null | verdict, "blocks", "seen_triples": null | [u64, ..], "no_new_streak",
//!            "side_effects" (optional): [[tool, args hex, seq, call id | null, succeeded], ..],
//!            "batch" (optional): {"number", "size", "outcomes_seen", "critical": null | {"batch",
//!            "detector", "tool"}},
//!            "asks" (optional, engine::ask): {"pending": [[tool call id, decision id, warning key,
//!            tool, args hex, null | [status, result hex], asked_at (wall-clock seconds), cause], ..],
//!            "denied": [warning key, ..]}},
//!  (history's optional "flags": hex, one byte per record: engine::batches; both written only
//!   when set, and absent = none, so records without batches are unchanged)
//!  (history's optional "spellings": [null | name, ..], the tool as the host spelled it where that
//!   differs from "tools" (`Bash` of `exec`); written only when one differs, absent/null = the
//!   normalised name)
//!  "retries": null | {"seqs", "digests": hex, "next_slot", "decisions": {"slot": {"seq",
//!                     "decision_id", "verdict"}}},
//!  "tree" (optional: runs of a run tree or under a budget, service/trees.rs): {"parent", "root"
//!         ("" = the run is its root), "depth", "children": [..], "children_created",
//!         "started": wall-clock seconds, "totals": T, "tree_totals": null | T (the root's),
//!         "notices": [[child, detector, tool, head], ..], "warned", "extensions" (optional:
//!         [n, ..] per budget, written only when a person extended one)}}
//!   T = {"tool_calls", "tool_ms", "input_tokens", "output_tokens", "cost_usd", "runs"}
//! ```
//!
//! A *delta* (`encode_delta`, service/persist.rs writes one to a store that keeps them) is the
//! same object with `"base"`: the 8-byte id (hex) of the full record it applies to, XXH3-64 of
//! that record's JSON (`record_id`); a history with `"drop"`, `"keep"` and only the records after
//! the kept ones (history = base[drop..drop + keep] + these); a retry window with `"slots"`,
//! `"len"` and only the slots written since the base (oldest first; their decisions only); every
//! other field whole. `decode_delta` + `apply_delta` give the run back.
//!
//! Python frames it (magic + zlib) in `encoding.py`; this module only writes and reads the JSON.
//! The reader keeps object keys in order (the announced keys' order is state) and refuses
//! anything that is not such a record with a message naming the field.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::engine::{hex, Action, Detector, Guard, Level, Record, RunState, SideEffect, Tool, Verdict, MAX_SIDE_EFFECTS};
use crate::service::{Notice, Totals, TreeLink};

pub const MAX_RECORD_DEPTH: usize = 16;

// ------------------------------------------------------------------ writing

pub struct Writer(pub Vec<u8>);

impl Writer {
    fn raw(&mut self, s: &str) {
        self.0.extend_from_slice(s.as_bytes());
    }
    pub fn str(&mut self, s: &str) {
        self.0.push(b'"');
        for &b in s.as_bytes() {
            match b {
                b'"' => self.raw("\\\""),
                b'\\' => self.raw("\\\\"),
                b'\n' => self.raw("\\n"),
                b'\r' => self.raw("\\r"),
                b'\t' => self.raw("\\t"),
                0..=0x1f => self.raw(&format!("\\u{:04x}", b)),
                _ => self.0.push(b),
            }
        }
        self.0.push(b'"');
    }
    fn uint(&mut self, n: u64) {
        self.raw(&n.to_string());
    }
    /// A JSON string of the bytes' hex digits, written in place: the bulk of a record (its
    /// digests), so no intermediate String and no escape scan (hex digits need none).
    fn hex_str<'b>(&mut self, parts: impl IntoIterator<Item = &'b [u8]>) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.0.push(b'"');
        for part in parts {
            for &b in part {
                self.0.extend_from_slice(&[HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
            }
        }
        self.0.push(b'"');
    }
    fn float(&mut self, f: f64) {
        let mut buffer = ryu::Buffer::new();
        self.raw(buffer.format_finite(if f.is_finite() { f } else { 0.0 }));
    }
    fn bool(&mut self, b: bool) {
        self.raw(if b { "true" } else { "false" });
    }
    fn null(&mut self) {
        self.raw("null");
    }
    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.str(s),
            None => self.null(),
        }
    }
    fn list<T>(&mut self, items: impl IntoIterator<Item = T>, mut each: impl FnMut(&mut Self, T)) {
        self.0.push(b'[');
        for (i, item) in items.into_iter().enumerate() {
            if i > 0 {
                self.0.push(b',');
            }
            each(self, item);
        }
        self.0.push(b']');
    }
    /// An object whose members are written through `Obj::key`, the commas placed by it.
    fn object(&mut self) -> Obj<'_> {
        self.0.push(b'{');
        Obj { w: self, first: true }
    }
}

struct Obj<'a> {
    w: &'a mut Writer,
    first: bool,
}

impl Obj<'_> {
    /// Start the member `k`; its value is written to the returned writer.
    fn key(&mut self, k: &str) -> &mut Writer {
        if !self.first {
            self.w.0.push(b',');
        }
        self.first = false;
        self.w.str(k);
        self.w.0.push(b':');
        self.w
    }
    fn end(self) {
        self.w.0.push(b'}');
    }
}

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
    pub seqs: &'a [u64],
    pub digests: &'a [[u8; 8]],
    pub next_slot: usize,
    /// slot -> (seq, decision id, verdict), in slot order.
    pub decisions: Vec<(usize, u64, &'a str, &'a Verdict)>,
    /// Events remembered since the base (a delta writes only their slots).
    pub unsaved: usize,
}

pub fn write_verdict(w: &mut Writer, v: &Verdict) {
    // dataclasses.asdict(Verdict) order, enum values as their names.
    let mut o = w.object();
    o.key("action").str(v.action.name());
    o.key("detector").str(v.detector.name());
    o.key("level").str(v.level.name());
    o.key("count").uint(v.count as u64);
    o.key("message").str(&v.message);
    o.key("warning_key").str(&v.warning_key);
    o.key("announce").bool(v.announce);
    o.key("paired_tool_name").str(&v.paired_tool_name);
    o.key("error_code").str(v.error_code);
    o.key("tool_name").str(&v.tool_name);
    o.key("evidence_seqs").list(&v.evidence_seqs, |w, s| w.uint(*s));
    o.key("evidence_call_ids").list(&v.evidence_call_ids, |w, s| w.str(s));
    o.key("shadow_action").opt_str(v.shadow_action.map(|a| a.name()));
    o.key("guard_armed").bool(v.guard_armed);
    o.end();
}

/// The history object: every record (a full record), or, for a delta (`kept`: Some((dropped,
/// kept))), the base's records it keeps (`drop`, `keep`) and only the records after them.
fn write_history(w: &mut Writer, state: &RunState, kept: Option<(usize, usize)>) {
    let skip = kept.map_or(0, |(_, keep)| keep);
    let h = || state.history().iter().skip(skip);
    let mut o = w.object();
    o.key("capacity").uint(state.capacity as u64);
    if let Some((dropped, keep)) = kept {
        o.key("drop").uint(dropped as u64);
        o.key("keep").uint(keep as u64);
    }
    o.key("args").hex_str(h().map(|r| &r.args[..]));
    o.key("results").hex_str(h().map(|r| &r.result[..]));
    o.key("status").hex_str(h().map(|r| std::slice::from_ref(&r.status)));
    o.key("tools").list(h(), |w, r| w.str(r.tool()));
    o.key("call_ids").list(h(), |w, r| w.str(r.call_id().unwrap_or("")));
    o.key("seqs").list(h(), |w, r| w.uint(r.seq));
    let unknown = o.key("unknown");
    if h().any(|r| r.unknown().is_some()) {
        unknown.list(h(), |w, r| w.opt_str(r.unknown()));
    } else {
        unknown.null();
    }
    // Optional (absent: no record has one), so a run without exec failure identities is the
    // record every reader of version 3 knows.
    if h().any(|r| r.failure_key().is_some()) {
        o.key("failure_keys").list(h(), |w, r| match r.failure_key() {
            Some(key) => w.str(&hex(key)),
            None => w.null(),
        });
    }
    if h().any(|r| r.spelling() != r.tool()) {
        o.key("spellings").list(h(), |w, r| match r.spelling() {
            spelled if spelled != r.tool() => w.str(spelled),
            _ => w.null(),
        });
    }
    if h().any(|r| r.flags != 0) {
        o.key("flags").hex_str(h().map(|r| std::slice::from_ref(&r.flags)));
    }
    o.end();
}

fn write_guard(w: &mut Writer, g: &Guard) {
    let mut o = w.object();
    o.key("window_size").uint(g.window_size as u64);
    o.key("observed").uint(g.observed as u64);
    o.key("all_identical").bool(g.all_identical);
    let triple = o.key("first_triple");
    match &g.first {
        None => triple.null(),
        Some((tool, args, status, result)) => {
            triple.0.push(b'[');
            triple.str(tool);
            triple.0.push(b',');
            triple.str(&hex(args));
            triple.0.push(b',');
            triple.uint(*status as u64);
            triple.0.push(b',');
            triple.str(&hex(result));
            triple.0.push(b']');
        }
    }
    o.key("seqs").list(&g.seqs, |w, s| w.uint(*s));
    o.end();
}

fn write_state(w: &mut Writer, state: &RunState, kept: Option<(usize, usize)>) {
    let mut o = w.object();
    write_history(o.key("history"), state, kept);
    match &state.announced {
        None => o.key("announced").null(),
        Some(keys) => {
            let mut announced = o.key("announced").object();
            for (key, decade) in keys.iter() {
                announced.key(key).uint(*decade as u64);
            }
            announced.end();
        }
    }
    match &state.guard {
        None => o.key("guard").null(),
        Some(g) => write_guard(o.key("guard"), g),
    }
    match &state.abort {
        None => o.key("abort").null(),
        Some(v) => write_verdict(o.key("abort"), v),
    }
    o.key("blocks").uint(state.blocks as u64);
    match &state.seen_triples {
        None => o.key("seen_triples").null(),
        Some(seen) => {
            let mut keys: Vec<u64> = seen.iter().copied().collect();
            keys.sort_unstable();
            o.key("seen_triples").list(keys, |w, k| w.uint(k));
        }
    }
    o.key("no_new_streak").uint(state.no_new_streak as u64);
    // Optional (absent = none): written only once duplicate_side_effect remembered a call, so
    // every other run's record stays byte for byte what it was.
    if let Some(effects) = &state.side_effects {
        o.key("side_effects").list(effects.iter(), |w, e| {
            w.0.push(b'[');
            w.str(&e.tool);
            w.0.push(b',');
            w.str(&hex(&e.args));
            w.0.push(b',');
            w.uint(e.seq);
            w.0.push(b',');
            w.opt_str(e.call_id.as_deref());
            w.0.push(b',');
            w.bool(e.succeeded);
            w.0.push(b']');
        });
    }
    if let Some(b) = &state.batch {
        let mut batch = o.key("batch").object();
        batch.key("number").uint(b.number as u64);
        batch.key("size").uint(b.size as u64);
        batch.key("outcomes_seen").bool(b.outcomes_seen);
        match &b.critical {
            None => batch.key("critical").null(),
            Some(c) => {
                let mut critical = batch.key("critical").object();
                critical.key("batch").uint(c.batch as u64);
                critical.key("detector").str(c.detector.name());
                critical.key("tool").str(&c.tool);
                critical.end();
            }
        }
        batch.end();
    }
    if let Some(asks) = &state.asks {
        write_asks(o.key("asks"), asks);
    }
    o.end();
}

/// Optional (absent = none): only a run that was given an ASK has it.
fn write_asks(w: &mut Writer, asks: &crate::engine::ask::Asks) {
    let mut o = w.object();
    o.key("pending").list(asks.pending.iter(), |w, p| {
        w.0.push(b'[');
        w.str(&p.tool_call_id);
        w.0.push(b',');
        w.str(&p.decision_id);
        w.0.push(b',');
        w.str(&p.warning_key);
        w.0.push(b',');
        w.str(&p.tool);
        w.0.push(b',');
        w.str(&hex(&p.args));
        w.0.push(b',');
        write_outcome(w, p.outcome.as_ref());
        w.0.push(b',');
        w.float(p.asked_at);
        w.0.push(b',');
        w.str(p.cause.name());
        w.0.push(b']');
    });
    o.key("denied").list(asks.denied.iter(), |w, k| w.str(k));
    o.end();
}

/// An ask's or an exemption's remembered outcome: null | [status, result hex].
pub fn write_outcome(w: &mut Writer, outcome: Option<&(u8, [u8; 32])>) {
    match outcome {
        None => w.null(),
        Some((status, result)) => {
            w.0.push(b'[');
            w.uint(*status as u64);
            w.0.push(b',');
            w.str(&hex(result));
            w.0.push(b']');
        }
    }
}

/// The retry window: whole (a full record), or for a delta only the slots written since the
/// base, oldest first (`slots`), and the window's length (`len`).
fn write_retries(w: &mut Writer, r: &RetriesRecord, delta: bool) {
    let len = r.seqs.len();
    let slots: Vec<usize> = if delta {
        let window = crate::service::RETRY_WINDOW;
        (1..=r.unsaved.min(len)).rev().map(|back| (r.next_slot + window - back) % window).collect()
    } else {
        (0..len).collect()
    };
    let mut o = w.object();
    if delta {
        o.key("slots").list(&slots, |w, s| w.uint(*s as u64));
        o.key("len").uint(len as u64);
    }
    o.key("seqs").list(&slots, |w, s| w.uint(r.seqs[*s]));
    o.key("digests").hex_str(slots.iter().map(|s| &r.digests[*s][..]));
    o.key("next_slot").uint(r.next_slot as u64);
    let mut decisions = o.key("decisions").object();
    for (slot, seq, decision_id, verdict) in r.decisions.iter().filter(|d| !delta || slots.contains(&d.0)) {
        let mut d = decisions.key(&slot.to_string()).object();
        d.key("seq").uint(*seq);
        d.key("decision_id").str(decision_id);
        write_verdict(d.key("verdict"), verdict);
        d.end();
    }
    decisions.end();
    o.end();
}

/// The record's JSON text.
pub fn encode(run: &RunRecord) -> Vec<u8> {
    encode_as(run, None)
}

/// A delta's JSON text: the run as a record of its base (`base`: the base's `record_id`) whose
/// history keeps `base[dropped..dropped + kept]` and holds only the records after them; every
/// other field is written whole. See `decode_delta`.
pub fn encode_delta(run: &RunRecord, base: u64, dropped: usize, kept: usize) -> Vec<u8> {
    encode_as(run, Some((base, dropped, kept)))
}

/// The id a delta names its base by: XXH3-64 of the base record's JSON text.
pub fn record_id(text: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(text)
}

fn encode_as(run: &RunRecord, delta: Option<(u64, usize, usize)>) -> Vec<u8> {
    let records = run.state.history().len() - delta.map_or(0, |(_, _, kept)| kept);
    let mut w = Writer(Vec::with_capacity(1024 + records * 160));
    let mut o = w.object();
    o.key("tenant").str(run.tenant);
    o.key("run_id").str(run.run_id);
    if let Some((base, _, _)) = delta {
        o.key("base").hex_str([&base.to_be_bytes()[..]]);
    }
    o.key("agent_id").str(run.agent_id);
    o.key("session_id").str(run.session_id);
    o.key("last_seen").float(run.last_seen);
    o.key("events_evaluated").uint(run.events_evaluated);
    write_state(o.key("state"), run.state, delta.map(|(_, dropped, kept)| (dropped, kept)));
    match &run.retries {
        None => o.key("retries").null(),
        Some(r) => write_retries(o.key("retries"), r, delta.is_some()),
    }
    if let Some((link, started)) = run.tree {
        write_tree(o.key("tree"), link, started);
    }
    o.end();
    w.0
}

fn write_totals(w: &mut Writer, t: &Totals) {
    let mut o = w.object();
    o.key("tool_calls").uint(t.tool_calls);
    o.key("tool_ms").uint(t.tool_ms);
    o.key("input_tokens").uint(t.input_tokens);
    o.key("output_tokens").uint(t.output_tokens);
    o.key("cost_usd").float(t.cost_usd);
    o.key("runs").uint(t.runs);
    o.end();
}

fn write_tree(w: &mut Writer, link: &TreeLink, started: f64) {
    let mut o = w.object();
    o.key("parent").str(&link.parent);
    o.key("root").str(&link.root);
    o.key("depth").uint(link.depth as u64);
    o.key("children").list(&link.children, |w, c| w.str(c));
    o.key("children_created").uint(link.children_created as u64);
    o.key("started").float(started);
    write_totals(o.key("totals"), &link.totals);
    match &link.tree {
        None => o.key("tree_totals").null(),
        Some(t) => write_totals(o.key("tree_totals"), t),
    }
    o.key("notices").list(&link.notices, |w, n| {
        w.0.push(b'[');
        w.str(&n.child);
        w.0.push(b',');
        w.str(n.detector.name());
        w.0.push(b',');
        w.str(&n.tool);
        w.0.push(b',');
        w.str(&n.head);
        w.0.push(b']');
    });
    o.key("warned").uint(link.warned as u64);
    if link.extensions.iter().any(|&n| n > 0) {
        o.key("extensions").list(&link.extensions, |w, &n| w.uint(n as u64));
    }
    o.end();
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

fn action(at: &At) -> Result<Action, String> {
    Ok(match at.str()? {
        "allow" => Action::Allow,
        "warn" => Action::Warn,
        "block" => Action::Block,
        "abort" => Action::Abort,
        "reject" => Action::Reject,
        "ask" => Action::Ask,
        other => return Err(format!("{} is not an action: {other:?}", at.path)),
    })
}

fn read_verdict(at: &At) -> Result<Verdict, String> {
    let detector_name = at.field("detector")?;
    let detector = Detector::from_name(detector_name.str().unwrap_or(""))
        .ok_or_else(|| format!("{} is not a detector", detector_name.path))?;
    let level_at = at.field("level")?;
    let level = match level_at.str()? {
        "none" => Level::None,
        "warning" => Level::Warning,
        "critical" => Level::Critical,
        _ => return Err(format!("{} is not a level", level_at.path)),
    };
    let code_at = at.field("error_code")?;
    let code = code_at.str()?;
    let error_code = std::iter::once("")
        .chain(crate::tables::error_codes::ALL.iter().copied())
        .find(|c| *c == code)
        .ok_or_else(|| format!("{} is not an error code: {code:?}", code_at.path))?;
    Ok(Verdict {
        action: action(&at.field("action")?)?,
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
            Some(a) => Some(action(&a)?),
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
    state.announced = announced;
    state.guard = guard;
    state.abort = abort;
    state.blocks = at.field("blocks")?.u32()?;
    state.seen_triples = seen_triples;
    state.no_new_streak = at.field("no_new_streak")?.u32()?;
    state.side_effects = read_side_effects(at)?.map(Box::new);
    state.batch = read_batch(at)?;
    state.asks = read_asks(at)?;
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

/// A decoded run, ready for the store.
pub struct Decoded {
    pub tenant: String,
    pub run_id: String,
    pub agent_id: String,
    pub session_id: String,
    pub last_seen: f64,
    pub events_evaluated: u64,
    pub state: RunState,
    pub retries: Option<DecodedRetries>,
    /// Its tree link, `started` in wall-clock seconds.
    pub tree: Option<TreeLink>,
}

pub struct DecodedRetries {
    pub seqs: Vec<u64>,
    pub digests: Vec<[u8; 8]>,
    pub next_slot: usize,
    /// slot -> (seq, decision id, verdict)
    pub decisions: HashMap<usize, (u64, String, Verdict)>,
    /// A delta's: the slots `seqs`/`digests` hold (written since its base, oldest first) and
    /// the window's length; `apply_delta` writes them into the base's window.
    pub slots: Option<(Vec<usize>, usize)>,
    /// Events remembered since the base: the slots a later delta must still carry.
    pub unsaved: usize,
}

pub fn decode(text: &[u8], retry_window: usize) -> Result<Decoded, String> {
    match decode_as(text, retry_window)? {
        (decoded, None, None) => Ok(decoded),
        _ => Err("run is a delta, not a record".into()),
    }
}

/// A delta (`encode_delta`): its base's id, the run as of the delta with only the records after
/// the kept ones in its history, and (dropped, kept) records of the base. `apply_delta` puts
/// the kept ones back.
pub fn decode_delta(text: &[u8], retry_window: usize) -> Result<(u64, Decoded, (usize, usize)), String> {
    match decode_as(text, retry_window)? {
        (decoded, Some(base), Some(kept)) => Ok((base, decoded, kept)),
        _ => Err("delta names no base or kept records".into()),
    }
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

/// A tenant's standing exemptions as one state-store record (service::exemptions; Python frames
/// it with its own magic so it is never read as a run):
/// `{"tenant", "exemptions": [{"id", "agent_id", "tool", "args": hex, "outcome": null |
/// [status, result hex], "created_at", "expires_at" (wall-clock seconds), "run_id"}, ..]}`.
/// `to_wall`: added to the in-memory times.
pub fn encode_exemptions(tenant: &str, exemptions: &[&crate::engine::ask::Exemption], to_wall: f64) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(128 + exemptions.len() * 256));
    let mut o = w.object();
    o.key("tenant").str(tenant);
    o.key("exemptions").list(exemptions.iter(), |w, e| {
        let mut x = w.object();
        x.key("id").str(&e.id);
        x.key("agent_id").str(&e.agent_id);
        x.key("tool").str(&e.tool);
        x.key("args").str(&hex(&e.args));
        write_outcome(x.key("outcome"), e.outcome.as_ref());
        x.key("created_at").float(e.created_at + to_wall);
        x.key("expires_at").float(e.expires_at + to_wall);
        x.key("run_id").str(&e.run_id);
        x.end();
    });
    o.end();
    w.0
}

/// `encode_exemptions` read back; `from_wall` is added to the stored times. Err names the field.
pub fn decode_exemptions(text: &[u8], from_wall: f64) -> Result<(String, Vec<crate::engine::ask::Exemption>), String> {
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
    fn strings_survive_escaping_and_the_reader_keeps_key_order() {
        let mut w = Writer(Vec::new());
        w.str("a\"b\\c\n\u{1}é😀");
        let text = String::from_utf8(w.0).unwrap();
        let parsed = parse(format!("{{\"z\":{text},\"a\":1}}").as_bytes()).unwrap();
        let J::Obj(entries) = parsed else { panic!("not an object") };
        assert_eq!(vec!["z", "a"], entries.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>());
        assert!(matches!(&entries[0].1, J::Str(s) if s == "a\"b\\c\n\u{1}é😀"));
    }

    /// The in-place hex writer gives exactly the string the escaping writer gave (stored
    /// records stay byte for byte what they were) and the reader takes it back.
    #[test]
    fn hex_written_in_place_is_the_escaped_hex_string() {
        let parts: [&[u8]; 3] = [&[0x00, 0x0f, 0xf0], &[], &[0xab, 0xcd, 0xef, 0x12]];
        let mut fast = Writer(Vec::new());
        fast.hex_str(parts);
        let mut escaped = Writer(Vec::new());
        escaped.str(&parts.iter().map(|p| hex(p)).collect::<String>());
        assert_eq!(escaped.0, fast.0);
        assert_eq!(b"\"000ff0abcdef12\"".to_vec(), fast.0);
    }

    /// A run's pending asks and denied patterns (engine::ask) survive a store; absent = none.
    #[test]
    fn asks_round_trip_and_are_optional() {
        use crate::engine::ask::{AskCause, Asks, PendingAsk};
        let mut state = RunState::new(4);
        let run = |state: &RunState| encode(&RunRecord {
            tenant: "", run_id: "r", agent_id: "", session_id: "", last_seen: 1.0, events_evaluated: 2, state,
            retries: None, tree: None,
        });
        let plain = run(&state);
        assert!(!String::from_utf8_lossy(&plain).contains("asks"), "absent unless asked");
        assert!(decode(&plain, 16).unwrap().state.asks.is_none());
        let asks = Asks {
            pending: vec![
                PendingAsk { tool_call_id: "c1".into(), decision_id: "lw-1".into(), warning_key: "generic:fetch:ab".into(), tool: "fetch".into(),
                             args: [7; 32], outcome: Some((1, [8; 32])), asked_at: 1700000000.5, cause: AskCause::Critical },
                PendingAsk { tool_call_id: "".into(), decision_id: "lw-2".into(), warning_key: "budget:tool_calls".into(), tool: "read".into(),
                             args: [9; 32], outcome: None, asked_at: 1700000001.0, cause: AskCause::Budget },
            ],
            denied: vec!["cycle:3:x".into()],
        };
        state.asks = Some(Box::new(asks.clone()));
        assert_eq!(*decode(&run(&state), 16).unwrap().state.asks.unwrap(), asks);
        let bad = String::from_utf8(run(&state)).unwrap().replace("\"budget\"", "\"bogus\"");
        assert!(decode(bad.as_bytes(), 16).err().unwrap().contains("not an ask cause"));
    }

    #[test]
    fn side_effects_round_trip_and_are_optional() {
        use crate::engine::SideEffect;
        let mut state = RunState::new(4);
        let run = |state: &RunState| encode(&RunRecord {
            tenant: "", run_id: "r", agent_id: "", session_id: "", last_seen: 1.0, events_evaluated: 2, state,
            retries: None, tree: None,
        });
        let plain = run(&state);
        assert!(!String::from_utf8_lossy(&plain).contains("side_effects"), "absent unless remembered");
        assert!(decode(&plain, 16).unwrap().state.side_effects.is_none());
        let effects = vec![
            SideEffect { tool: "send_email".into(), args: [7; 32], seq: 3, call_id: Some("c1".into()), succeeded: true },
            SideEffect { tool: "pay".into(), args: [9; 32], seq: 5, call_id: None, succeeded: false },
        ];
        state.side_effects = Some(Box::new(effects.clone()));
        let read = decode(&run(&state), 16).unwrap().state.side_effects.unwrap();
        assert_eq!(*read, effects);
    }

    #[test]
    fn a_lone_surrogate_and_deep_nesting_are_refused() {
        assert!(parse(br#""\ud800""#).is_err());
        assert!(parse(br#""\ud83d\ude00""#).is_ok());
        let deep = "[".repeat(MAX_RECORD_DEPTH + 2) + &"]".repeat(MAX_RECORD_DEPTH + 2);
        assert!(parse(deep.as_bytes()).unwrap_err().contains("nested too deep"));
    }

    /// A run's batches (record flags, the current batch, the first critical) survive a store,
    /// and a record written without them (absent keys) reads as none.
    #[test]
    fn spellings_round_trip_and_are_optional() {
        use crate::engine::Tool;
        let mut state = RunState::new(4);
        state.append(Record::of(1, Tool::spelled("exec", "Bash"), [1; 32], [0; 32], 1, None, None));
        state.append(Record::new(2, "exec", [1; 32], [0; 32], 1, None, None));
        let record = |state: &RunState| encode(&RunRecord {
            tenant: "", run_id: "r", agent_id: "", session_id: "", last_seen: 0.0, events_evaluated: 2, state, retries: None, tree: None,
        });
        let text = String::from_utf8(record(&state)).unwrap();
        assert!(text.contains(r#""spellings":["Bash",null]"#), "{text}");
        let back = decode(&record(&state), 16).ok().unwrap().state;
        let names: Vec<_> = back.history().iter().map(|r| (r.tool(), r.spelling())).collect();
        assert_eq!(names, [("exec", "Bash"), ("exec", "exec")]);
        assert!(back.history()[0].same_tool(&back.history()[1]));
        let plain = String::from_utf8(record(&RunState::new(4))).unwrap();
        assert!(!plain.contains("spellings"), "{plain}");
        let wrong = text.replace(r#""spellings":["Bash",null]"#, r#""spellings":["Read",null]"#);
        let err = decode(wrong.as_bytes(), 16).err().unwrap();
        assert!(err.contains("spellings[0] is not a spelling of \"exec\""), "{err}");
    }

    #[test]
    fn batches_round_trip_and_are_optional() {
        use crate::engine::batches::{Batch, FirstCritical};
        let mut state = RunState::new(4);
        for (i, flags) in [0u8, 2, 5].into_iter().enumerate() {
            let mut r = Record::new(i as u64, "read", [i as u8; 32], [0; 32], 1, None, None);
            r.flags = flags;
            state.append(r);
        }
        state.batch = Some(Box::new(Batch {
            number: 3,
            size: 2,
            outcomes_seen: true,
            critical: Some(Box::new(FirstCritical { batch: 2, detector: Detector::GenericRepeat, tool: "read".into() })),
            ..Default::default()
        }));
        let record = |state: &RunState| encode(&RunRecord {
            tenant: "", run_id: "r", agent_id: "", session_id: "", last_seen: 0.0, events_evaluated: 3, state, retries: None, tree: None,
        });
        let back = decode(&record(&state), 16).ok().unwrap().state;
        assert_eq!(back.history().iter().map(|r| r.flags).collect::<Vec<_>>(), [0, 2, 5]);
        let batch = back.batch.unwrap();
        assert_eq!((batch.number, batch.size, batch.outcomes_seen), (3, 2, true));
        let critical = batch.critical.unwrap();
        assert_eq!((critical.batch, critical.detector, critical.tool.as_str()), (2, Detector::GenericRepeat, "read"));
        let plain = record(&RunState::new(4));
        let text = String::from_utf8(plain.clone()).unwrap();
        assert!(!text.contains("flags") && !text.contains("batch"), "{text}");
        assert!(decode(&plain, 16).ok().unwrap().state.batch.is_none());
    }

    /// A run's tree link (parent, root, depth, children, totals, notices, warned budgets)
    /// survives a store; a record without one (absent key) reads as a plain run.
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
        let record = |tree| encode(&RunRecord {
            tenant: "", run_id: "r", agent_id: "", session_id: "", last_seen: 0.0, events_evaluated: 3, state: &state, retries: None, tree,
        });
        let back = decode(&record(Some((&link, 1234.5))), 16).ok().unwrap().tree.unwrap();
        assert_eq!((back.parent.as_str(), back.root.as_str(), back.depth), ("p", "root", 2));
        assert_eq!((back.children.clone(), back.children_created), (vec!["c1".to_string(), "c2".to_string()], 3));
        assert_eq!(back.totals, link.totals);
        assert_eq!(back.tree.as_deref(), link.tree.as_deref());
        assert_eq!((back.notices.clone(), back.warned, back.started), (link.notices.clone(), 0b101, 1234.5));
        assert_eq!(back.extensions, [0, 2, 0, 0, 1, 0]);
        let plain_link = TreeLink { extensions: [0; 6], ..link.clone() };
        let unextended = encode(&RunRecord {
            tenant: "", run_id: "r", agent_id: "", session_id: "", last_seen: 0.0, events_evaluated: 3, state: &state, retries: None,
            tree: Some((&plain_link, 1.0)),
        });
        assert!(!String::from_utf8_lossy(&unextended).contains("extensions"), "written only when a person extended one");
        assert_eq!(decode(&unextended, 16).ok().unwrap().tree.unwrap().extensions, [0; 6]);
        let plain = record(None);
        assert!(!String::from_utf8_lossy(&plain).contains("tree"));
        assert!(decode(&plain, 16).ok().unwrap().tree.is_none());
    }
}
