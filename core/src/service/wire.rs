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

// The shapes (EventRef, KindRef, OutcomeRef) and each message's reader, generated from the proto.
mod event_gen;
use event_gen::event;
pub use event_gen::{kind_name, kind_ref, EventRef, KindRef, OutcomeRef, UsageRef};

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

    /// A tool call's ToolCall.batch_id ("" for none and for other kinds).
    pub fn batch_id(&self) -> &'a str {
        match self.kind {
            Some(KindRef::ToolCall { batch_id, .. }) => batch_id,
            _ => "",
        }
    }
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
    }

    fn random_event(rng: &mut Rng) -> pb::Event {
        event_gen::random_event(&mut || rng.next())
    }

    /// Whenever the in-place reader accepts bytes, prost accepts them too and reads the same.
    fn agrees(data: &[u8]) -> bool {
        let Some(fast) = decode_in_place(data) else { return false };
        let decoded = pb::EvaluateRequest::decode(data).expect("prost accepts what the in-place reader does");
        let slow: Vec<EventRef> = decoded.events.iter().map(EventRef::from).collect();
        // Compared as printed: a mutated byte can make a cost NaN, which reads the same on both
        // sides but is never == itself.
        assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{data:?}");
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
