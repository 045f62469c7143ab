//! `loopwarden-hook <dialect>`: the compiled command form of the daemon's HTTP hook endpoints.
//!
//! The host runs it for each hook event with the hook's JSON on stdin. It forwards that JSON
//! unchanged to `<url>/v1/hooks/<dialect>` and prints the daemon's answer: the dialect mapping lives
//! in the daemon, written once. It exists because `loopwarden hook` starts a Python interpreter per
//! event (136–182 ms, twice per tool call); this costs about what a `curl` POST does.
//!
//! Exit codes follow the hook protocols, as `loopwarden hook` does: 0 with the answer on stdout (a
//! deny is an answer), 1 for bad flags or an input the daemon refuses as not the host's hook JSON
//! (HTTP 400), a non-blocking error the host reports and goes on from. When the daemon cannot answer
//! (unreachable, timed out, any other non-200), it prints the host's own "daemon unavailable"
//! answer, the JSON `loopwarden hook` prints: fail open (the default) tells the user the call ran
//! unchecked, `--fail-closed` denies a call about to run (fallback.rs: each dialect's before-tool
//! hooks, in its own format). With `--fail-closed` the daemon is asked to fail closed too
//! (`?fail_closed=1`): an event it answers but refuses (too deep, a NaN, an over-long id) is denied
//! by the daemon, in the host's format; an input it cannot read at all (HTTP 400) is denied here
//! when it is a before-tool event, since an error exit would let the call run.

mod args;
mod fallback;
mod hosts;
mod http;

use std::io::{Read, Write};
use std::process::ExitCode;

use args::Args;
use http::Answer;

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            print!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(message) => return fail(&message),
    };
    let token = match args.token() {
        Ok(token) => token,
        Err(message) => return fail(&message),
    };
    let mut body = Vec::new();
    if let Err(err) = std::io::stdin().lock().read_to_end(&mut body) {
        return fail(&format!("cannot read the hook input on stdin: {err}"));
    }
    let endpoint = format!("{}/v1/hooks/{}", args.url.base(), args.dialect);
    let output = match http::post(&args.url, &args.endpoint_path(), &body, token.as_deref(), args.timeout) {
        Ok(Answer { status: 200, body: answer }) => answer,
        Ok(Answer { status: 400, body: refusal }) if args.fail_closed && fallback::is_before_tool(&args.dialect, &body) => {
            let reason = format!("the daemon could not read this hook input: {}", String::from_utf8_lossy(&refusal).trim());
            eprintln!("loopwarden-hook: {reason}; the call is denied (--fail-closed)");
            fallback::unavailable_answer(&args.dialect, &body, &reason, true)
        }
        Ok(Answer { status: 400, body: refusal }) => {
            // The daemon read the body and found no hook event in it: the same outcome as
            // `loopwarden hook` on an input that is not the host's hook JSON.
            return fail(&format!(
                "not a {} hook input: {}",
                args.dialect,
                String::from_utf8_lossy(&refusal).trim()
            ));
        }
        Ok(Answer { status, body: refusal }) => {
            let reason = format!("the daemon's hook endpoint {endpoint} answered HTTP {status}");
            eprintln!("loopwarden-hook: {reason}: {}", String::from_utf8_lossy(&refusal).trim());
            fallback::unavailable_answer(&args.dialect, &body, &reason, args.fail_closed)
        }
        Err(err) => {
            let reason = format!("the daemon at {} did not answer", args.url.authority);
            eprintln!("loopwarden-hook: {reason}: {err}");
            fallback::unavailable_answer(&args.dialect, &body, &reason, args.fail_closed)
        }
    };
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(trim_end(&output))
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(&format!("cannot write the answer to stdout: {err}")),
    }
}

fn trim_end(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |i| i + 1);
    &bytes[..end]
}

fn fail(message: &str) -> ExitCode {
    eprintln!("loopwarden-hook: {message}");
    ExitCode::from(1)
}
