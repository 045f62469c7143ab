//! A request's events read in place: `EventRef` borrows every string from the request bytes, so
//! the per-event path copies none of params, results or ids out (prost's decode did, ~12% of the
//! core's time on grpc_bench's traffic). The owned `pb::Event` (hooks, a lazily loaded request
//! set aside, tests) is seen through the same type.
//!
//! `decode_in_place` reads the plain form every client writes: the known fields with their own
//! wire types, each event kind at most once. Anything else (unknown fields, a kind repeated, bad
//! UTF-8, a truncated field) is left to prost: it answers None and the caller decodes with prost
//! as before, so whatever it does accept, it reads as prost does (the tests below hold it to
//! that on random and mutated requests).

use crate::pb;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OutcomeRef<'a> {
    ResultJson(&'a str),
    Error(&'a str),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KindRef<'a> {
    /// `tool_class`: ToolCall.tool_class's wire value (0: unspecified).
    ToolCall { tool_name: &'a str, tool_call_id: &'a str, params_json: &'a str, tool_class: i32 },
    /// `duration_ms`: ToolOutcome.duration_ms (0: not reported).
    ToolOutcome { tool_name: &'a str, tool_call_id: &'a str, params_json: &'a str, outcome: Option<OutcomeRef<'a>>, duration_ms: u64 },
    CompactionRetry,
    RunEnd,
    /// `prompt_id`: UserTurn.prompt_id ("" for none).
    UserTurn { prompt_id: &'a str },
    Usage { input_tokens: u64, output_tokens: u64, cost_usd: f64, model: &'a str },
    /// `scope`: Approval.scope's wire value (0: unspecified, taken as once).
    Approval { tool_call_id: &'a str, decision_id: &'a str, approved: bool, scope: i32, ttl_seconds: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct EventRef<'a> {
    pub run_id: &'a str,
    pub agent_id: &'a str,
    pub session_id: &'a str,
    pub seq: u64,
    pub kind: Option<KindRef<'a>>,
    /// A tool call's ToolCall.batch_id ("" for none and for other kinds).
    pub batch_id: &'a str,
    /// Event.parent_run_id ("" for none).
    pub parent_run_id: &'a str,
    pub accepts_ask: bool,
}

impl<'a> From<&'a pb::Event> for EventRef<'a> {
    fn from(e: &'a pb::Event) -> EventRef<'a> {
        let batch_id = match &e.kind {
            Some(pb::event::Kind::ToolCall(c)) => c.batch_id.as_str(),
            _ => "",
        };
        EventRef {
            run_id: &e.run_id, agent_id: &e.agent_id, session_id: &e.session_id, seq: e.seq, kind: kind_ref(&e.kind), batch_id,
            parent_run_id: &e.parent_run_id, accepts_ask: e.accepts_ask,
        }
    }
}

/// The event kind's name as the contract spells it (metrics labels, logs, span events).
pub fn kind_name(kind: &Option<KindRef>) -> &'static str {
    match kind {
        Some(KindRef::ToolCall { .. }) => "tool_call",
        Some(KindRef::ToolOutcome { .. }) => "tool_outcome",
        Some(KindRef::CompactionRetry) => "compaction_retry",
        Some(KindRef::RunEnd) => "run_end",
        Some(KindRef::UserTurn { .. }) => "user_turn",
        Some(KindRef::Usage { .. }) => "usage",
        Some(KindRef::Approval { .. }) => "approval",
        None => "unknown",
    }
}

impl<'a> EventRef<'a> {
    /// The tool call the event is about, as the caller named it ("" for kinds without one).
    pub fn tool_call_id(&self) -> &'a str {
        match self.kind {
            Some(KindRef::ToolCall { tool_call_id, .. })
            | Some(KindRef::ToolOutcome { tool_call_id, .. })
            | Some(KindRef::Approval { tool_call_id, .. }) => tool_call_id,
            _ => "",
        }
    }
}

pub fn kind_ref(kind: &Option<pb::event::Kind>) -> Option<KindRef<'_>> {
    use pb::event::Kind;
    Some(match kind.as_ref()? {
        Kind::ToolCall(c) => KindRef::ToolCall {
            tool_name: &c.tool_name,
            tool_call_id: &c.tool_call_id,
            params_json: &c.params_json,
            tool_class: c.tool_class,
        },
        Kind::ToolOutcome(o) => KindRef::ToolOutcome {
            tool_name: &o.tool_name,
            tool_call_id: &o.tool_call_id,
            params_json: &o.params_json,
            outcome: o.outcome.as_ref().map(|outcome| match outcome {
                pb::tool_outcome::Outcome::ResultJson(r) => OutcomeRef::ResultJson(r),
                pb::tool_outcome::Outcome::Error(e) => OutcomeRef::Error(e),
            }),
            duration_ms: o.duration_ms,
        },
        Kind::CompactionRetry(_) => KindRef::CompactionRetry,
        Kind::RunEnd(_) => KindRef::RunEnd,
        Kind::UserTurn(u) => KindRef::UserTurn { prompt_id: &u.prompt_id },
        Kind::Usage(u) => KindRef::Usage { input_tokens: u.input_tokens, output_tokens: u.output_tokens, cost_usd: u.cost_usd, model: &u.model },
        Kind::Approval(a) => KindRef::Approval {
            tool_call_id: &a.tool_call_id,
            decision_id: &a.decision_id,
            approved: a.approved,
            scope: a.scope,
            ttl_seconds: a.ttl_seconds,
        },
    })
}

/// A request's events, decoded with prost or read in place; `refs` sees either.
pub enum Events<'d> {
    InPlace(Vec<EventRef<'d>>),
    Owned(Vec<pb::Event>),
}

impl Events<'_> {
    pub fn refs(&self) -> Vec<EventRef<'_>> {
        match self {
            Events::InPlace(events) => events.clone(),
            Events::Owned(events) => events.iter().map(EventRef::from).collect(),
        }
    }
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
    /// A varint as prost reads one (at most 10 bytes, the last one 0 or 1).
    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for i in 0..10 {
            let byte = *self.data.get(self.pos)?;
            self.pos += 1;
            if i == 9 && byte > 1 {
                return None;
            }
            value |= ((byte & 0x7F) as u64) << (7 * i);
            if byte < 0x80 {
                return Some(value);
            }
        }
        None
    }
    /// (field number, wire type) of the next key; field 0 and numbers past u32 are left to prost.
    fn key(&mut self) -> Option<(u64, u64)> {
        let key = self.varint()?;
        let field = key >> 3;
        if field == 0 || field > u32::MAX as u64 >> 3 {
            return None;
        }
        Some((field, key & 7))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = self.varint()? as usize;
        let end = self.pos.checked_add(len)?;
        let bytes = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(bytes)
    }
    fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }
    fn fixed64(&mut self) -> Option<u64> {
        let bytes = self.data.get(self.pos..self.pos.checked_add(8)?)?;
        self.pos += 8;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }
}

type ToolFields<'a> = (&'a str, &'a str, &'a str, Option<OutcomeRef<'a>>, i32, &'a str, u64);

/// ToolCall or ToolOutcome fields 1-3 (4-6 for an outcome, the class 5 and the batch id 6 for a
/// call); None for anything else.
fn tool_message(data: &[u8], outcome_fields: bool) -> Option<ToolFields<'_>> {
    let (mut tool_name, mut tool_call_id, mut params_json, mut outcome, mut class, mut batch_id) = ("", "", "", None, 0, "");
    let mut duration_ms = 0;
    let mut r = Reader { data, pos: 0 };
    while !r.done() {
        match r.key()? {
            (1, 2) => tool_name = r.str()?,
            (2, 2) => tool_call_id = r.str()?,
            (3, 2) => params_json = r.str()?,
            (4, 2) if outcome_fields => outcome = Some(OutcomeRef::ResultJson(r.str()?)),
            (5, 2) if outcome_fields => outcome = Some(OutcomeRef::Error(r.str()?)),
            (5, 0) if !outcome_fields => class = r.varint()? as i32, // as prost reads an enum
            (6, 2) if !outcome_fields => batch_id = r.str()?,
            (6, 0) if outcome_fields => duration_ms = r.varint()?,
            _ => return None,
        }
    }
    Some((tool_name, tool_call_id, params_json, outcome, class, batch_id, duration_ms))
}

/// Usage's fields; None for anything else.
fn usage_message(data: &[u8]) -> Option<KindRef<'_>> {
    let (mut input_tokens, mut output_tokens, mut cost_usd, mut model) = (0, 0, 0.0, "");
    let mut r = Reader { data, pos: 0 };
    while !r.done() {
        match r.key()? {
            (1, 0) => input_tokens = r.varint()?,
            (2, 0) => output_tokens = r.varint()?,
            (3, 1) => cost_usd = f64::from_bits(r.fixed64()?),
            (4, 2) => model = r.str()?,
            _ => return None,
        }
    }
    Some(KindRef::Usage { input_tokens, output_tokens, cost_usd, model })
}

/// Approval's fields; None for anything else.
fn approval_message(data: &[u8]) -> Option<KindRef<'_>> {
    let (mut tool_call_id, mut decision_id, mut approved, mut scope, mut ttl_seconds) = ("", "", false, 0, 0);
    let mut r = Reader { data, pos: 0 };
    while !r.done() {
        match r.key()? {
            (1, 2) => tool_call_id = r.str()?,
            (2, 2) => decision_id = r.str()?,
            (3, 0) => approved = r.varint()? != 0,
            (4, 0) => scope = r.varint()? as i32, // as prost reads an enum
            (5, 0) => ttl_seconds = r.varint()? as u32, // as prost reads a uint32
            _ => return None,
        }
    }
    Some(KindRef::Approval { tool_call_id, decision_id, approved, scope, ttl_seconds })
}

/// UserTurn's prompt_id (field 1); None for anything else.
fn user_turn_message(data: &[u8]) -> Option<&str> {
    let mut prompt_id = "";
    let mut r = Reader { data, pos: 0 };
    while !r.done() {
        match r.key()? {
            (1, 2) => prompt_id = r.str()?,
            _ => return None,
        }
    }
    Some(prompt_id)
}

fn event(data: &[u8]) -> Option<EventRef<'_>> {
    let mut e = EventRef::default();
    let mut r = Reader { data, pos: 0 };
    while !r.done() {
        let (field, wire) = r.key()?;
        match (field, wire) {
            (1, 2) => e.run_id = r.str()?,
            (2, 2) => e.agent_id = r.str()?,
            (3, 2) => e.session_id = r.str()?,
            (4, 0) => e.seq = r.varint()?,
            (5, 2) => e.parent_run_id = r.str()?,
            (6, 0) => e.accepts_ask = r.varint()? != 0,
            (10..=16, 2) => {
                if e.kind.is_some() {
                    return None; // prost merges a repeated kind: its case
                }
                let body = r.bytes()?;
                e.kind = Some(match field {
                    10 => {
                        let (tool_name, tool_call_id, params_json, _, tool_class, batch_id, _) = tool_message(body, false)?;
                        e.batch_id = batch_id;
                        KindRef::ToolCall { tool_name, tool_call_id, params_json, tool_class }
                    }
                    11 => {
                        let (tool_name, tool_call_id, params_json, outcome, _, _, duration_ms) = tool_message(body, true)?;
                        KindRef::ToolOutcome { tool_name, tool_call_id, params_json, outcome, duration_ms }
                    }
                    14 => KindRef::UserTurn { prompt_id: user_turn_message(body)? },
                    15 => usage_message(body)?,
                    16 => approval_message(body)?,
                    _ if !body.is_empty() => return None,
                    12 => KindRef::CompactionRetry,
                    _ => KindRef::RunEnd,
                });
            }
            _ => return None,
        }
    }
    Some(e)
}

/// An EvaluateRequest's events read in place, or None: leave this request to prost.
pub fn decode_in_place(data: &[u8]) -> Option<Vec<EventRef<'_>>> {
    let mut events = Vec::new();
    let mut r = Reader { data, pos: 0 };
    while !r.done() {
        if r.key()? != (1, 2) {
            return None;
        }
        events.push(event(r.bytes()?)?);
    }
    Some(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn text(&mut self) -> String {
            let pieces = ["", "a", "run-1", "é", "{\"k\": [1, 2]}", "\u{1F600}", " ", "x\ny"];
            (0..self.below(4)).map(|_| pieces[self.below(pieces.len() as u64) as usize]).collect()
        }
    }

    fn random_event(rng: &mut Rng) -> pb::Event {
        use pb::event::Kind;
        let kind = match rng.below(8) {
            6 => Some(Kind::Usage(pb::Usage {
                input_tokens: rng.next() % 100_000,
                output_tokens: [0, 1, u64::MAX][rng.below(3) as usize],
                cost_usd: [0.0, 0.25, 1e-9, f64::MAX][rng.below(4) as usize],
                model: rng.text(),
            })),
            7 => Some(Kind::Approval(pb::Approval {
                tool_call_id: rng.text(),
                decision_id: rng.text(),
                approved: rng.below(2) == 0,
                scope: rng.below(4) as i32,
                ttl_seconds: [0, 60, u32::MAX][rng.below(3) as usize],
            })),
            0 => None,
            1 | 2 => Some(Kind::ToolCall(pb::ToolCall { tool_name: rng.text(), tool_call_id: rng.text(), params_json: rng.text(), tool_class: rng.below(5) as i32, batch_id: rng.text() })),
            3 | 4 => Some(Kind::ToolOutcome(pb::ToolOutcome {
                tool_name: rng.text(),
                tool_call_id: rng.text(),
                params_json: rng.text(),
                outcome: match rng.below(3) {
                    0 => None,
                    1 => Some(pb::tool_outcome::Outcome::ResultJson(rng.text())),
                    _ => Some(pb::tool_outcome::Outcome::Error(rng.text())),
                },
                duration_ms: [0, 1, 1500, u64::MAX][rng.below(4) as usize],
            })),
            _ if rng.below(2) == 0 => Some(Kind::CompactionRetry(pb::CompactionRetry {})),
            _ if rng.below(2) == 0 => Some(Kind::RunEnd(pb::RunEnd {})),
            _ => Some(Kind::UserTurn(pb::UserTurn { prompt_id: if rng.below(2) == 0 { String::new() } else { "p-1".into() } })),
        };
        let seq = [0, 1, 127, 128, u64::MAX, rng.next()][rng.below(6) as usize];
        let parent_run_id = if rng.below(3) == 0 { rng.text() } else { String::new() };
        pb::Event { run_id: rng.text(), agent_id: rng.text(), session_id: rng.text(), seq, kind, parent_run_id, accepts_ask: rng.below(2) == 0 }
    }

    /// Whenever the in-place reader accepts bytes, prost accepts them too and reads the same.
    fn agrees(data: &[u8]) -> bool {
        let Some(fast) = decode_in_place(data) else { return false };
        let decoded = pb::EvaluateRequest::decode(data).expect("prost accepts what the in-place reader does");
        let slow: Vec<EventRef> = decoded.events.iter().map(EventRef::from).collect();
        assert_eq!(fast, slow, "{data:?}");
        true
    }

    #[test]
    fn reads_what_prost_writes() {
        let mut rng = Rng(0x9E3779B97F4A7C15);
        for _ in 0..2000 {
            let events = (0..rng.below(5)).map(|_| random_event(&mut rng)).collect();
            let data = pb::EvaluateRequest { events }.encode_to_vec();
            assert!(agrees(&data), "prost's own encoding is the plain form");
        }
    }

    #[test]
    fn mutated_requests_are_read_as_prost_reads_them_or_left_to_it() {
        let mut rng = Rng(12345);
        let (mut accepted, mut left) = (0, 0);
        for _ in 0..20000 {
            let events = (0..1 + rng.below(3)).map(|_| random_event(&mut rng)).collect();
            let mut data = pb::EvaluateRequest { events }.encode_to_vec();
            for _ in 0..1 + rng.below(3) {
                match rng.below(3) {
                    0 if !data.is_empty() => {
                        let at = rng.below(data.len() as u64) as usize;
                        data[at] = rng.next() as u8;
                    }
                    1 if !data.is_empty() => data.truncate(rng.below(data.len() as u64) as usize),
                    _ => {
                        let at = rng.below(data.len() as u64 + 1) as usize;
                        data.insert(at, rng.next() as u8);
                    }
                }
            }
            if agrees(&data) { accepted += 1 } else { left += 1 }
        }
        assert!(accepted > 100 && left > 100, "both sides exercised: {accepted} read, {left} left to prost");
    }

    #[test]
    fn unusual_forms_are_left_to_prost() {
        let call = |name: &str| pb::Event {
            run_id: "r".into(),
            kind: Some(pb::event::Kind::ToolCall(pb::ToolCall { tool_name: name.into(), ..Default::default() })),
            ..Default::default()
        };
        let mut data = pb::EvaluateRequest { events: vec![call("a")] }.encode_to_vec();
        // An unknown field at the top, the same kind twice (prost merges), invalid UTF-8.
        let unknown = [data.clone(), vec![0x10, 0x01]].concat();
        assert_eq!(decode_in_place(&unknown), None);
        let mut twice = call("a").encode_to_vec();
        twice.extend(call("b").encode_to_vec()[3..].iter()); // the second event's kind field only
        let twice = [vec![0x0A, twice.len() as u8], twice].concat();
        assert_eq!(decode_in_place(&twice), None);
        assert_eq!(pb::EvaluateRequest::decode(twice.as_slice()).unwrap().events.len(), 1);
        let at = data.len() - 1;
        data[at] = 0xFF;
        assert_eq!(decode_in_place(&data), None);
        assert!(pb::EvaluateRequest::decode(data.as_slice()).is_err());
    }
}
