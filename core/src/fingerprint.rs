//! Args and outcome fingerprints (spec sections 3 and 4): what makes two calls the same call and
//! two outcomes the same outcome, including the ids of external-content wrappers blanked (a
//! result re-wrapped under a fresh id is still the same result), known polls and unknown-tool
//! errors. Every digest is sha256 over `json::canonical`. The reference engine's
//! `fingerprints.py` and `external_content.py` (tests/reference/engine) are the oracle the
//! differential suite (tests/core) holds these to.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::json::{digest, digest_entries, py_strip, Int, Value};

pub const PENDING: u8 = 0;
pub const RESULT: u8 = 1;
pub const ERROR: u8 = 2;

pub const MARKER: &str = "EXTERNAL_UNTRUSTED_CONTENT";
const OPEN: &[u8] = b"<<<EXTERNAL_UNTRUSTED_CONTENT id=";
const CLOSE: &[u8] = b"<<<END_EXTERNAL_UNTRUSTED_CONTENT id=";
/// Backslashes an escaped marker may carry before each quote: JSON escaping n times over gives
/// 2^n - 1, so 63 is six levels deep.
const MAX_ESCAPES: usize = 63;
/// The escape depth of MAX_ESCAPES: a quote this deep or deeper cannot end a string holding a marker.
const MAX_DEPTH: u32 = MAX_ESCAPES.trailing_ones();

const SEND_ACTIONS: [&str; 9] = [
    "send", "broadcast", "reply", "thread-reply", "sendWithEffect", "sendAttachment", "upload-file", "sticker", "poll",
];
const VOLATILE_SEND_KEYS: [&str; 18] = [
    "messageId", "message_id", "messageIds", "platformMessageId", "platformMessageIds", "fileId", "file_id",
    "fileKey", "pollId", "poll_id", "receipt", "runId", "idempotencyKey", "ts", "timestamp", "sentAt",
    "deliveredAt", "createdAt",
];

#[derive(Default)]
pub struct Catalog {
    pub provider_send_tools: Vec<String>,
    pub extra_poll_tools: Vec<String>,
}

pub struct Outcome {
    pub status: u8,
    pub digest: [u8; 32],
    pub unknown_tool_name: Option<String>,
}

fn no_outcome() -> Outcome {
    Outcome { status: PENDING, digest: [0; 32], unknown_tool_name: None }
}

fn obj<'a>(entries: Vec<(&'static str, Value<'a>)>) -> Value<'a> {
    Value::object(entries.into_iter().map(|(k, v)| (Cow::Borrowed(k.as_bytes()), v)).collect())
}

fn str_val(s: &[u8]) -> Value<'static> {
    Value::owned_str(s.to_vec())
}

fn non_blank(value: Option<&Value>) -> bool {
    matches!(value, Some(Value::Str(s)) if !py_strip(s).is_empty())
}

pub fn plan_shape<'a>(value: &Value<'a>) -> Value<'a> {
    if !value.is_object() {
        return value.clone();
    }
    let empty = Vec::new();
    let steps = match value.get("plan") {
        Some(Value::Array(items)) => items,
        _ => &empty,
    };
    let mut statuses = Vec::with_capacity(steps.len());
    let mut presence = Vec::with_capacity(steps.len());
    for step in steps {
        if step.is_object() {
            statuses.push(match step.get("status") {
                Some(Value::Str(s)) => str_val(s),
                _ => Value::Null,
            });
            presence.push(Value::Bool(non_blank(step.get("step"))));
        } else {
            statuses.push(Value::Null);
            presence.push(Value::Bool(false));
        }
    }
    obj(vec![
        ("planLength", Value::Int(Int::Small(steps.len() as i128))),
        ("statuses", Value::Array(statuses)),
        ("stepPresence", Value::Array(presence)),
        ("hasExplanation", Value::Bool(non_blank(value.get("explanation")))),
    ])
}

pub fn args_digest(tool_name: &str, params: &Value) -> [u8; 32] {
    if tool_name == "update_plan" {
        return digest(&plan_shape(params));
    }
    digest(params)
}

fn action_of<'v, 'a>(params: &'v Value<'a>) -> Option<&'v Value<'a>> {
    params.get("action")
}

pub fn is_known_poll(tool_name: &str, params: &Value, catalog: &Catalog) -> bool {
    if tool_name == "command_status" || catalog.extra_poll_tools.iter().any(|t| t == tool_name) {
        return true;
    }
    if crate::hostpolls::host_poll(tool_name, params).is_some() {
        return true;
    }
    tool_name == "process" && matches!(action_of(params), Some(a) if a.is_str("poll") || a.is_str("log"))
}

// --- unknown tool names ----------------------------------------------------------------------

/// Python's re.IGNORECASE equality of one text char with a lower-case ASCII pattern char.
fn eq_ignore_case(c: char, pattern: char) -> bool {
    if c.to_ascii_lowercase() == pattern {
        return true;
    }
    matches!((pattern, c), ('k', '\u{212A}') | ('s', '\u{17F}') | ('i', '\u{131}') | ('i', '\u{130}'))
}

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-' || matches!(c, '\u{212A}' | '\u{17F}' | '\u{131}' | '\u{130}')
}

fn space_char(c: char) -> bool {
    crate::json::py_isspace(c)
}

fn literal_at(chars: &[char], at: usize, literal: &str) -> Option<usize> {
    let mut i = at;
    for p in literal.chars() {
        let c = *chars.get(i)?;
        if p == ' ' {
            if c != ' ' {
                return None;
            }
        } else if !eq_ignore_case(c, p) {
            return None;
        }
        i += 1;
    }
    Some(i)
}

fn run(chars: &[char], mut i: usize, pred: impl Fn(char) -> bool) -> usize {
    while i < chars.len() && pred(chars[i]) {
        i += 1;
    }
    i
}

fn lower_name(chars: &[char]) -> String {
    chars.iter().map(|c| if *c == '\u{212A}' { 'k' } else if *c == '\u{130}' { 'i' } else { c.to_ascii_lowercase() })
        .collect::<String>()
}

pub fn unknown_tool_name(error_text: &str) -> Option<String> {
    let text = error_text.trim_matches(crate::json::py_isspace);
    let chars: Vec<char> = text.chars().collect();
    // unknown tool[:\s]+["']?([a-z0-9_.-]+)
    for start in 0..chars.len() {
        let Some(mut i) = literal_at(&chars, start, "unknown tool") else { continue };
        let after = run(&chars, i, |c| c == ':' || space_char(c));
        if after == i {
            continue;
        }
        i = after;
        if i < chars.len() && (chars[i] == '"' || chars[i] == '\'') && i + 1 < chars.len() && name_char(chars[i + 1]) {
            i += 1;
        }
        let end = run(&chars, i, name_char);
        if end > i {
            return Some(lower_name(&chars[i..end]));
        }
    }
    // tool\s+["']?([a-z0-9_.-]+)["']?\s+(?:not found|is not available)
    for start in 0..chars.len() {
        let Some(mut i) = literal_at(&chars, start, "tool") else { continue };
        let after = run(&chars, i, space_char);
        if after == i {
            continue;
        }
        i = after;
        if i < chars.len() && (chars[i] == '"' || chars[i] == '\'') && i + 1 < chars.len() && name_char(chars[i + 1]) {
            i += 1;
        }
        let end = run(&chars, i, name_char);
        if end == i {
            continue;
        }
        let mut j = end;
        if j < chars.len() && (chars[j] == '"' || chars[j] == '\'') {
            j += 1;
        }
        let spaced = run(&chars, j, space_char);
        if spaced == j {
            continue;
        }
        if literal_phrase(&chars, spaced, "not found") || literal_phrase(&chars, spaced, "is not available") {
            return Some(lower_name(&chars[i..end]));
        }
    }
    None
}

fn literal_phrase(chars: &[char], at: usize, phrase: &str) -> bool {
    literal_at(chars, at, phrase).is_some()
}

// --- external-content wrappers ---------------------------------------------------------------

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn find_from(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > hay.len() {
        return None;
    }
    hay[from..].windows(needle.len()).position(|w| w == needle).map(|p| p + from)
}

/// Matches of `prefix Q ID Q>>>` (see `blank_wrapper_ids`): (start, id_start, id_end, end,
/// backslashes before each quote).
fn markers(text: &[u8], prefix: &[u8]) -> Vec<(usize, usize, usize, usize, usize)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(start) = find_from(text, prefix, from) {
        let mut i = start + prefix.len();
        let escapes = text[i..].iter().take(MAX_ESCAPES + 1).take_while(|&&b| b == b'\\').count();
        i += escapes;
        let quoted = escapes <= MAX_ESCAPES && text.get(i) == Some(&b'"');
        let id_start = i + 1;
        i = id_start;
        let mut chars = 0;
        // Unescaped, an id is what the reference allows; escaped, it also stops at a backslash
        // (the escape of its closing quote).
        while quoted && i < text.len() && chars <= 128 && !matches!(text[i], b'"' | b'<' | b'>' | b'\n')
            && !(escapes > 0 && text[i] == b'\\')
        {
            i += utf8_len(text[i]);
            chars += 1;
        }
        let i = i.min(text.len());
        let closing = i + escapes;
        if quoted && (1..=128).contains(&chars) && closing <= text.len() && text[i..closing].iter().all(|&b| b == b'\\')
            && text[closing..].starts_with(b"\">>>")
        {
            // Only 0 or 2^d - 1 backslashes are a quote escaped d times over; any other count is
            // not one escaping (2 is an escaped backslash, then a bare quote), so never a pair.
            if valid_escapes(escapes) {
                found.push((start, id_start, i, closing + 4, escapes));
            }
            from = closing + 4;
        } else {
            from = start + 1;
        }
    }
    found
}

/// 0 (a raw marker) or 2^d - 1 (one encoded d times).
fn valid_escapes(backslashes: usize) -> bool {
    backslashes & (backslashes + 1) == 0
}

/// How many JSON decodings a quote after this many backslashes survives as a quote: each turns
/// `\\` into `\` and `\"` into `"`, so an odd run keeps the quote escaped one level deeper and an
/// even run leaves it bare. 1, 3, 7 are depths 1, 2, 3; 2 is depth 0 (a backslash, a real quote).
fn depth(backslashes: usize) -> u32 {
    backslashes.trailing_ones()
}

/// Where encoded strings end: for an escaped marker at depth d, a quote of depth below d after it
/// closes the string it is in (or one around it). Asked with positions in text order, each depth
/// keeps a cursor that only moves forward over the quotes, so all queries together are linear.
struct StringEnds {
    /// (position, depth) of every quote shallower than MAX_DEPTH, in text order.
    quotes: Vec<(usize, u32)>,
    cursors: [usize; MAX_DEPTH as usize + 1],
}

impl StringEnds {
    fn new(text: &[u8]) -> Self {
        let mut quotes = Vec::new();
        let mut run = 0;
        for (i, &b) in text.iter().enumerate() {
            match b {
                b'\\' => run += 1,
                b'"' => {
                    if depth(run) < MAX_DEPTH {
                        quotes.push((i, depth(run)));
                    }
                    run = 0;
                }
                _ => run = 0,
            }
        }
        StringEnds { quotes, cursors: [0; MAX_DEPTH as usize + 1] }
    }

    /// Whether a quote shallower than `depth` sits in text[start..end]; `start` never decreases.
    fn closed_between(&mut self, start: usize, end: usize, depth: u32) -> bool {
        let quotes = &self.quotes;
        let cursor = &mut self.cursors[depth as usize];
        while *cursor < quotes.len() && (quotes[*cursor].0 < start || quotes[*cursor].1 >= depth) {
            *cursor += 1;
        }
        *cursor < quotes.len() && quotes[*cursor].0 < end
    }
}

fn utf8_len(first: u8) -> usize {
    match first {
        0..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xFF => 4,
        _ => 1,
    }
}

pub fn blank_wrapper_ids(text: &[u8]) -> Vec<u8> {
    if !contains(text, MARKER.as_bytes()) {
        return text.to_vec();
    }
    let closers = markers(text, CLOSE);
    if closers.is_empty() {
        return text.to_vec();
    }
    let openers = markers(text, OPEN);
    // (id, escapes) -> (closers with that id and escaping: (start, id start, id end), the next
    // unused one). A map, not a list searched per marker: a result of thousands of markers with
    // distinct ids would make that search quadratic.
    type Closers<'a> = HashMap<(&'a [u8], usize), (Vec<(usize, usize, usize)>, usize)>;
    let mut by_id: Closers = HashMap::new();
    for (start, a, b, _, escapes) in &closers {
        by_id.entry((&text[*a..*b], *escapes)).or_default().0.push((*start, *a, *b));
    }
    let mut string_ends: Option<StringEnds> = None; // read only when an escaped pair is in question
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for (_, a, b, end, escapes) in &openers {
        let id = (&text[*a..*b], *escapes);
        let Some(entry) = by_id.get_mut(&id) else { continue };
        let candidates = &entry.0;
        let mut index = entry.1;
        while index < candidates.len() && candidates[index].0 < *end {
            index += 1;
        }
        entry.1 = index;
        if index == candidates.len() {
            continue;
        }
        let closer = candidates[index];
        // Escaped, both markers must be in one encoded string: a shallower quote between them
        // ends it (an opener ending one JSON string field, its closer in the next). The closer
        // stays free for an opener after that quote.
        if *escapes > 0 {
            let ends = string_ends.get_or_insert_with(|| StringEnds::new(text));
            if ends.closed_between(*end, closer.0, depth(*escapes)) {
                continue;
            }
        }
        entry.1 = index + 1;
        spans.push((*a, *b));
        spans.push((closer.1, closer.2));
    }
    if spans.is_empty() {
        return text.to_vec();
    }
    spans.sort();
    let mut out = Vec::with_capacity(text.len());
    let mut position = 0;
    for (start, end) in spans {
        out.extend_from_slice(&text[position..start]);
        position = end;
    }
    out.extend_from_slice(&text[position..]);
    out
}

pub fn blank_wrapper_ids_in<'a>(value: &Value<'a>) -> Value<'a> {
    match value {
        Value::Str(s) => Value::owned_str(blank_wrapper_ids(s)),
        Value::Array(items) => Value::Array(items.iter().map(blank_wrapper_ids_in).collect()),
        Value::Object(entries) => {
            Value::Object(entries.iter().map(|(k, v)| (k.clone(), blank_wrapper_ids_in(v))).collect())
        }
        other => other.clone(),
    }
}

// --- outcome fingerprint ---------------------------------------------------------------------

/// The text entries' texts joined by newlines, stripped: borrowed from `result` when there is
/// one (the common case), so the result's longest string is not copied.
pub(crate) fn text_content<'v>(result: &'v Value) -> Cow<'v, [u8]> {
    let Some(Value::Array(content)) = result.get("content") else { return Cow::Borrowed(&[]) };
    let mut texts = content.iter().filter_map(|entry| match (entry.is_object(), entry.get("type"), entry.get("text")) {
        (true, Some(Value::Str(_)), Some(Value::Str(text))) => Some(text.as_ref()),
        _ => None,
    });
    let Some(first) = texts.next() else { return Cow::Borrowed(&[]) };
    let Some(second) = texts.next() else { return Cow::Borrowed(py_strip(first)) };
    let mut joined: Vec<u8> = [first, second].join(&b'\n');
    for text in texts {
        joined.push(b'\n');
        joined.extend_from_slice(text);
    }
    Cow::Owned(py_strip(&joined).to_vec())
}

fn str_or_null(value: Option<&Value>) -> Value<'static> {
    match value {
        Some(Value::Str(s)) => str_val(s),
        _ => Value::Null,
    }
}

fn str_or_empty(value: Option<&Value>) -> Value<'static> {
    match value {
        Some(Value::Str(s)) if !s.is_empty() => str_val(s),
        _ => Value::owned_str(Vec::new()),
    }
}

fn field<'a>(details: &Value<'a>, key: &str) -> Value<'a> {
    details.get(key).cloned().unwrap_or(Value::Null)
}

fn exec_hash(details: &Value, text: &[u8]) -> Option<[u8; 32]> {
    let Some(Value::Str(status)) = details.get("status") else { return None };
    let status_s = status.as_ref();
    if status_s == b"running" {
        return Some(digest(&obj(vec![("status", str_val(status)), ("tail", str_or_empty(details.get("tail")))])));
    }
    if status_s == b"completed" || status_s == b"failed" {
        let exit_code = match details.get("exitCode") {
            Some(v @ (Value::Int(_) | Value::Float(_))) => v.clone(),
            _ => Value::Null,
        };
        let output = match details.get("aggregated") {
            Some(Value::Str(s)) => py_strip(s).to_vec(),
            _ => Vec::new(),
        };
        let output = if output.is_empty() { text.to_vec() } else { output };
        return Some(digest(&obj(vec![
            ("status", str_val(status)),
            ("exitCode", exit_code),
            ("timedOut", Value::Bool(matches!(details.get("timedOut"), Some(Value::Bool(true))))),
            ("output", Value::owned_str(output)),
        ])));
    }
    if status_s == b"approval-pending" || status_s == b"approval-unavailable" {
        return Some(digest(&obj(vec![
            ("status", str_val(status)),
            ("reason", str_or_null(details.get("reason"))),
            ("host", str_or_null(details.get("host"))),
            ("command", str_or_empty(details.get("command"))),
            ("warningText", str_or_empty(details.get("warningText"))),
        ])));
    }
    None
}

fn process_hash(action: &str, details: &Value, text: &[u8]) -> [u8; 32] {
    let text = Value::Str(Cow::Borrowed(text));
    if action == "poll" {
        return digest(&obj(vec![
            ("action", Value::str_value(action)),
            ("status", field(details, "status")),
            ("exitCode", field(details, "exitCode")),
            ("exitSignal", field(details, "exitSignal")),
            ("aggregated", field(details, "aggregated")),
            ("text", text),
        ]));
    }
    digest(&obj(vec![
        ("action", Value::str_value(action)),
        ("status", field(details, "status")),
        ("totalLines", field(details, "totalLines")),
        ("totalChars", field(details, "totalChars")),
        ("truncated", field(details, "truncated")),
        ("exitCode", field(details, "exitCode")),
        ("exitSignal", field(details, "exitSignal")),
        ("text", text),
    ]))
}

fn is_send_action(action: Option<&Value>) -> bool {
    matches!(action, Some(Value::Str(s)) if SEND_ACTIONS.iter().any(|a| a.as_bytes() == s.as_ref()))
}

fn is_send(tool_name: &str, params: &Value, catalog: &Catalog) -> bool {
    if tool_name == "sessions_send" {
        return true;
    }
    let action = action_of(params);
    if tool_name == "message" {
        return is_send_action(action);
    }
    if catalog.provider_send_tools.iter().any(|t| t == tool_name) {
        return action.is_none() || matches!(action, Some(Value::Null)) || is_send_action(action);
    }
    false
}

fn is_message_object(value: &Value) -> bool {
    matches!(value.get("id"), Some(Value::Str(_)))
        && matches!(value.get("text"), Some(Value::Str(_)))
        && (matches!(value.get("direction"), Some(Value::Str(_)))
            || matches!(value.get("senderId"), Some(Value::Str(_)))
            || matches!(value.get("accountId"), Some(Value::Str(_)))
            || matches!(value.get("conversation"), Some(Value::Object(_))))
}

pub fn strip_volatile_send_ids<'a>(value: &Value<'a>) -> Value<'a> {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(strip_volatile_send_ids).collect()),
        Value::Object(entries) => {
            let drop_id = is_message_object(value);
            Value::Object(
                entries
                    .iter()
                    .filter(|(k, _)| {
                        !(VOLATILE_SEND_KEYS.iter().any(|v| v.as_bytes() == k.as_ref()) || (drop_id && k.as_ref() == b"id"))
                    })
                    .map(|(k, v)| (k.clone(), strip_volatile_send_ids(v)))
                    .collect(),
            )
        }
        other => other.clone(),
    }
}

/// Hash what a call returned, in the order of spec section 4 (`outcome_fingerprint`).
pub fn outcome_fingerprint(
    tool_name: &str,
    params: &Value,
    result: Option<&Value>,
    error: Option<&str>,
    catalog: &Catalog,
    wrapped: bool,
) -> Outcome {
    if let Some(error) = error {
        let text = if wrapped { blank_wrapper_ids(error.as_bytes()) } else { error.as_bytes().to_vec() };
        return Outcome { status: ERROR, digest: digest(&Value::owned_str(text)), unknown_tool_name: unknown_tool_name(error) };
    }
    let Some(result) = result else { return no_outcome() };
    let blanked;
    let result = if wrapped {
        blanked = blank_wrapper_ids_in(result);
        &blanked
    } else {
        result
    };
    // A host poll's per-call bookkeeping (wall time, chunk id, timestamp) is not its output.
    let polled;
    let result = if crate::hostpolls::host_poll(tool_name, params).is_some() {
        polled = crate::hostpolls::without_bookkeeping(result);
        &polled
    } else {
        result
    };
    let done = |d: [u8; 32]| Outcome { status: RESULT, digest: d, unknown_tool_name: None };
    if !result.is_object() {
        return done(digest(result));
    }
    if !result.has("content") && !result.has("details") {
        if is_send(tool_name, params, catalog) {
            return done(digest(&strip_volatile_send_ids(result)));
        }
        return done(digest(result));
    }
    let empty = Value::Object(Vec::new());
    let details = match result.get("details") {
        Some(d @ Value::Object(_)) => d,
        _ => &empty,
    };
    let text = text_content(result);
    if matches!(details.get("status"), Some(s) if s.is_str("blocked"))
        && matches!(details.get("deniedReason"), Some(s) if s.is_str("tool-loop"))
    {
        return no_outcome();
    }
    if tool_name == "exec" {
        if let Some(d) = exec_hash(details, &text) {
            return done(d);
        }
    }
    if tool_name == "process" && params.is_object() {
        match action_of(params) {
            Some(a) if a.is_str("poll") => return done(process_hash("poll", details, &text)),
            Some(a) if a.is_str("log") => return done(process_hash("log", details, &text)),
            _ => {}
        }
    }
    if is_send(tool_name, params, catalog) {
        return done(digest(&strip_volatile_send_ids(details)));
    }
    if tool_name == "update_plan" {
        return done(digest(&obj(vec![("details", plan_shape(details)), ("text", Value::owned_str(Vec::new()))])));
    }
    if result.has("structuredContent") || result.has("isError") {
        let (structured, is_error) = (field(result, "structuredContent"), field(result, "isError"));
        return done(digest_entries(&mut [
            ("details", details),
            ("text", &Value::Str(text)),
            ("structuredContent", &structured),
            ("isError", &is_error),
        ]));
    }
    done(digest_entries(&mut [("details", details), ("text", &Value::Str(text))]))
}

#[cfg(test)]
mod wrapper_tests {
    use super::{blank_wrapper_ids, outcome_fingerprint, Catalog};
    use crate::json::{decode, Value};

    fn blanked(text: &str) -> String {
        String::from_utf8(blank_wrapper_ids(text.as_bytes())).unwrap()
    }

    /// The outcome digest of a web_fetch whose result text is `text`, through the entry point.
    fn text_digest(text: &str) -> [u8; 32] {
        let result_json = format!(r#"{{"content": [{{"type": "text", "text": {}}}], "details": {{}}}}"#, json_string(text));
        let result = decode(&result_json, 64).unwrap();
        let params = Value::object(Vec::new());
        outcome_fingerprint("web_fetch", &params, Some(&result), None, &Catalog::default(), true).digest
    }

    /// `text` as a JSON string literal (quotes, backslashes and newlines escaped): encoding once.
    fn json_string(text: &str) -> String {
        let mut out = String::from("\"");
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// `body` wrapped with `id` on both markers, JSON-encoded `levels` times inside a document.
    fn encoded(levels: usize, id: &str, body: &str) -> String {
        let mut text = format!("<<<EXTERNAL_UNTRUSTED_CONTENT id=\"{id}\">>>\n{body}\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"{id}\">>>");
        for _ in 0..levels {
            text = format!(r#"{{"title": {}, "status": 200}}"#, json_string(&text));
        }
        text
    }

    /// Valid escaped pairs still lose their ids: encoded one to four times, with long runs of
    /// (properly escaped) backslashes in the page between the markers.
    #[test]
    fn encoded_pairs_hash_alike_at_every_depth() {
        for levels in 1..=4 {
            for body in ["the page", &format!("C:{}\"quoted\" end", "\\".repeat(300))] {
                assert_eq!(text_digest(&encoded(levels, "9f86d081884c7d65", body)), text_digest(&encoded(levels, "x-1 any form", body)),
                    "{levels} levels");
            }
        }
    }

    /// (a) An opener ending one JSON string field and a closer in the next field of the same
    /// encoded document are no pair, once or twice encoded.
    #[test]
    fn markers_in_different_string_fields_are_no_pair() {
        let once = |id: &str| format!(r#"{{"a": "x <<<EXTERNAL_UNTRUSTED_CONTENT id=\"{id}\">>>", "b": "<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"{id}\">>> y"}}"#);
        assert_eq!(blanked(&once("n1")), once("n1"));
        assert_ne!(text_digest(&once("n1")), text_digest(&once("n2")));
        let twice = |id: &str| format!(r#"{{"doc": "{{\"a\": \"<<<EXTERNAL_UNTRUSTED_CONTENT id=\\\"{id}\\\">>>\", \"b\": \"<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\\"{id}\\\">>>\"}}"}}"#);
        assert_eq!(blanked(&twice("n1")), twice("n1"));
        assert_ne!(text_digest(&twice("n1")), text_digest(&twice("n2")));
    }

    /// (b) Backslash counts that are no escape depth (2, 4, 5, 6, 62) pair with nothing, even
    /// the same count on both markers; 1, 3, 7, 15, 31, 63 do.
    #[test]
    fn escapes_that_are_no_json_depth_are_no_pair() {
        let text = |n: usize, id: &str| {
            let q = format!("{}\"", "\\".repeat(n));
            format!("<<<EXTERNAL_UNTRUSTED_CONTENT id={q}{id}{q}>>> page <<<END_EXTERNAL_UNTRUSTED_CONTENT id={q}{id}{q}>>>")
        };
        for n in [2, 4, 5, 6, 62] {
            assert_eq!(blanked(&text(n, "n1")), text(n, "n1"), "{n} backslashes");
            assert_ne!(text_digest(&text(n, "n1")), text_digest(&text(n, "n2")), "{n} backslashes");
        }
        for n in [1, 3, 7, 15, 31, 63] {
            assert_eq!(text_digest(&text(n, "n1")), text_digest(&text(n, "n2")), "{n} backslashes");
        }
    }

    /// (c) A quote shallower than the markers between them closes the string that holds them:
    /// for markers at depth 2 (3 backslashes), a bare quote, one escaped once, or one after an
    /// escaped backslash (2 or 5 backslashes); a quote at depth 2 or deeper (3, 7, 11) does not.
    #[test]
    fn a_shallower_quote_between_the_markers_ends_the_pair() {
        let text = |run: usize, id: &str| {
            let between = format!("page {}\" more", "\\".repeat(run));
            format!(r#"<<<EXTERNAL_UNTRUSTED_CONTENT id=\\\"{id}\\\">>> {between} <<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\\"{id}\\\">>>"#)
        };
        for run in [0, 1, 2, 5] {
            assert_eq!(blanked(&text(run, "n1")), text(run, "n1"), "{run} backslashes");
            assert_ne!(text_digest(&text(run, "n1")), text_digest(&text(run, "n2")), "{run} backslashes");
        }
        for run in [3, 7, 11] {
            assert_eq!(text_digest(&text(run, "n1")), text_digest(&text(run, "n2")), "{run} backslashes");
        }
    }

    /// A closer left unpaired because the string ended pairs with an opener after that end.
    #[test]
    fn a_closer_past_a_string_end_pairs_with_the_opener_in_its_string() {
        let text = r#"{"a": "<<<EXTERNAL_UNTRUSTED_CONTENT id=\"n\">>>", "b": "<<<EXTERNAL_UNTRUSTED_CONTENT id=\"n\">>> x <<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"n\">>>"}"#;
        let want = r#"{"a": "<<<EXTERNAL_UNTRUSTED_CONTENT id=\"n\">>>", "b": "<<<EXTERNAL_UNTRUSTED_CONTENT id=\"\">>> x <<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"\">>>"}"#;
        assert_eq!(blanked(text), want);
    }

    /// Thousands of markers with distinct ids (none a pair) around one real pair: the pair is
    /// blanked, and finding each marker's partners is a lookup, not a search of all the ids.
    #[test]
    fn many_distinct_ids_around_one_pair() {
        let mut text = String::new();
        for i in 0..20_000 {
            text.push_str(&format!("<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"c{i}\">>>"));
        }
        text.push_str("<<<EXTERNAL_UNTRUSTED_CONTENT id=\"p\">>> page <<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"p\">>>");
        for i in 0..20_000 {
            text.push_str(&format!("<<<EXTERNAL_UNTRUSTED_CONTENT id=\"o{i}\">>>"));
        }
        let want = text.replace("id=\"p\"", "id=\"\"");
        assert_eq!(blanked(&text), want);
    }

    /// Unescaped markers pair across quotes as before: raw text has no encoded strings.
    #[test]
    fn unescaped_markers_ignore_quotes_between_them() {
        let text = r#"<<<EXTERNAL_UNTRUSTED_CONTENT id="n">>> "a", "b" <<<END_EXTERNAL_UNTRUSTED_CONTENT id="n">>>"#;
        assert_eq!(blanked(text), r#"<<<EXTERNAL_UNTRUSTED_CONTENT id="">>> "a", "b" <<<END_EXTERNAL_UNTRUSTED_CONTENT id="">>>"#);
    }

    /// A pair's id is blanked whatever the id's form, and in JSON-escaped text at any depth.
    #[test]
    fn pairs_are_blanked_escaped_or_not() {
        for q in [r#"""#, r#"\""#, r#"\\\""#, r#"\\\\\\\""#] {
            let text = format!("<<<EXTERNAL_UNTRUSTED_CONTENT id={q}a1 not-hex{q}>>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id={q}a1 not-hex{q}>>>");
            let want = format!("<<<EXTERNAL_UNTRUSTED_CONTENT id={q}{q}>>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id={q}{q}>>>");
            assert_eq!(blanked(&text), want, "quote {q}");
        }
    }

    /// Not a pair: different escaping, different ids, unequal backslashes around one id, a lone marker.
    #[test]
    fn what_is_not_a_pair_is_text() {
        for text in [
            r#"<<<EXTERNAL_UNTRUSTED_CONTENT id=\"a\">>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\\\"a\\\">>>"#,
            r#"<<<EXTERNAL_UNTRUSTED_CONTENT id=\"a\">>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"b\">>>"#,
            r#"<<<EXTERNAL_UNTRUSTED_CONTENT id=\"a\\\">>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"a\\\">>>"#,
            r#"<<<EXTERNAL_UNTRUSTED_CONTENT id=\"a\">>> x"#,
        ] {
            assert_eq!(blanked(text), text);
        }
    }

    /// Unescaped, an id may still hold a backslash (spec section 4.10's form, unchanged).
    #[test]
    fn an_unescaped_id_keeps_its_old_alphabet() {
        let text = r#"<<<EXTERNAL_UNTRUSTED_CONTENT id="a\b">>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id="a\b">>>"#;
        assert_eq!(blanked(text), r#"<<<EXTERNAL_UNTRUSTED_CONTENT id="">>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id="">>>"#);
    }
}
