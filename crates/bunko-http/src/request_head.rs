//! Raw request targets as curl sends them, before hyper parses the request.
//!
//! CouchDB's and Cloudant's docs type URLs such as `/db/_design/d/_view/v?keys=["a"]` or
//! `/db/_all_docs?startkey="a"`, and `curl -g` sends them as typed: raw `"`, `[`, `{`, `|`, `\`,
//! `^`, `` ` `` and non-ASCII bytes in the request target. CouchDB accepts them; the `http`
//! crate under hyper refuses them (with an empty `400`, before any of our code runs) and
//! neither hyper nor httparse has an option for it. So [`Framer`] sits between the socket
//! and hyper ([`crate::listener`]) and percent-encodes those bytes in the target of every
//! request line: `"` becomes `%22`, which the router and the query parser decode back to `"`
//! exactly as CouchDB decodes `%22` (and as `+` in a query is a space for both).
//!
//! Only request lines may change, so the framer follows HTTP/1.1 message framing: it holds
//! each request head until it is complete (at most [`MAX_HEAD`] bytes), checks it with
//! httparse as hyper will, then lets the body through untouched, counting `Content-Length`
//! bytes or walking `Transfer-Encoding: chunked` chunks, and starts over at the next request
//! (keep-alive and pipelining). A head that is still malformed is replaced by a request
//! carrying [`BAD_REQUEST_HEADER`], which [`answer_malformed`] answers with CouchDB's JSON
//! `400 bad_request`; the connection then closes, since the rest of the stream has no known
//! framing. Anything the framer cannot follow (an HTTP/2 preface, an upgrade, a malformed
//! chunk) switches it to passing every later byte through as it is, so it never alters a
//! body.

use axum::extract::Request;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The largest request head accepted (request line and headers, after encoding).
pub const MAX_HEAD: usize = 256 * 1024;
/// As many headers as hyper accepts by default.
const MAX_HEADERS: usize = 100;
/// Carries the reason of a malformed request to [`answer_malformed`].
pub const BAD_REQUEST_HEADER: &str = "x-bunko-bad-request";
/// The start of an HTTP/2 prior-knowledge connection.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n";

/// The answer to a request that the framer found malformed: CouchDB's JSON `400`, before
/// anything else sees it (`crate::headers::middleware` asks first).
pub fn answer_malformed(req: &Request) -> Option<Response> {
    let reason = req.headers().get(BAD_REQUEST_HEADER)?;
    let reason = String::from_utf8_lossy(reason.as_bytes()).into_owned();
    let mut response = ApiError::bad_request(reason).into_response();
    response.headers_mut().insert("connection", "close".parse().expect("valid"));
    Some(response)
}

/// Whether byte `b` may stay as it is in a request target. Everything else from `!` up
/// (the `http` crate's refusals and all non-ASCII) is percent-encoded; control bytes and
/// spaces are left for httparse to refuse.
fn keeps(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%#".contains(&b)
}

/// `head` with the target of its request line percent-encoded where needed.
pub fn normalise(head: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(head.len() + 64);
    let start = head.iter().position(|b| *b != b'\r' && *b != b'\n').unwrap_or(head.len());
    let line_end = head[start..].iter().position(|b| *b == b'\n').map_or(head.len(), |i| start + i);
    let Some(space) = head[start..line_end].iter().position(|b| *b == b' ') else {
        return head.to_vec();
    };
    let target_start = start + space + 1;
    let target_end = head[target_start..line_end]
        .iter()
        .position(|b| matches!(b, b' ' | b'\r'))
        .map_or(line_end, |i| target_start + i);
    out.extend_from_slice(&head[..target_start]);
    for &b in &head[target_start..target_end] {
        if b > b' ' && !keeps(b) {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        } else {
            out.push(b);
        }
    }
    out.extend_from_slice(&head[target_end..]);
    out
}

/// Where the framer is in the request stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Gathering a request head.
    Head,
    /// Passing this many body bytes.
    Body(u64),
    /// Walking a chunked body.
    Chunked(Chunk),
    /// After a malformed head: every later byte is dropped.
    Stalled,
    /// Passing everything through unchanged for good.
    Passthrough,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading a chunk-size line.
    Size,
    /// Passing this many chunk-data bytes.
    Data(u64),
    /// Reading the line end after chunk data.
    DataEnd,
    /// Reading trailer lines until an empty one.
    Trailer,
}

/// Rewrites the request stream of one connection; see the module docs.
#[derive(Debug)]
pub struct Framer {
    state: State,
    /// Bytes received and not yet handed on.
    pending: Vec<u8>,
    /// The current line of a chunked body's size or trailer lines.
    line: Vec<u8>,
    /// Whether a request has been seen on this connection.
    started: bool,
    /// How many bytes of the current head were there at the last parse attempt.
    tried: usize,
}

impl Default for Framer {
    fn default() -> Self {
        Self::new()
    }
}

impl Framer {
    pub fn new() -> Self {
        Framer {
            state: State::Head,
            pending: Vec::new(),
            line: Vec::new(),
            started: false,
            tried: 0,
        }
    }

    /// Whether the client may still be sending the current request: a body not yet passed
    /// whole, a partial head, or the rest of a malformed request.
    pub fn mid_request(&self) -> bool {
        match self.state {
            State::Head => !self.pending.is_empty(),
            State::Body(_) | State::Chunked(_) | State::Stalled => true,
            State::Passthrough => false,
        }
    }

    /// Takes bytes from the socket, appending what hyper should read to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        match self.state {
            State::Passthrough => return out.extend_from_slice(input),
            State::Stalled => return,
            _ => self.pending.extend_from_slice(input),
        }
        let mut at = 0;
        while at < self.pending.len() {
            let rest = &self.pending[at..];
            let used = match self.state {
                State::Passthrough => {
                    out.extend_from_slice(rest);
                    rest.len()
                }
                State::Stalled => rest.len(),
                State::Body(left) => {
                    let n = rest.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    out.extend_from_slice(&rest[..n]);
                    self.state =
                        if left == n as u64 { State::Head } else { State::Body(left - n as u64) };
                    n
                }
                State::Chunked(chunk) => self.chunked(chunk, at, out),
                State::Head => match self.head(at, out) {
                    Some(n) => n,
                    None => break,
                },
            };
            at += used;
        }
        self.pending.drain(..at);
    }

    /// The stream ended: hand on a partial head as it is, for hyper to judge.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.pending);
    }

    /// Handles a head starting at `pending[at]`: the bytes used, or `None` if incomplete.
    fn head(&mut self, at: usize, out: &mut Vec<u8>) -> Option<usize> {
        let rest = &self.pending[at..];
        if !self.started {
            if rest.starts_with(H2_PREFACE) {
                self.state = State::Passthrough;
                return Some(0);
            }
            if H2_PREFACE.starts_with(rest) {
                return None;
            }
        }
        // A head sent a byte at a time must not cost a parse per byte: parse again only once
        // a line has ended or a few KiB have arrived since the last attempt.
        let fresh = &rest[self.tried.min(rest.len())..];
        if self.tried > 0
            && !fresh.contains(&b'\n')
            && rest.len() < self.tried + 4096
            && rest.len() < MAX_HEAD
        {
            return None;
        }
        self.tried = rest.len();
        let window = &rest[..rest.len().min(MAX_HEAD)];
        let normal = normalise(window);
        let grown = normal.len() - window.len();
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let parsed = req.parse(&normal);
        let head_len = match parsed {
            Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
            Ok(httparse::Status::Partial) if rest.len() < MAX_HEAD && normal.len() < MAX_HEAD => {
                return None;
            }
            Ok(_) => return Some(self.malformed(at, "request head too large", out)),
            Err(err) => {
                return Some(self.malformed(
                    at,
                    &format!("Bad request line or header: {err}"),
                    out,
                ));
            }
        };
        self.started = true;
        let next = match framing(&req) {
            Ok(next) => next,
            Err(reason) => return Some(self.malformed(at, reason, out)),
        };
        if let Some(path) = req.path
            && axum::http::Uri::try_from(path).is_err()
        {
            return Some(self.malformed(at, "Bad request target", out));
        }
        out.extend_from_slice(&normal[..head_len]);
        self.state = next;
        self.tried = 0;
        Some(head_len - grown)
    }

    /// Replaces a malformed head at `pending[at]` by a request that [`answer_malformed`]
    /// answers, and drops the rest of the stream.
    fn malformed(&mut self, at: usize, reason: &str, out: &mut Vec<u8>) -> usize {
        let reason: String = reason
            .chars()
            .map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' })
            .collect();
        out.extend_from_slice(
            format!(
                "GET / HTTP/1.1\r\nhost: bunko\r\nconnection: close\r\n{BAD_REQUEST_HEADER}: {reason}\r\n\r\n"
            )
            .as_bytes(),
        );
        self.state = State::Stalled;
        self.pending.len() - at
    }

    /// Walks a chunked body from `pending[at]`; the bytes passed on.
    fn chunked(&mut self, chunk: Chunk, at: usize, out: &mut Vec<u8>) -> usize {
        let rest = &self.pending[at..];
        if let Chunk::Data(left) = chunk {
            let n = rest.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            out.extend_from_slice(&rest[..n]);
            let left = left - n as u64;
            self.state = State::Chunked(if left == 0 { Chunk::DataEnd } else { Chunk::Data(left) });
            return n;
        }
        // A line: gather up to its LF.
        let (n, complete) = match rest.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (rest.len(), false),
        };
        out.extend_from_slice(&rest[..n]);
        self.line.extend_from_slice(&rest[..n]);
        if self.line.len() > 4096 {
            self.state = State::Passthrough;
            return n;
        }
        if !complete {
            return n;
        }
        let line = std::mem::take(&mut self.line);
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        self.state = match chunk {
            Chunk::Size => {
                let size = text.split(';').next().unwrap_or("").trim();
                match u64::from_str_radix(size, 16) {
                    Ok(0) => State::Chunked(Chunk::Trailer),
                    Ok(size) => State::Chunked(Chunk::Data(size)),
                    Err(_) => State::Passthrough,
                }
            }
            Chunk::DataEnd if text.is_empty() => State::Chunked(Chunk::Size),
            Chunk::Trailer if text.is_empty() => State::Head,
            Chunk::Trailer => State::Chunked(Chunk::Trailer),
            Chunk::DataEnd | Chunk::Data(_) => State::Passthrough,
        };
        n
    }
}

/// How the body of a parsed head is framed, as hyper frames request bodies.
fn framing(req: &httparse::Request) -> Result<State, &'static str> {
    let mut length: Option<u64> = None;
    let mut chunked = None;
    let mut upgrade = false;
    for header in req.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("content-length") {
            let text = std::str::from_utf8(header.value).map_err(|_| "Bad Content-Length")?;
            for part in text.split(',') {
                let part = part.trim();
                if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                    return Err("Bad Content-Length");
                }
                let value: u64 = part.parse().map_err(|_| "Bad Content-Length")?;
                if length.is_some_and(|l| l != value) {
                    return Err("Conflicting Content-Length headers");
                }
                length = Some(value);
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            let text = String::from_utf8_lossy(header.value);
            let last = text.rsplit(',').next().unwrap_or("").trim().to_ascii_lowercase();
            chunked = Some(last == "chunked");
        } else if name.eq_ignore_ascii_case("upgrade") {
            upgrade = true;
        }
    }
    if req.method == Some("CONNECT") || upgrade {
        return Ok(State::Passthrough);
    }
    match chunked {
        Some(_) if req.version == Some(0) => Err("Transfer-Encoding in an HTTP/1.0 request"),
        Some(true) => Ok(State::Chunked(Chunk::Size)),
        Some(false) => Err("Transfer-Encoding must end with chunked"),
        None => Ok(match length {
            Some(n) if n > 0 => State::Body(n),
            _ => State::Head,
        }),
    }
}

#[cfg(test)]
mod tests;
