//! The command line: `loopwarden-hook <dialect> [--url URL] [--token-file F] [--agent ID]
//! [--fail-closed] [--timeout S]`, the flags of `loopwarden hook` that still mean something when
//! the daemon's HTTP endpoint does the mapping.

use std::time::Duration;

pub const DEFAULT_URL: &str = "http://127.0.0.1:50052";
const DEFAULT_TIMEOUT_SECONDS: f64 = 5.0;
const TOKEN_FILE_VARIABLE: &str = "LOOPWARDEN_TOKEN_FILE";

pub const USAGE: &str = "\
usage: loopwarden-hook HOST [--url URL] [--token-file FILE] [--agent ID] [--fail-closed] [--timeout SECONDS]

Answers one agent hook event: the host's hook JSON on stdin is posted unchanged to
URL/v1/hooks/HOST (the daemon's hook endpoint), and the daemon's answer is printed on stdout.

  HOST               whose hook protocol: claude-code, codex (or any dialect the daemon serves)
  --url URL          the daemon's hook listener, plain http (default http://127.0.0.1:50052)
  --token-file FILE  file holding the bearer token to send (default: $LOOPWARDEN_TOKEN_FILE)
  --agent ID         agent id for the daemon's per-agent config (default: the daemon's)
  --fail-closed      deny tool calls while the daemon cannot be asked (default: they run, unchecked)
  --timeout SECONDS  seconds to wait for the daemon (default 5)
";

/// `http://host:port` split into what the socket needs, plus any path prefix before `/v1/hooks`.
#[derive(Debug, PartialEq)]
pub struct Url {
    pub authority: String,
    pub prefix: String,
}

impl Url {
    pub fn parse(text: &str) -> Result<Url, String> {
        let rest = if let Some(rest) = text.strip_prefix("http://") {
            rest
        } else if text.starts_with("https://") {
            return Err(format!(
                "--url: {text}: loopwarden-hook speaks plain http to a local listener; for TLS use `loopwarden hook`"
            ));
        } else {
            return Err(format!("--url: {text} is not an http:// URL"));
        };
        let (authority, prefix) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("--url: {text} names no host:port"));
        }
        let authority = if authority.rsplit_once(':').is_some_and(|(_, port)| !port.contains(']')) {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        Ok(Url { authority, prefix: prefix.trim_end_matches('/').to_string() })
    }

    pub fn base(&self) -> String {
        format!("http://{}{}", self.authority, self.prefix)
    }
}

#[derive(Debug)]
pub struct Args {
    pub dialect: String,
    pub url: Url,
    pub token_file: Option<String>,
    pub agent: Option<String>,
    pub fail_closed: bool,
    pub timeout: Duration,
}

impl Args {
    /// The parsed flags, `None` for `--help`, or the error naming the flag.
    pub fn parse(mut words: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
        let mut dialect = None;
        let mut url = DEFAULT_URL.to_string();
        let mut token_file = std::env::var(TOKEN_FILE_VARIABLE).ok().filter(|path| !path.is_empty());
        let mut agent = None;
        let mut fail_closed = false;
        let mut timeout = DEFAULT_TIMEOUT_SECONDS;
        while let Some(word) = words.next() {
            let (flag, inline) = match word.split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => (flag.to_string(), Some(value.to_string())),
                _ => (word.clone(), None),
            };
            let mut value = |name: &str| {
                inline.clone().or_else(|| words.next()).ok_or_else(|| format!("{name} needs a value"))
            };
            match flag.as_str() {
                "-h" | "--help" => return Ok(None),
                "--url" => url = value("--url")?,
                "--token-file" => token_file = Some(value("--token-file")?),
                "--agent" => agent = Some(value("--agent")?),
                "--fail-closed" if inline.is_none() => fail_closed = true,
                "--timeout" => {
                    let text = value("--timeout")?;
                    timeout = text
                        .parse::<f64>()
                        .ok()
                        .filter(|seconds| seconds.is_finite() && *seconds > 0.0)
                        .ok_or_else(|| format!("--timeout must be a positive number of seconds, got {text:?}"))?;
                }
                _ if flag.starts_with('-') => return Err(format!("unknown flag {word}\n{USAGE}")),
                _ if dialect.is_none() => {
                    if word.is_empty() || !word.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                        return Err(format!("HOST must be a dialect name such as claude-code, got {word:?}"));
                    }
                    dialect = Some(word)
                }
                _ => return Err(format!("unexpected argument {word:?}\n{USAGE}")),
            }
        }
        let dialect = dialect.ok_or_else(|| format!("HOST is missing\n{USAGE}"))?;
        Ok(Some(Args {
            dialect,
            url: Url::parse(&url)?,
            token_file,
            agent,
            fail_closed,
            timeout: Duration::from_secs_f64(timeout),
        }))
    }

    /// The bearer token from --token-file, read as `loopwarden hook` reads it (trimmed, not empty).
    pub fn token(&self) -> Result<Option<String>, String> {
        let Some(path) = &self.token_file else { return Ok(None) };
        let bytes = std::fs::read(path).map_err(|err| format!("--token-file: cannot read {path}: {err}"))?;
        let token = String::from_utf8_lossy(&bytes).trim().to_string();
        if token.is_empty() {
            return Err(format!("--token-file: {path} is empty"));
        }
        if token.bytes().any(|b| b.is_ascii_control()) {
            return Err(format!("--token-file: {path} holds a control character, no bearer token"));
        }
        Ok(Some(token))
    }

    /// The request target on the daemon: the endpoint path, with `?agent=` when one is named and
    /// `fail_closed=1` with --fail-closed, so that the daemon denies a call it answers but cannot
    /// judge (an event it refuses, an input it cannot read) even when its own default is open:
    /// only the daemon knows such an answer is no verdict.
    pub fn endpoint_path(&self) -> String {
        let path = format!("{}/v1/hooks/{}", self.url.prefix, self.dialect);
        let mut query = Vec::new();
        if let Some(agent) = &self.agent {
            query.push(format!("agent={}", percent_encode(agent)));
        }
        if self.fail_closed {
            query.push("fail_closed=1".to_string());
        }
        if query.is_empty() {
            path
        } else {
            format!("{path}?{}", query.join("&"))
        }
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> Result<Option<Args>, String> {
        Args::parse(words.iter().map(|w| w.to_string()))
    }

    #[test]
    fn defaults_and_flags() {
        let args = parse(&["codex"]).unwrap().unwrap();
        assert_eq!(args.url, Url { authority: "127.0.0.1:50052".into(), prefix: String::new() });
        assert_eq!(args.endpoint_path(), "/v1/hooks/codex");
        assert!(!args.fail_closed);
        let args = parse(&["claude-code", "--url=http://localhost:9/x/", "--fail-closed", "--timeout", "0.5",
                           "--agent", "a b"]).unwrap().unwrap();
        assert_eq!(args.url.base(), "http://localhost:9/x");
        assert_eq!(args.endpoint_path(), "/x/v1/hooks/claude-code?agent=a%20b&fail_closed=1");
        assert!(args.fail_closed);
        assert_eq!(args.timeout, Duration::from_millis(500));
        let args = parse(&["codex", "--fail-closed"]).unwrap().unwrap();
        assert_eq!(args.endpoint_path(), "/v1/hooks/codex?fail_closed=1");
    }

    #[test]
    fn bad_flags_name_the_flag() {
        assert!(parse(&[]).unwrap_err().contains("HOST is missing"));
        assert!(parse(&["codex", "--timeout", "0"]).unwrap_err().starts_with("--timeout"));
        assert!(parse(&["codex", "--url", "https://h:1"]).unwrap_err().contains("loopwarden hook"));
        assert!(parse(&["codex", "--url"]).unwrap_err().contains("--url needs a value"));
        assert!(parse(&["codex", "--bogus"]).unwrap_err().contains("unknown flag --bogus"));
        assert!(parse(&["../x"]).unwrap_err().contains("HOST"));
        assert_eq!(Url::parse("http://h").unwrap().authority, "h:80");
    }
}
