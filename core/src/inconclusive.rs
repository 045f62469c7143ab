//! Outcomes whose repeat proves less (`loopwarden.sameOutcome.inconclusiveBlockAt`). Two
//! identical answers with content show that repeating a call changes nothing. Two identical empty
//! acknowledgements do not: a silent success (a file written, a line appended, a setting applied)
//! may change what it does not report. Nor do two identical transient errors (a 503, a rate limit,
//! a timeout): the next retry may succeed. So such a repeat takes one more of them before it is
//! warned and blocked.
//!
//! Silent: an empty plain value (`""`, null, `{}`, `[]`); an OpenClaw result whose text is empty
//! and whose details report no output and no failure; a shell answer with empty `stdout` and
//! `stderr` (Claude Code's Bash) that was not interrupted; and mini-swe-agent's observation of a
//! command that exited 0 and printed nothing (`<returncode>0</returncode>` and an empty
//! `<output>`). Transient: an error naming a retryable condition (HTTP 429, 502, 503 and 504 by
//! their reason phrases, a rate limit, a timeout, an overload, a reset connection, "try again").
//! Any other error is conclusive: a call that fails the same way again is not going to succeed.

use crate::fingerprint::text_content;
use crate::json::{py_strip, Int, Value};

/// Phrases of retryable failures, lower case.
const TRANSIENT: &[&str] = &[
    "service unavailable", "bad gateway", "gateway timeout", "too many requests", "rate limit", "rate-limit",
    "ratelimit", "timed out", "timeout", "temporarily", "try again", "overloaded", "connection reset",
    "econnreset", "etimedout", "eai_again",
];
/// Only an error's head is read: a retryable condition is named up front, and a long traceback
/// costs nothing more.
const ERROR_HEAD: usize = 4096;

/// Does this error name a retryable condition?
pub fn transient_error(error: &str) -> bool {
    let head = &error.as_bytes()[..error.len().min(ERROR_HEAD)];
    let lower = head.to_ascii_lowercase();
    TRANSIENT.iter().any(|p| lower.windows(p.len()).any(|w| w == p.as_bytes()))
}

/// Does this successful result say nothing?
pub fn says_nothing(result: &Value) -> bool {
    match result {
        Value::Null => true,
        Value::Str(s) => blank(s),
        Value::Array(items) => items.is_empty(),
        Value::Object(entries) if entries.is_empty() => true,
        Value::Object(_) if result.has("content") || result.has("details") => openclaw_silent(result),
        Value::Object(_) => shell_streams_silent(result),
        _ => false,
    }
}

fn openclaw_silent(result: &Value) -> bool {
    if matches!(result.get("isError"), Some(Value::Bool(true))) {
        return false;
    }
    if result.get("structuredContent").is_some_and(|v| !matches!(v, Value::Null) && !says_nothing(v)) {
        return false;
    }
    if !blank(&text_content(result)) {
        return false;
    }
    let Some(details @ Value::Object(entries)) = result.get("details") else { return true };
    if entries.is_empty() {
        return true;
    }
    let empty = |key: &str| match details.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::Str(s)) => blank(s),
        _ => false,
    };
    let status_ok = match details.get("status") {
        None | Some(Value::Null) => true,
        Some(Value::Str(s)) => matches!(s.as_ref(), b"completed" | b"ok" | b"success"),
        _ => false,
    };
    status_ok && exit_ok(details.get("exitCode")) && empty("aggregated") && empty("tail") && empty("stderr")
}

/// `{"stdout": "", "stderr": "", ...}`: a shell tool's answer that printed nothing.
fn shell_streams_silent(result: &Value) -> bool {
    let stream_empty = |key: &str| matches!(result.get(key), Some(Value::Str(s)) if py_strip(s).is_empty());
    stream_empty("stdout")
        && stream_empty("stderr")
        && !matches!(result.get("interrupted"), Some(Value::Bool(true)))
        && exit_ok(result.get("exitCode"))
        && exit_ok(result.get("exit_code"))
}

fn exit_ok(code: Option<&Value>) -> bool {
    match code {
        None | Some(Value::Null) => true,
        Some(Value::Int(Int::Small(n))) => *n == 0,
        Some(Value::Float(f)) => *f == 0.0,
        _ => false,
    }
}

/// Empty text, or the transcript of a command that printed nothing.
fn blank(text: &[u8]) -> bool {
    let text = py_strip(text);
    text.is_empty() || is_empty_shell_transcript(text)
}

/// mini-swe-agent's observation of a command that exited 0 and printed nothing (the return code
/// may have been moved to the details, leaving the empty `<output>`).
fn is_empty_shell_transcript(text: &[u8]) -> bool {
    let (rest, coded) = match text.strip_prefix(b"<returncode>0</returncode>".as_slice()) {
        Some(rest) => (py_strip(rest), true),
        None => (text, false),
    };
    let Some(rest) = rest.strip_prefix(b"<output>".as_slice()) else { return coded && rest.is_empty() };
    let Some(inner) = rest.strip_suffix(b"</output>".as_slice()) else { return false };
    py_strip(inner).is_empty()
}

#[cfg(test)]
mod tests {
    use super::{says_nothing, transient_error};
    use crate::json::decode;

    fn silent(json: &str) -> bool {
        says_nothing(&decode(json, 64).unwrap())
    }

    #[test]
    fn empty_values_and_empty_results_say_nothing() {
        for json in [r#""""#, r#""  ""#, "null", "{}", "[]", r#"{"content": [{"type": "text", "text": ""}], "details": {}}"#,
            r#"{"content": [], "details": {"status": "completed", "exitCode": 0, "aggregated": ""}}"#,
            r#"{"stdout": "", "stderr": "", "interrupted": false, "isImage": false}"#,
            r#"{"content": [{"type": "text", "text": "<returncode>0</returncode>\n<output>\n</output>"}], "details": {}}"#,
            r#""<returncode>0</returncode>\n<output>\n</output>""#,
            r#"{"content": [{"type": "text", "text": "<output>\n</output>"}], "details": {"status": "completed", "exitCode": 0, "aggregated": "<output>\n</output>"}}"#]
        {
            assert!(silent(json), "{json}");
        }
    }

    #[test]
    fn content_failures_and_exit_codes_say_something() {
        for json in [r#""sent""#, "0", "false", r#"{"ok": true}"#, "[1]", r#"{"content": [{"type": "text", "text": "done"}]}"#,
            r#"{"content": [], "details": {"status": "failed", "exitCode": 1, "aggregated": ""}}"#,
            r#"{"content": [], "details": {"status": "completed", "exitCode": 0, "aggregated": "3 files"}}"#,
            r#"{"content": [], "isError": true}"#,
            r#"{"content": [], "structuredContent": {"rows": 3}}"#,
            r#"{"stdout": "", "stderr": "boom"}"#,
            r#"{"stdout": "", "stderr": "", "interrupted": true}"#,
            r#""<returncode>1</returncode>\n<output>\n</output>""#,
            r#""<returncode>0</returncode>\n<output>\nok\n</output>""#,
            r#"{"content": [{"type": "text", "text": "<output>\n</output>"}], "details": {"status": "failed", "exitCode": 2}}"#]
        {
            assert!(!silent(json), "{json}");
        }
    }

    #[test]
    fn retryable_errors_are_transient_and_others_are_not() {
        for error in ["Error: 503 Service Unavailable", "HTTP 429 Too Many Requests", "rate limit exceeded, retry in 20s",
            "request timed out after 30s", "upstream overloaded", "read ECONNRESET", "Resource temporarily unavailable"]
        {
            assert!(transient_error(error), "{error}");
        }
        for error in ["Error: user not found", "Error: send_email failed: the request was rejected (code 409)",
            "permission denied", "Tool get_status_report not found", ""]
        {
            assert!(!transient_error(error), "{error}");
        }
    }
}
