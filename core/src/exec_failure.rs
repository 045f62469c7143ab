//! The identity of a terminal exec failure (`loopwarden.execFailureStreak`), as upstream OpenClaw
//! keeps one beside each record (`tool-loop-exec-identity.ts`): what makes two failed commands
//! the same failure even when their commands differ and their diagnostics drift.
//!
//! A terminal failure is an exec result with status `completed` or `failed`, a finite non-zero
//! exit code, not timed out, and real output (not empty, not only the footer
//! `(Command exited with code N)` the exec tool appends to a silent failure). Its identity is the
//! sha256 of {status, exitCode, timedOut, shape}, where the shape is the output with what says
//! *when* an attempt ran masked to `#`: ISO date-times, clock times, attempt / retry counters,
//! durations with a unit and labelled pids. Every other number keeps its meaning (errno 111 is
//! not errno 113, HTTP 401 is not 403), and so does a calendar date standing alone (a job that
//! fails on another day's data is another failure).

use std::borrow::Cow;

use crate::fingerprint::text_content;
use crate::json::{digest, py_strip, Int, Value};

/// The identity of `result` when it is a terminal exec failure (None otherwise).
pub fn exec_failure_key(result: Option<&Value>) -> Option<[u8; 32]> {
    let result = result?;
    let details = match result.get("details") {
        Some(d @ Value::Object(_)) => d,
        _ => return None,
    };
    let status = match details.get("status") {
        Some(Value::Str(s)) if matches!(s.as_ref(), b"completed" | b"failed") => s,
        _ => return None,
    };
    let exit_code = match details.get("exitCode") {
        Some(Value::Int(Int::Small(n))) if *n != 0 => n.to_string(),
        Some(Value::Int(Int::Big(text))) => text.clone(),
        Some(Value::Float(f)) if f.is_finite() && *f != 0.0 => format!("{f}"),
        _ => return None,
    };
    if matches!(details.get("timedOut"), Some(Value::Bool(true))) {
        return None;
    }
    let output: Cow<[u8]> = match details.get("aggregated") {
        Some(Value::Str(s)) if !py_strip(s).is_empty() => Cow::Borrowed(py_strip(s)),
        _ => text_content(result),
    };
    if output.is_empty() || *output == *format!("(Command exited with code {exit_code})").as_bytes() {
        return None;
    }
    let code = details.get("exitCode").cloned().unwrap_or(Value::Null);
    Some(digest(&Value::object(vec![
        (b"status"[..].into(), Value::owned_str(status.to_vec())),
        (b"exitCode"[..].into(), code),
        (b"timedOut"[..].into(), Value::Bool(false)),
        (b"shape"[..].into(), Value::owned_str(mask(&output))),
    ])))
}

/// `text` with every volatile span replaced by `#`, scanning left to right (the leftmost match
/// wins, as a global regex replace would have it).
pub fn mask(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let found = date_time(text, i)
            .or_else(|| clock(text, i))
            .or_else(|| labelled(text, i, &[b"attempt", b"retry", b"try", b"iteration", b"pass"]))
            .or_else(|| duration(text, i))
            .or_else(|| labelled(text, i, &[b"pid", b"ppid", b"tid", b"thread"]));
        match found {
            Some(end) => {
                out.push(b'#');
                i = end;
            }
            None => {
                out.push(text[i]);
                i += 1;
            }
        }
    }
    out
}

fn word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// A word boundary before `i` when `text[i]` is a word character.
fn starts_word(text: &[u8], i: usize) -> bool {
    i == 0 || !word(text[i - 1])
}

fn ends_word(text: &[u8], i: usize) -> bool {
    i >= text.len() || !word(text[i])
}

/// Exactly `n` digits at `i`: the end.
fn digits(text: &[u8], i: usize, n: usize) -> Option<usize> {
    (i + n <= text.len() && text[i..i + n].iter().all(u8::is_ascii_digit)).then_some(i + n)
}

fn byte(text: &[u8], i: usize, any_of: &[u8]) -> Option<usize> {
    (i < text.len() && any_of.contains(&text[i].to_ascii_lowercase())).then_some(i + 1)
}

/// 1 to `max` digits at `i`, as many as there are: the end.
fn some_digits(text: &[u8], i: usize, max: usize) -> Option<usize> {
    let n = text[i.min(text.len())..].iter().take(max).take_while(|b| b.is_ascii_digit()).count();
    (n > 0).then_some(i + n)
}

/// `hh:mm:ss` with optional `.ffffff` from `i` (`hh` already read up to `i`).
fn minutes_seconds(text: &[u8], i: usize) -> Option<usize> {
    let i = digits(text, byte(text, i, b":")?, 2)?;
    let i = digits(text, byte(text, i, b":")?, 2)?;
    Some(byte(text, i, b".").and_then(|j| some_digits(text, j, 6)).unwrap_or(i))
}

/// `\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?(z|[+-]\d{2}:\d{2})?`
fn date_time(text: &[u8], i: usize) -> Option<usize> {
    let i = digits(text, byte(text, digits(text, byte(text, digits(text, i, 4)?, b"-")?, 2)?, b"-")?, 2)?;
    let i = minutes_seconds(text, digits(text, byte(text, i, b"t ")?, 2)?)?;
    if let Some(end) = byte(text, i, b"z") {
        return Some(end);
    }
    let zone = byte(text, i, b"+-").and_then(|j| digits(text, j, 2)).and_then(|j| byte(text, j, b":")).and_then(|j| digits(text, j, 2));
    Some(zone.unwrap_or(i))
}

/// `\d{1,2}:\d{2}:\d{2}(\.\d{1,6})?`
fn clock(text: &[u8], i: usize) -> Option<usize> {
    digits(text, i, 2).and_then(|j| minutes_seconds(text, j)).or_else(|| digits(text, i, 1).and_then(|j| minutes_seconds(text, j)))
}

/// `\b(?:label)\b[\s#:=]*\d+`, the label case-insensitive.
fn labelled(text: &[u8], i: usize, labels: &[&[u8]]) -> Option<usize> {
    if !starts_word(text, i) {
        return None;
    }
    let label = labels.iter().find(|l| text.len() >= i + l.len() && text[i..i + l.len()].eq_ignore_ascii_case(l))?;
    let mut j = i + label.len();
    if !ends_word(text, j) {
        return None;
    }
    while j < text.len() && (text[j].is_ascii_whitespace() || matches!(text[j], b'#' | b':' | b'=')) {
        j += 1;
    }
    some_digits(text, j, usize::MAX)
}

/// `\b\d+(?:\.\d+)?\s?(?:ms|us|ns|sec|secs|seconds|s|m|h)\b`, the unit case-insensitive.
fn duration(text: &[u8], i: usize) -> Option<usize> {
    if !starts_word(text, i) {
        return None;
    }
    let mut j = some_digits(text, i, usize::MAX)?;
    if let Some(end) = byte(text, j, b".").and_then(|k| some_digits(text, k, usize::MAX)) {
        j = end;
    }
    let unit_at = |k: usize| -> Option<usize> {
        [&b"ms"[..], b"us", b"ns", b"sec", b"secs", b"seconds", b"s", b"m", b"h"]
            .iter()
            .filter(|u| text.len() >= k + u.len() && text[k..k + u.len()].eq_ignore_ascii_case(u))
            .map(|u| k + u.len())
            .find(|&end| ends_word(text, end))
    };
    unit_at(j).or_else(|| (j < text.len() && text[j].is_ascii_whitespace()).then(|| unit_at(j + 1)).flatten())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::decode;

    fn masked(text: &str) -> String {
        String::from_utf8(mask(text.as_bytes())).unwrap()
    }

    #[test]
    fn what_says_when_is_masked() {
        assert_eq!(masked("failed at 2026-08-30T10:20:11Z (12:00:11); attempt 3, retry=4, after 12ms/2s, pid=1001"),
                   "failed at # (#); #, #, after #/#, #");
        assert_eq!(masked("2026-08-30 10:20:11.123456+02:00 boom"), "# boom");
        assert_eq!(masked("Attempt #7 of 9 took 1.5 seconds (PID: 4242, thread 3)"), "# of 9 took # (#, #)");
    }

    #[test]
    fn what_says_why_is_kept() {
        for text in ["errno 111: connection refused", "HTTP 401", "port 5432", "on 2026-08-30", "3 files", "retries 3",
                     "5min", "v1.2.3", "exit 2"] {
            assert_eq!(masked(text), text);
        }
    }

    fn result(json: &str) -> Option<[u8; 32]> {
        exec_failure_key(Some(&decode(json, 64).ok().unwrap()))
    }

    #[test]
    fn only_terminal_failures_with_output_have_an_identity() {
        let failed = r#"{"content": [], "details": {"status": "failed", "exitCode": 126, "aggregated": "permission denied"}}"#;
        assert!(result(failed).is_some());
        let from_text = r#"{"content": [{"type": "text", "text": "Traceback: missing package"}], "details": {"status": "completed", "exitCode": 1}}"#;
        assert!(result(from_text).is_some());
        for json in [
            r#"{"details": {"status": "completed", "exitCode": 0, "aggregated": "ok"}}"#,
            r#"{"details": {"status": "failed", "exitCode": null, "aggregated": "process failed before spawning"}}"#,
            r#"{"details": {"status": "failed", "exitCode": 1, "timedOut": true, "aggregated": "slow"}}"#,
            r#"{"details": {"status": "completed", "exitCode": 1, "aggregated": "  "}}"#,
            r#"{"content": [{"type": "text", "text": "(Command exited with code 1)"}], "details": {"status": "completed", "exitCode": 1}}"#,
            r#"{"details": {"status": "running", "exitCode": 1, "aggregated": "still going"}}"#,
            r#""a plain string""#,
        ] {
            assert_eq!(result(json), None, "{json}");
        }
    }

    #[test]
    fn drift_keeps_the_identity_and_a_cause_changes_it() {
        let key = |code: u32, text: &str| result(&format!(r#"{{"details": {{"status": "completed", "exitCode": {code}, "aggregated": "{text}"}}}}"#));
        assert_eq!(key(1, "failed at 10:00:01 pid=1"), key(1, "failed at 11:30:59 pid=2"));
        assert_ne!(key(1, "failed"), key(2, "failed"));
        assert_ne!(key(1, "errno 111"), key(1, "errno 113"));
        assert_ne!(key(1, "no data for 2026-08-30"), key(1, "no data for 2026-08-31"));
    }
}
