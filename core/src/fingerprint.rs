//! Args and outcome fingerprints (spec sections 3 and 4), a port of `engine/fingerprints.py`
//! and `engine/external_content.py`. Every digest is sha256 over `json::canonical`.

use std::borrow::Cow;

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
            found.push((start, id_start, i, closing + 4, escapes));
            from = closing + 4;
        } else {
            from = start + 1;
        }
    }
    found
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
    // (id, escapes) -> (closers with that id and escaping: (start, id start, id end), the next unused one)
    type Closers<'a> = Vec<((&'a [u8], usize), Vec<(usize, usize, usize)>, usize)>;
    let mut by_id: Closers = Vec::new();
    for (start, a, b, _, escapes) in &closers {
        let id = (&text[*a..*b], *escapes);
        match by_id.iter_mut().find(|(k, _, _)| *k == id) {
            Some(entry) => entry.1.push((*start, *a, *b)),
            None => by_id.push((id, vec![(*start, *a, *b)], 0)),
        }
    }
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for (_, a, b, end, escapes) in &openers {
        let id = (&text[*a..*b], *escapes);
        let Some(entry) = by_id.iter_mut().find(|(k, _, _)| *k == id) else { continue };
        let candidates = &entry.1;
        let mut index = entry.2;
        while index < candidates.len() && candidates[index].0 < *end {
            index += 1;
        }
        if index == candidates.len() {
            entry.2 = index;
            continue;
        }
        let closer = candidates[index];
        entry.2 = index + 1;
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
    use super::blank_wrapper_ids;

    fn blanked(text: &str) -> String {
        String::from_utf8(blank_wrapper_ids(text.as_bytes())).unwrap()
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
