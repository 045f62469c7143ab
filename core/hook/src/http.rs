//! One blocking HTTP/1.1 POST: connect, send, read the whole answer, all within one deadline.
//! Enough for a local listener; no keep-alive, proxies or TLS (`loopwarden hook` has TLS).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::args::Url;

/// Larger answers are no hook answer: refuse rather than buffer without end.
const MAX_ANSWER_BYTES: usize = 16 << 20;

pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

pub fn post(url: &Url, target: &str, body: &[u8], token: Option<&str>, timeout: Duration) -> Result<Answer, String> {
    let deadline = Instant::now() + timeout;
    let remaining = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|left| !left.is_zero())
            .ok_or_else(|| format!("no answer within {:.3} s", timeout.as_secs_f64()))
    };
    let addresses = url.authority.to_socket_addrs().map_err(|err| format!("cannot resolve {}: {err}", url.authority))?;
    let mut last_error = format!("{} resolves to no address", url.authority);
    let mut stream = None;
    for address in addresses {
        match TcpStream::connect_timeout(&address, remaining()?) {
            Ok(connected) => {
                stream = Some(connected);
                break;
            }
            Err(err) => last_error = format!("cannot connect to {address}: {err}"),
        }
    }
    let mut stream = stream.ok_or(last_error)?;
    let _ = stream.set_nodelay(true);
    let mut head = format!(
        "POST {target} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\nUser-Agent: loopwarden-hook/{}\r\n",
        url.authority,
        body.len(),
        env!("CARGO_PKG_VERSION")
    );
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    head.push_str("\r\n");
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    stream.set_write_timeout(Some(remaining()?)).map_err(|err| err.to_string())?;
    // A listener may answer before it has read all of a large input (the endpoint's "over
    // --hooks-max-body-bytes" answer) and close: its answer, if it came, still wins.
    let sent = stream.write_all(&request).map_err(|err| format!("sending the hook input: {err}"));
    let mut received = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        stream.set_read_timeout(Some(remaining()?)).map_err(|err| err.to_string())?;
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => received.extend_from_slice(&chunk[..read]),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) if matches!(err.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(format!("no answer within {:.3} s", timeout.as_secs_f64()))
            }
            Err(err) => {
                sent.clone()?;
                return Err(format!("reading the answer: {err}"));
            }
        }
        if received.len() > MAX_ANSWER_BYTES {
            return Err(format!("an answer over {MAX_ANSWER_BYTES} bytes"));
        }
        if let Some(answer) = complete(&received)? {
            return Ok(answer);
        }
    }
    match complete(&received)? {
        Some(answer) => Ok(answer),
        None => sent.and(Err("the connection closed before the whole answer".to_string())),
    }
}

/// The answer once `received` holds all of it (by Content-Length, or chunked to its last chunk),
/// None while more is to come.
fn complete(received: &[u8]) -> Result<Option<Answer>, String> {
    let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") else { return Ok(None) };
    let head = std::str::from_utf8(&received[..end]).map_err(|_| "an answer head that is not text".to_string())?;
    let rest = &received[end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .filter(|_| status_line.starts_with("HTTP/1."))
        .ok_or_else(|| format!("not an HTTP answer: {status_line:?}"))?;
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse::<usize>().map_err(|_| format!("a bad Content-Length {value:?}"))?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    if chunked {
        return Ok(dechunk(rest)?.map(|body| Answer { status, body }));
    }
    match length {
        Some(length) if rest.len() >= length => Ok(Some(Answer { status, body: rest[..length].to_vec() })),
        Some(_) => Ok(None),
        None => Ok(None), // read to the close (Connection: close)
    }
}

fn dechunk(mut rest: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut body = Vec::new();
    loop {
        let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
        let size_text = std::str::from_utf8(&rest[..line_end]).unwrap_or("");
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| format!("a bad chunk size {size_text:?}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(Some(body));
        }
        if rest.len() < size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_length_and_chunked_answers() {
        let answer = complete(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}").unwrap().unwrap();
        assert_eq!((answer.status, answer.body.as_slice()), (200, &b"{}"[..]));
        assert!(complete(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}").unwrap().is_none());
        let chunked = b"HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n1\r\n \r\n0\r\n\r\n";
        let answer = complete(chunked).unwrap().unwrap();
        assert_eq!((answer.status, answer.body.as_slice()), (401, &b"{} "[..]));
        assert!(complete(b"SSH-2.0\r\n\r\n").is_err());
    }
}
