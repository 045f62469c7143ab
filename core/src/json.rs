//! JSON as the Python engine reads it, and the canonical text every hash is taken over.
//!
//! The reference is tests/reference/engine/jsonvalues.py: the stdlib decoder (strict, NaN/Infinity refused,
//! integral floats below 1e21 folded to integers, integers over 4,300 digits refused), then
//! orjson with sorted keys, or the stdlib encoder when orjson refuses the value (an integer
//! outside [-2^63, 2^64) or a lone surrogate anywhere). The two encoders spell small floats
//! differently (`1e-7` vs `1e-07`, `0.00001` vs `1e-05`), so which one applies is decided per
//! hashed value, exactly as Python decides it.
//!
//! Strings are kept as WTF-8 bytes: valid UTF-8, except that a lone surrogate from a `\uD800`
//! escape is its 3-byte generalised encoding, which is what Python's `surrogatepass` writes.
//! Objects are kept sorted by key with duplicates resolved to the last value (Python's dict),
//! so lookups are binary searches and canonical output is a straight walk. A string or key
//! without escapes borrows its bytes from the text (`Cow::Borrowed`): most of a payload is such
//! strings, and copying each one out was most of the parser's allocations.

use std::borrow::Cow;

use sha2::{Digest, Sha256};

pub const MAX_INTEGER_DIGITS: usize = 4300;
/// Where Python's C scanner would hit its recursion limit (a RecursionError, reported without
/// the word "levels"); any depth past the configured limit is refused anyway.
const RECURSION_LIMIT: usize = 990;

#[derive(Clone, Debug, PartialEq)]
pub enum Int {
    Small(i128),
    /// Canonical decimal text of an integer beyond i128.
    Big(String),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    Int(Int),
    Float(f64),
    Str(Cow<'a, [u8]>),
    Array(Vec<Value<'a>>),
    Object(Vec<(Cow<'a, [u8]>, Value<'a>)>),
}

impl<'a> Value<'a> {
    pub fn get(&self, key: &str) -> Option<&Value<'a>> {
        match self {
            Value::Object(entries) => entries
                .binary_search_by(|(k, _)| k.as_ref().cmp(key.as_bytes()))
                .ok()
                .map(|i| &entries[i].1),
            _ => None,
        }
    }
    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
    pub fn as_str(&self) -> Option<&[u8]> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn is_str(&self, text: &str) -> bool {
        matches!(self, Value::Str(s) if s.as_ref() == text.as_bytes())
    }
    pub fn is_object(&self) -> bool {
        matches!(self, Value::Object(_))
    }
    pub fn str_value(s: &'a str) -> Value<'a> {
        Value::Str(Cow::Borrowed(s.as_bytes()))
    }
    /// A string value of its own bytes.
    pub fn owned_str(s: Vec<u8>) -> Value<'a> {
        Value::Str(Cow::Owned(s))
    }
    /// An object from entries in any order (later duplicates win).
    pub fn object(mut entries: Vec<(Cow<'a, [u8]>, Value<'a>)>) -> Value<'a> {
        sort_dedupe(&mut entries);
        Value::Object(entries)
    }
}

fn sort_dedupe(entries: &mut Vec<(Cow<'_, [u8]>, Value<'_>)>) {
    if entries.windows(2).all(|w| w[0].0 < w[1].0) {
        return;
    }
    // Stable: among equal keys the last one parsed is last, and it is the one Python keeps.
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<(Cow<'_, [u8]>, Value<'_>)> = Vec::with_capacity(entries.len());
    for entry in entries.drain(..) {
        if let Some(last) = out.last_mut() {
            if last.0 == entry.0 {
                *last = entry;
                continue;
            }
        }
        out.push(entry);
    }
    *entries = out;
}

#[derive(Debug, Clone, PartialEq)]
pub enum JsonError {
    /// Not valid JSON: the message as Python words it (without the field name).
    Invalid(String),
    /// Nested deeper than the limit; the message without the field name.
    TooDeep(String),
}

struct Parser<'a> {
    text: &'a str,
    s: &'a [u8],
    max_depth_seen: usize,
}

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

impl<'a> Parser<'a> {
    fn error_at(&self, msg: &str, pos: usize) -> JsonError {
        // Python counts in code points.
        let prefix = &self.text[..pos.min(self.text.len())];
        let char_pos = prefix.chars().count();
        let line = prefix.matches('\n').count() + 1;
        let col = match prefix.rfind('\n') {
            Some(nl) => char_pos - prefix[..nl].chars().count(),
            None => char_pos + 1,
        };
        JsonError::Invalid(format!("{msg} at line {line} column {col}"))
    }

    fn skip_ws(&self, mut i: usize) -> usize {
        while i < self.s.len() && is_ws(self.s[i]) {
            i += 1;
        }
        i
    }

    /// One value at `i` (no leading whitespace). Err(None) = "Expecting value" at `i`.
    fn value(&mut self, i: usize, depth: usize) -> Result<(Value<'a>, usize), JsonError> {
        let s = self.s;
        if i >= s.len() {
            return Err(self.error_at("Expecting value", i));
        }
        match s[i] {
            b'"' => {
                let (text, end) = self.string(i + 1)?;
                Ok((Value::Str(text), end))
            }
            b'{' => self.object(i + 1, depth + 1),
            b'[' => self.array(i + 1, depth + 1),
            b'n' if s[i..].starts_with(b"null") => Ok((Value::Null, i + 4)),
            b't' if s[i..].starts_with(b"true") => Ok((Value::Bool(true), i + 4)),
            b'f' if s[i..].starts_with(b"false") => Ok((Value::Bool(false), i + 5)),
            b'N' if s[i..].starts_with(b"NaN") => Err(JsonError::Invalid("NaN is not valid JSON".into())),
            b'I' if s[i..].starts_with(b"Infinity") => Err(JsonError::Invalid("Infinity is not valid JSON".into())),
            b'-' if s[i..].starts_with(b"-Infinity") => Err(JsonError::Invalid("-Infinity is not valid JSON".into())),
            _ => self.number(i),
        }
    }

    fn number(&mut self, start: usize) -> Result<(Value<'a>, usize), JsonError> {
        let s = self.s;
        let n = s.len();
        let mut i = start;
        if s[i] == b'-' {
            i += 1;
            if i >= n {
                return Err(self.error_at("Expecting value", start));
            }
        }
        if (b'1'..=b'9').contains(&s[i]) {
            i += 1;
            while i < n && s[i].is_ascii_digit() {
                i += 1;
            }
        } else if s[i] == b'0' {
            i += 1;
        } else {
            return Err(self.error_at("Expecting value", start));
        }
        let mut is_float = false;
        if i + 1 < n && s[i] == b'.' && s[i + 1].is_ascii_digit() {
            is_float = true;
            i += 2;
            while i < n && s[i].is_ascii_digit() {
                i += 1;
            }
        }
        if i + 1 < n && (s[i] == b'e' || s[i] == b'E') {
            let e_start = i;
            i += 1;
            if i + 1 < n && (s[i] == b'-' || s[i] == b'+') {
                i += 1;
            }
            while i < n && s[i].is_ascii_digit() {
                i += 1;
            }
            if s[i - 1].is_ascii_digit() {
                is_float = true;
            } else {
                i = e_start;
            }
        }
        let literal = &self.text[start..i];
        if is_float {
            let value: f64 = literal.parse().unwrap_or(f64::NAN);
            if !value.is_finite() {
                return Err(JsonError::Invalid(format!("number {literal} is out of range")));
            }
            return Ok((fold_float(value), i));
        }
        let negative = literal.starts_with('-');
        let digits = if negative { &literal[1..] } else { literal };
        if digits.len() > MAX_INTEGER_DIGITS {
            return Err(JsonError::Invalid(format!("an integer has more than {MAX_INTEGER_DIGITS} digits")));
        }
        Ok((int_from_digits(negative, digits), i))
    }

    fn string(&mut self, begin: usize) -> Result<(Cow<'a, [u8]>, usize), JsonError> {
        let s = self.s;
        let n = s.len();
        let quote = begin - 1;
        // No escape before the closing quote: the string is a slice of the text.
        let first = begin + find_special(&s[begin..]);
        if first < n && s[first] == b'"' {
            return Ok((Cow::Borrowed(&s[begin..first]), first + 1));
        }
        let mut out: Vec<u8> = Vec::new();
        let mut end = begin;
        loop {
            let mut next = end + find_special(&s[end..]);
            if next < n && s[next] <= 0x1f {
                return Err(self.error_at("Invalid control character at", next));
            }
            if next >= n {
                return Err(self.error_at("Unterminated string starting at", quote));
            }
            out.extend_from_slice(&s[end..next]);
            let c = s[next];
            next += 1;
            if c == b'"' {
                return Ok((Cow::Owned(out), next));
            }
            if next == n {
                return Err(self.error_at("Unterminated string starting at", quote));
            }
            let e = s[next];
            if e != b'u' {
                end = next + 1;
                let decoded = match e {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 8,
                    b'f' => 12,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    _ => return Err(self.error_at("Invalid \\escape", end - 2)),
                };
                out.push(decoded);
                continue;
            }
            next += 1;
            end = next + 4;
            // Python compares code points, we compare bytes: the same for the ASCII it accepts.
            if end >= n {
                return Err(self.error_at("Invalid \\uXXXX escape", next - 1));
            }
            let mut code = match hex4(&s[next..end]) {
                Some(v) => v,
                None => return Err(self.error_at("Invalid \\uXXXX escape", end - 5)),
            };
            if (0xD800..0xDC00).contains(&code) && end + 6 < n && s[end] == b'\\' && s[end + 1] == b'u' {
                let second_end = end + 6;
                let low = match hex4(&s[end + 2..second_end]) {
                    Some(v) => v,
                    None => return Err(self.error_at("Invalid \\uXXXX escape", second_end - 5)),
                };
                if (0xDC00..0xE000).contains(&low) {
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                    end = second_end;
                }
            }
            push_wtf8(&mut out, code);
        }
    }

    fn array(&mut self, start: usize, depth: usize) -> Result<(Value<'a>, usize), JsonError> {
        self.enter(depth)?;
        let mut items = Vec::new();
        let mut i = self.skip_ws(start);
        if i < self.s.len() && self.s[i] == b']' {
            return Ok((Value::Array(items), i + 1));
        }
        loop {
            let (value, next) = self.value(i, depth)?;
            items.push(value);
            i = self.skip_ws(next);
            if i < self.s.len() && self.s[i] == b']' {
                return Ok((Value::Array(items), i + 1));
            }
            if i >= self.s.len() || self.s[i] != b',' {
                return Err(self.error_at("Expecting ',' delimiter", i));
            }
            i = self.skip_ws(i + 1);
        }
    }

    fn object(&mut self, start: usize, depth: usize) -> Result<(Value<'a>, usize), JsonError> {
        self.enter(depth)?;
        let mut entries = Vec::new();
        let mut i = self.skip_ws(start);
        if i < self.s.len() && self.s[i] == b'}' {
            return Ok((Value::Object(entries), i + 1));
        }
        loop {
            if i >= self.s.len() || self.s[i] != b'"' {
                return Err(self.error_at("Expecting property name enclosed in double quotes", i));
            }
            let (key, next) = self.string(i + 1)?;
            i = self.skip_ws(next);
            if i >= self.s.len() || self.s[i] != b':' {
                return Err(self.error_at("Expecting ':' delimiter", i));
            }
            i = self.skip_ws(i + 1);
            let (value, next) = self.value(i, depth)?;
            entries.push((key, value));
            i = self.skip_ws(next);
            if i < self.s.len() && self.s[i] == b'}' {
                sort_dedupe(&mut entries);
                return Ok((Value::Object(entries), i + 1));
            }
            if i >= self.s.len() || self.s[i] != b',' {
                return Err(self.error_at("Expecting ',' delimiter", i));
            }
            i = self.skip_ws(i + 1);
        }
    }

    fn enter(&mut self, depth: usize) -> Result<(), JsonError> {
        if depth > self.max_depth_seen {
            self.max_depth_seen = depth;
        }
        if depth > RECURSION_LIMIT {
            return Err(JsonError::TooDeep(String::new()));
        }
        Ok(())
    }
}

/// Index of the first `"`, `\\` or control character (< 0x20), or the length: eight bytes at a
/// time (the classic has-zero-byte trick), since strings are most of every payload.
fn find_special(s: &[u8]) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(LO) & !x & HI;
    let mut i = 0;
    while i + 8 <= s.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&s[i..i + 8]);
        let w = u64::from_le_bytes(word);
        let control = w.wrapping_sub(LO * 0x20) & !w & HI;
        if zero(w ^ (LO * b'"' as u64)) | zero(w ^ (LO * b'\\' as u64)) | control != 0 {
            break;
        }
        i += 8;
    }
    while i < s.len() && !(s[i] == b'"' || s[i] == b'\\' || s[i] < 0x20) {
        i += 1;
    }
    i
}

fn hex4(b: &[u8]) -> Option<u32> {
    let mut v = 0u32;
    for &c in b {
        v = (v << 4) | (c as char).to_digit(16)?;
    }
    Some(v)
}

fn push_wtf8(out: &mut Vec<u8>, code: u32) {
    if code < 0x80 {
        out.push(code as u8);
    } else if code < 0x800 {
        out.push(0xC0 | (code >> 6) as u8);
        out.push(0x80 | (code & 0x3F) as u8);
    } else if code < 0x10000 {
        out.push(0xE0 | (code >> 12) as u8);
        out.push(0x80 | ((code >> 6) & 0x3F) as u8);
        out.push(0x80 | (code & 0x3F) as u8);
    } else {
        out.push(0xF0 | (code >> 18) as u8);
        out.push(0x80 | ((code >> 12) & 0x3F) as u8);
        out.push(0x80 | ((code >> 6) & 0x3F) as u8);
        out.push(0x80 | (code & 0x3F) as u8);
    }
}

fn int_from_digits(negative: bool, digits: &str) -> Value<'static> {
    if digits.len() <= 38 {
        let magnitude: i128 = digits.parse().unwrap_or(0);
        return Value::Int(Int::Small(if negative { -magnitude } else { magnitude }));
    }
    let trimmed = digits.trim_start_matches('0');
    let text = if trimmed.is_empty() {
        "0".to_string()
    } else if negative {
        format!("-{trimmed}")
    } else {
        trimmed.to_string()
    };
    Value::Int(Int::Big(text))
}

/// Python's `_parse_float`: an integral value below 1e21 is the integer it equals.
fn fold_float(value: f64) -> Value<'static> {
    if value.fract() == 0.0 && value.abs() < 1e21 {
        return Value::Int(Int::Small(value as i128));
    }
    Value::Float(value)
}

/// Parse one JSON document the way the Python engine does, refusing nesting past `max_depth`.
pub fn decode(text: &str, max_depth: usize) -> Result<Value<'_>, JsonError> {
    let mut parser = Parser { text, s: text.as_bytes(), max_depth_seen: 0 };
    let start = parser.skip_ws(0);
    let (value, end) = match parser.value(start, 0) {
        Ok(v) => v,
        Err(JsonError::TooDeep(_)) => {
            return Err(JsonError::TooDeep(format!("nesting is deeper than {max_depth}")));
        }
        Err(e) => return Err(e),
    };
    let end = parser.skip_ws(end);
    if end != text.len() {
        return Err(parser.error_at("Extra data", end));
    }
    if parser.max_depth_seen > max_depth {
        return Err(JsonError::TooDeep(format!("nesting is deeper than {max_depth} levels")));
    }
    Ok(value)
}

// ---------------------------------------------------------------------------------------------
// Canonical encoding

/// Would orjson refuse this value (so that Python's stdlib encoder spells it)?
fn needs_stdlib(value: &Value) -> bool {
    match value {
        Value::Int(Int::Small(v)) => *v < i64::MIN as i128 || *v > u64::MAX as i128,
        Value::Int(Int::Big(_)) => true,
        Value::Str(s) => has_surrogate(s),
        Value::Array(items) => items.iter().any(needs_stdlib),
        Value::Object(entries) => entries.iter().any(|(k, v)| has_surrogate(k) || needs_stdlib(v)),
        _ => false,
    }
}

fn has_surrogate(s: &[u8]) -> bool {
    // A surrogate's WTF-8 form is ED A0..BF xx; valid UTF-8 never has ED followed by >= A0.
    if s.is_ascii() {
        return false;
    }
    let mut rest = s;
    while let Some(at) = rest.iter().position(|&b| b == 0xED) {
        if rest.get(at + 1).is_some_and(|&b| b >= 0xA0) {
            return true;
        }
        rest = &rest[at + 1..];
    }
    false
}

pub fn canonical(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    let stdlib = needs_stdlib(value);
    write(&mut out, value, stdlib);
    out
}

pub fn digest(value: &Value) -> [u8; 32] {
    with_buffer(|out| {
        let stdlib = needs_stdlib(value);
        write(out, value, stdlib);
    })
}

/// sha256 of what `fill` writes, in one reused buffer per thread: most of a payload's cost would
/// otherwise be its growth.
fn with_buffer(fill: impl FnOnce(&mut Vec<u8>)) -> [u8; 32] {
    thread_local! {
        static BUFFER: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(4096));
    }
    BUFFER.with(|buffer| {
        let mut out = buffer.borrow_mut();
        out.clear();
        fill(&mut out);
        let digest: [u8; 32] = Sha256::digest(&out[..]).into();
        if out.capacity() > 1 << 20 {
            *out = Vec::with_capacity(4096);
        }
        digest
    })
}

/// `digest` of the object of these entries, without building (cloning into) it: the entries'
/// keys distinct; any order (they are written sorted, as an object's are).
pub fn digest_entries(entries: &mut [(&str, &Value)]) -> [u8; 32] {
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    with_buffer(|out| {
        let stdlib = entries.iter().any(|(k, v)| has_surrogate(k.as_bytes()) || needs_stdlib(v));
        out.push(b'{');
        for (i, (key, item)) in entries.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_str(out, key.as_bytes());
            out.push(b':');
            write(out, item, stdlib);
        }
        out.push(b'}');
    })
}

fn write(out: &mut Vec<u8>, value: &Value, stdlib: bool) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Int(Int::Small(v)) => {
            if let Ok(small) = i64::try_from(*v) {
                let mut buffer = itoa_buffer();
                out.extend_from_slice(format_i64(&mut buffer, small));
            } else {
                out.extend_from_slice(v.to_string().as_bytes());
            }
        }
        Value::Int(Int::Big(text)) => out.extend_from_slice(text.as_bytes()),
        Value::Float(f) => write_float(out, *f, stdlib),
        Value::Str(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, item, stdlib);
            }
            out.push(b']');
        }
        Value::Object(entries) => {
            out.push(b'{');
            for (i, (key, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write(out, item, stdlib);
            }
            out.push(b'}');
        }
    }
}

fn itoa_buffer() -> [u8; 20] {
    [0; 20]
}

fn format_i64(buffer: &mut [u8; 20], value: i64) -> &[u8] {
    let negative = value < 0;
    let mut magnitude = value.unsigned_abs();
    let mut at = buffer.len();
    loop {
        at -= 1;
        buffer[at] = b'0' + (magnitude % 10) as u8;
        magnitude /= 10;
        if magnitude == 0 {
            break;
        }
    }
    if negative {
        at -= 1;
        buffer[at] = b'-';
    }
    &buffer[at..]
}

fn write_str(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let first = find_special(s);
    if first == s.len() {
        out.extend_from_slice(s);
        out.push(b'"');
        return;
    }
    out.extend_from_slice(&s[..first]);
    let mut start = first;
    for (i, &c) in s.iter().enumerate().skip(first) {
        let escape: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            8 => b"\\b",
            12 => b"\\f",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&s[start..i]);
        if escape.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(c >> 4) as usize]);
            out.push(HEX[(c & 15) as usize]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&s[start..]);
    out.push(b'"');
}

/// Shortest round-trip digits and the decimal point position: value = 0.DIGITS x 10^point.
fn shortest(f: f64) -> (bool, String, i32) {
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(f.abs());
    let (mantissa, exp) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i32>().unwrap_or(0)),
        None => (text, 0),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(dot) => (&mantissa[..dot], &mantissa[dot + 1..]),
        None => (mantissa, ""),
    };
    let mut digits: String = format!("{int_part}{frac_part}");
    let mut point = int_part.len() as i32 + exp;
    let lead = digits.len() - digits.trim_start_matches('0').len();
    digits.drain(..lead);
    point -= lead as i32;
    let trimmed = digits.trim_end_matches('0').len();
    digits.truncate(trimmed);
    if digits.is_empty() {
        digits.push('0');
        point = 1;
    }
    (f.is_sign_negative(), digits, point)
}

/// Python's `repr(float)` (stdlib) or orjson's spelling: the same digits; they differ in where
/// exponent notation starts for small values and in the exponent's padding.
fn write_float(out: &mut Vec<u8>, f: f64, stdlib: bool) {
    let (negative, digits, point) = shortest(f);
    if negative {
        out.push(b'-');
    }
    let low = if stdlib { -4 } else { -5 };
    if point > low && point <= 16 {
        if point <= 0 {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-point) as usize));
            out.extend_from_slice(digits.as_bytes());
        } else if digits.len() as i32 <= point {
            out.extend_from_slice(digits.as_bytes());
            out.extend(std::iter::repeat_n(b'0', point as usize - digits.len()));
            out.extend_from_slice(b".0");
        } else {
            out.extend_from_slice(&digits.as_bytes()[..point as usize]);
            out.push(b'.');
            out.extend_from_slice(&digits.as_bytes()[point as usize..]);
        }
        return;
    }
    out.push(digits.as_bytes()[0]);
    if digits.len() > 1 {
        out.push(b'.');
        out.extend_from_slice(&digits.as_bytes()[1..]);
    }
    let exp = point - 1;
    out.push(b'e');
    out.push(if exp < 0 { b'-' } else { b'+' });
    let magnitude = exp.unsigned_abs();
    if stdlib && magnitude < 10 {
        out.push(b'0');
    }
    out.extend_from_slice(magnitude.to_string().as_bytes());
}

/// Python's `str.isspace` for one code point.
pub fn py_isspace(c: char) -> bool {
    matches!(c as u32,
        0x09..=0x0D | 0x1C..=0x20 | 0x85 | 0xA0 | 0x1680 | 0x2000..=0x200A | 0x2028 | 0x2029
        | 0x202F | 0x205F | 0x3000)
}

/// Python's `str.strip()` on WTF-8 text (surrogates are never whitespace).
pub fn py_strip(s: &[u8]) -> &[u8] {
    let mut start = 0;
    let mut end = s.len();
    while start < end {
        match decode_char(&s[start..end]) {
            Some((c, len)) if py_isspace(c) => start += len,
            _ => break,
        }
    }
    while end > start {
        let mut begin = end - 1;
        while begin > start && (s[begin] & 0xC0) == 0x80 {
            begin -= 1;
        }
        match decode_char(&s[begin..end]) {
            Some((c, len)) if len == end - begin && py_isspace(c) => end = begin,
            _ => break,
        }
    }
    &s[start..end]
}

fn decode_char(s: &[u8]) -> Option<(char, usize)> {
    let len = match s.first()? {
        0..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    };
    let text = std::str::from_utf8(s.get(..len)?).ok()?;
    text.chars().next().map(|c| (c, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(text: &str) -> String {
        String::from_utf8_lossy(&canonical(&decode(text, 64).unwrap())).into_owned()
    }

    #[test]
    fn sorted_compact_and_folded() {
        assert_eq!(canon(r#"{"b": 1.0, "a": [true, null, -0.0]}"#), r#"{"a":[true,null,0],"b":1}"#);
    }

    #[test]
    fn floats_spelled_like_orjson_or_stdlib() {
        assert_eq!(canon("[1e-7, 6.1e-5, 0.00001, 1.5, 1e22]"), "[1e-7,0.000061,0.00001,1.5,1e+22]");
        assert_eq!(canon("[1e-7, 6.1e-5, 1e30, 18446744073709551616]"), "[1e-07,6.1e-05,1e+30,18446744073709551616]");
    }

    #[test]
    fn duplicate_keys_keep_the_last() {
        assert_eq!(canon(r#"{"a": 1, "a": 2}"#), r#"{"a":2}"#);
    }

    #[test]
    fn errors_as_python_words_them() {
        assert_eq!(decode("{not json", 64), Err(JsonError::Invalid(
            "Expecting property name enclosed in double quotes at line 1 column 2".into())));
        assert_eq!(decode("[1,", 64), Err(JsonError::Invalid("Expecting value at line 1 column 4".into())));
    }
}
