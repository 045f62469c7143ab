//! The host's own answer when the daemon cannot decide: the JSON `loopwarden hook` prints for
//! the host (client/python/loopwarden/hooks/protocol.py `unavailable_answer`), taken from the
//! generated host table (hosts.rs). Only the "daemon unavailable" answer is written here; every
//! answer the daemon gives is its own.

use crate::hosts::{BeforeTool, HOSTS, REASON};

/// The before-tool event of `host` that `input` is (a deny applies there), if it is one.
fn before_tool(host: &str, input: &[u8]) -> Option<&'static BeforeTool> {
    let event = top_level_string(input, "hook_event_name")?;
    let known = HOSTS.iter().find(|known| known.name == host)?;
    known.before_tool.iter().find(|before| before.event == event)
}

/// Whether `input` is a hook event of `host` that comes before a call runs (a deny applies).
pub fn is_before_tool(host: &str, input: &[u8]) -> bool {
    before_tool(host, input).is_some()
}

/// The answer for `input` (the host's hook JSON, as read from stdin) when the daemon did not
/// answer for `reason`: only a call about to run has something to say — it runs with a message
/// telling the user it was not checked, or, fail closed, is denied, each in the host's own
/// format. A host this command does not know gets a `systemMessage` whatever the flag: a deny it
/// cannot spell.
pub fn unavailable_answer(host: &str, input: &[u8], reason: &str, fail_closed: bool) -> Vec<u8> {
    if !HOSTS.iter().any(|known| known.name == host) {
        let not_checked = format!("loopwarden: {reason}; this call ran without a loop check.");
        return object(&[("systemMessage", string(&not_checked))]);
    }
    let Some(event) = before_tool(host, input) else {
        return b"{}".to_vec();
    };
    let template = if fail_closed { event.denied } else { event.runs };
    let quoted = string(reason);
    template.replace(REASON, &quoted[1..quoted.len() - 1]).into_bytes()
}

/// `{"key": value, ...}` spelled as Python's json.dumps spells it.
fn object(members: &[(&str, String)]) -> Vec<u8> {
    let body: Vec<String> = members.iter().map(|(key, value)| format!("{}: {value}", string(key))).collect();
    format!("{{{}}}", body.join(", ")).into_bytes()
}

/// A JSON string, ASCII only (json.dumps' default).
fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for unit in text.encode_utf16() {
        match unit {
            0x22 => out.push_str("\\\""),
            0x5c => out.push_str("\\\\"),
            0x0a => out.push_str("\\n"),
            0x0d => out.push_str("\\r"),
            0x09 => out.push_str("\\t"),
            0x20..=0x7e => out.push(unit as u8 as char),
            _ => out.push_str(&format!("\\u{unit:04x}")),
        }
    }
    out.push('"');
    out
}

/// The value of `key` when it is a string member of the top-level JSON object, None otherwise
/// (not an object, no such member, not a string, malformed). Nested values are skipped, never
/// searched: a tool input may hold the same key.
fn top_level_string(input: &[u8], key: &str) -> Option<String> {
    let mut scan = Scanner { bytes: input, at: 0 };
    scan.expect(b'{')?;
    loop {
        scan.whitespace();
        if scan.peek()? == b'}' {
            return None;
        }
        let name = scan.string()?;
        scan.expect(b':')?;
        scan.whitespace();
        if name == key {
            return if scan.peek()? == b'"' { scan.string() } else { None };
        }
        scan.skip_value()?;
        scan.whitespace();
        match scan.next()? {
            b',' => continue,
            _ => return None,
        }
    }
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.whitespace();
        (self.next()? == byte).then_some(())
    }

    /// A string at the cursor, its escapes decoded (surrogate pairs joined, lone ones replaced).
    fn string(&mut self) -> Option<String> {
        if self.next()? != b'"' {
            return None;
        }
        let mut units: Vec<u16> = Vec::new();
        let mut raw: Vec<u8> = Vec::new();
        let flush = |raw: &mut Vec<u8>, units: &mut Vec<u16>| -> Option<()> {
            units.extend(std::str::from_utf8(raw).ok()?.encode_utf16());
            raw.clear();
            Some(())
        };
        loop {
            match self.next()? {
                b'"' => {
                    flush(&mut raw, &mut units)?;
                    return Some(String::from_utf16_lossy(&units));
                }
                b'\\' => {
                    flush(&mut raw, &mut units)?;
                    let unit = match self.next()? {
                        b'"' => 0x22,
                        b'\\' => 0x5c,
                        b'/' => 0x2f,
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => 0x0a,
                        b'r' => 0x0d,
                        b't' => 0x09,
                        b'u' => {
                            let hex = self.bytes.get(self.at..self.at + 4)?;
                            self.at += 4;
                            u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?
                        }
                        _ => return None,
                    };
                    units.push(unit);
                }
                byte => raw.push(byte),
            }
        }
    }

    /// Past one value of any kind; strings are read so that brackets inside them do not count.
    fn skip_value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match self.peek()? {
                b'"' => {
                    self.string()?;
                }
                b'{' | b'[' => {
                    depth += 1;
                    self.at += 1;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    self.at += 1;
                }
                b',' if depth == 0 => return Some(()),
                _ => self.at += 1,
            }
            if depth == 0 && matches!(self.peek(), Some(b',' | b'}')) {
                return Some(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn reads_the_top_level_event_name_only() {
        let nested = br#"{"tool_input": {"hook_event_name": "Nope", "s": "}\"{,"}, "x": [1, {"a": []}],
                          "hook_event_name" : "Pre\u0054oolUse"}"#;
        assert_eq!(top_level_string(nested, "hook_event_name").as_deref(), Some("PreToolUse"));
        assert_eq!(top_level_string(br#"{"a": {"hook_event_name": "PreToolUse"}}"#, "hook_event_name"), None);
        assert_eq!(top_level_string(b"not json", "hook_event_name"), None);
        assert_eq!(top_level_string(br#"{"hook_event_name": 3}"#, "hook_event_name"), None);
        assert!(is_before_tool("cursor", br#"{"hook_event_name": "preToolUse"}"#));
        assert!(!is_before_tool("cursor", br#"{"hook_event_name": "PreToolUse"}"#));
        assert!(!is_before_tool("codex", b"not json"));
        assert_eq!(top_level_string(r#"{"n": 12, "hook_event_name": "é"}"#.as_bytes(), "hook_event_name").as_deref(), Some("é"));
    }

    #[test]
    fn answers_like_the_python_command() {
        let pre = br#"{"hook_event_name": "PreToolUse"}"#;
        assert_eq!(
            text(unavailable_answer("codex", pre, "r", false)),
            r#"{"systemMessage": "loopwarden: r; this call ran without a loop check."}"#
        );
        assert_eq!(
            text(unavailable_answer("claude-code", pre, "r \"é\"", true)),
            r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "loopwarden could not check this call (r \"\u00e9\") and is set to fail closed, so it was not run."}}"#
        );
        assert_eq!(text(unavailable_answer("claude-code", br#"{"hook_event_name": "PostToolUse"}"#, "r", true)), "{}");
        assert!(text(unavailable_answer("other", pre, "r", true)).starts_with(r#"{"systemMessage": "#));
        // Gemini CLI's and Cursor's own formats (their host modules' `render`).
        let gemini = br#"{"hook_event_name": "BeforeTool"}"#;
        assert_eq!(
            text(unavailable_answer("gemini-cli", gemini, "r", true)),
            r#"{"decision": "deny", "reason": "loopwarden could not check this call (r) and is set to fail closed, so it was not run."}"#
        );
        assert!(text(unavailable_answer("gemini-cli", gemini, "r", false)).starts_with(r#"{"systemMessage": "#));
        assert_eq!(text(unavailable_answer("gemini-cli", br#"{"hook_event_name": "AfterTool"}"#, "r", true)), "{}");
        let cursor = br#"{"hook_event_name": "beforeShellExecution"}"#;
        assert_eq!(
            text(unavailable_answer("cursor", cursor, "r", true)),
            r#"{"permission": "deny", "agent_message": "loopwarden could not check this call (r) and is set to fail closed, so it was not run.", "user_message": "loopwarden: loopwarden could not check this call (r) and is set to fail closed, so it was not run."}"#
        );
        assert_eq!(
            text(unavailable_answer("cursor", br#"{"hook_event_name": "preToolUse"}"#, "r", false)),
            r#"{"user_message": "loopwarden: r; this call ran without a loop check."}"#
        );
    }
}
