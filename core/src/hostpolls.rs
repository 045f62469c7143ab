//! Host poll presets: the tools other agent hosts give a model to check on a background job,
//! built in and on by default (docs/extensions.md, "Host polls"). The reference names only
//! OpenClaw's polls (`command_status`, `process` poll/log); these tools are not named by it, so
//! treating them as known polls changes nothing it specifies. A poll whose output never changes
//! is `known_poll_no_progress`'s (warned at W, blocked at C); one whose output changes is never
//! warned (generic_repeat leaves polls alone).
//!
//! Each preset also says what to do instead of polling again: one blocking wait of a stated
//! length, which the poll messages carry. And each host adds per-call bookkeeping to a poll's
//! answer (Codex: a chunk id and the wall time waited; Claude Code: a timestamp) that differs
//! on every call even when the job printed nothing: it is left out of the outcome's hash, or no
//! stuck job would ever look stuck.

use crate::json::Value;

/// One preset: the normalised tool name, and the blocking wait its messages suggest.
pub struct HostPoll {
    pub tool: &'static str,
    pub wait: &'static str,
}

/// The presets, by normalised tool name (lower-cased: Claude Code's `BashOutput` is `bashoutput`).
pub const HOST_POLLS: [HostPoll; 4] = [
    // Codex unified exec: `write_stdin {session_id, chars, yield_time_ms}`; empty `chars` polls
    // the session, and an empty poll may wait up to 300000 ms.
    HostPoll { tool: "write_stdin", wait: "one write_stdin call with empty chars and yield_time_ms 300000 (five minutes)" },
    // Claude Code: `TaskOutput {task_id, block, timeout}` (timeout up to 600000 ms).
    HostPoll { tool: "taskoutput", wait: "one TaskOutput call with block true and timeout 600000 (ten minutes)" },
    // Claude Code's older `BashOutput {bash_id, filter}` cannot block: a sleep under Bash's
    // default two-minute timeout is the wait.
    HostPoll { tool: "bashoutput", wait: "one Bash call `sleep 110` (under two minutes), then a single BashOutput" },
    // MCP Tasks, as the MCP proxy names the request: `tasks/result` blocks until the task ends.
    HostPoll { tool: "tasks/get", wait: "one tasks/result request, which waits until the task finishes" },
];

/// The preset this call is a poll of, if any. `write_stdin` polls only with empty input
/// (`chars` absent, null or ""): with input it is a real terminal interaction.
pub fn host_poll(tool_name: &str, params: &Value) -> Option<&'static HostPoll> {
    let preset = HOST_POLLS.iter().find(|p| p.tool == tool_name)?;
    if tool_name == "write_stdin" {
        if !params.is_object() {
            return None;
        }
        match params.get("chars") {
            None | Some(Value::Null) => {}
            Some(v) if v.is_str("") => {}
            _ => return None,
        }
    }
    Some(preset)
}

/// The wait a poll message of `tool_name` suggests (the call is already known to be a poll).
pub fn wait_advice(tool_name: &str) -> Option<&'static str> {
    HOST_POLLS.iter().find(|p| p.tool == tool_name).map(|p| p.wait)
}

/// Keys of a poll's answer that change on every call: Codex's `chunk_id` and
/// `wall_time_seconds`, Claude Code's `timestamp`.
const VOLATILE_KEYS: [&str; 3] = ["chunk_id", "timestamp", "wall_time_seconds"];
/// Lines of Codex's text rendering of the same two fields.
const VOLATILE_LINES: [&[u8]; 2] = [b"Chunk ID:", b"Wall time:"];
const TIMESTAMP_OPEN: &[u8] = b"<timestamp>";
const TIMESTAMP_CLOSE: &[u8] = b"</timestamp>";

/// The poll's answer without its per-call bookkeeping, at any depth (text content included).
pub fn without_bookkeeping<'a>(value: &Value<'a>) -> Value<'a> {
    match value {
        Value::Str(s) => Value::owned_str(text_without_bookkeeping(s)),
        Value::Array(items) => Value::Array(items.iter().map(without_bookkeeping).collect()),
        Value::Object(entries) => Value::Object(
            entries
                .iter()
                .filter(|(k, _)| !VOLATILE_KEYS.iter().any(|v| v.as_bytes() == k.as_ref()))
                .map(|(k, v)| (k.clone(), without_bookkeeping(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn text_without_bookkeeping(text: &[u8]) -> Vec<u8> {
    // Codex's header lines, up to its `Output:` line (what the job printed is left alone).
    let mut out = Vec::with_capacity(text.len());
    let mut header = true;
    for line in text.split_inclusive(|&b| b == b'\n') {
        let trimmed = line.trim_ascii();
        if header && VOLATILE_LINES.iter().any(|v| trimmed.starts_with(v)) {
            continue;
        }
        header &= trimmed != b"Output:";
        out.extend_from_slice(line);
    }
    // <timestamp>…</timestamp> elements (Claude Code's background-shell output).
    let mut cleaned = Vec::with_capacity(out.len());
    let mut rest = &out[..];
    while let Some(start) = find(rest, TIMESTAMP_OPEN) {
        let Some(len) = find(&rest[start..], TIMESTAMP_CLOSE) else { break };
        cleaned.extend_from_slice(&rest[..start]);
        rest = &rest[start + len + TIMESTAMP_CLOSE.len()..];
    }
    cleaned.extend_from_slice(rest);
    cleaned
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::decode;

    fn poll(tool: &str, params: &str) -> bool {
        host_poll(tool, &decode(params, 64).ok().unwrap()).is_some()
    }

    #[test]
    fn write_stdin_polls_only_with_empty_input() {
        assert!(poll("write_stdin", r#"{"session_id": 3}"#));
        assert!(poll("write_stdin", r#"{"session_id": 3, "chars": "", "yield_time_ms": 5000}"#));
        assert!(poll("write_stdin", r#"{"session_id": 3, "chars": null}"#));
        assert!(!poll("write_stdin", r#"{"session_id": 3, "chars": "y\n"}"#));
        assert!(!poll("write_stdin", "[]"));
        assert!(poll("taskoutput", r#"{"task_id": "t1", "block": false, "timeout": 1000}"#));
        assert!(poll("bashoutput", r#"{"bash_id": "b1"}"#));
        assert!(poll("tasks/get", r#"{"taskId": "x"}"#));
        assert!(!poll("exec", r#"{"command": "ls"}"#));
    }

    #[test]
    fn bookkeeping_is_left_out() {
        let a = decode(r#"{"chunk_id": "a1", "wall_time_seconds": 5.01, "session_id": 3, "output": ""}"#, 64).ok().unwrap();
        let b = decode(r#"{"chunk_id": "b2", "wall_time_seconds": 4.2, "session_id": 3, "output": ""}"#, 64).ok().unwrap();
        let digest = |v: &Value| crate::json::digest(&without_bookkeeping(v));
        assert_eq!(digest(&a), digest(&b));
        let text = |t: &str| text_without_bookkeeping(t.as_bytes());
        assert_eq!(
            text("Chunk ID: 9f\nWall time: 5.0 seconds\nProcess running with session ID 3\nOutput:\n"),
            b"Process running with session ID 3\nOutput:\n"
        );
        assert_eq!(text("Output:\nWall time: printed by the job\n"), b"Output:\nWall time: printed by the job\n");
        assert_eq!(text("<status>running</status>\n<timestamp>2026-01-01T00:00:00Z</timestamp>"), b"<status>running</status>\n");
    }
}
