//! HTTP/1.1 on a `std::net::TcpStream`, as little of it as the server needs: requests one
//! after another on a connection ([`Conn`]; HTTP/1.1's keep-alive, unless the client says
//! `Connection: close`), each one's head and `Content-Length` body read under one deadline
//! ([`READ_LIMIT`], from the connection's accept for its first request, from the first byte
//! for the next ones), so a client that sends nothing, or a byte at a time (slowloris), holds
//! a handler thread for at most that long and gets 408. Between requests a connection may be
//! idle for at most [`KEEP_ALIVE`] ([`Conn::next`]). tiny_http, used before, parses a
//! connection's head on a thread of its own pool with no timeout and gives no access to the
//! socket, so neither a deadline nor the disconnect probe ([`gone`]) could be set through it.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The longest a client may take to send its whole request, from the connection's accept.
pub const READ_LIMIT: Duration = Duration::from_secs(10);
/// The longest an answer may take to be written.
const WRITE_LIMIT: Duration = Duration::from_secs(10);
/// The longest a kept-alive connection may wait, idle, for its next request.
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// How often an idle connection's handler asks whether it should give the connection up.
const IDLE_TICK: Duration = Duration::from_millis(100);
/// Largest request head (request line and headers).
const MAX_HEAD: usize = 16 << 10;

/// A request, read whole.
pub struct Request {
    pub method: String,
    /// The target without its query.
    pub path: String,
    headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// HTTP/1.1 (HTTP/1.0 closes after each answer).
    http11: bool,
}

impl Request {
    /// The first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Whether the client lets the connection stay open for another request: HTTP/1.1 without
    /// `Connection: close`.
    pub fn keeps_alive(&self) -> bool {
        let close =
            self.header("Connection").is_some_and(|c| c.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")));
        self.http11 && !close
    }
}

/// A client's connection and what it sent beyond the request read last (the start of the next).
pub struct Conn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

/// Why no request was read: an answer to send (status, message), or nobody to answer.
pub enum Failed {
    Answer(u16, String),
    Gone,
}

impl Conn {
    pub fn new(stream: TcpStream) -> Conn {
        Conn { stream, buf: Vec::new() }
    }

    /// Reads the next request before `deadline`; a body over `max_body` is refused (413)
    /// before it is read.
    pub fn read_request(&mut self, deadline: Instant, max_body: usize) -> Result<Request, Failed> {
        let (request, rest) = read_request(&mut self.stream, std::mem::take(&mut self.buf), deadline, max_body)?;
        self.buf = rest;
        Ok(request)
    }

    /// Waits, idle, for the next request's first byte: `false` when the client closed, after
    /// [`KEEP_ALIVE`], or as soon as `give_up()` (the server stops, or other connections wait
    /// for a handler thread).
    pub fn next(&mut self, give_up: &dyn Fn() -> bool) -> bool {
        let until = Instant::now() + KEEP_ALIVE;
        let mut byte = [0u8; 1];
        while self.buf.is_empty() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let _ = self.stream.set_read_timeout(Some(left.min(IDLE_TICK)));
            match self.stream.peek(&mut byte) {
                Ok(0) => return false,
                Ok(_) => return true,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
                Err(_) => return false,
            }
            if give_up() {
                return false;
            }
        }
        true
    }
}

/// Reads one request from `stream` (after `buf`, already read) before `deadline`: the request
/// and the bytes read beyond it.
fn read_request(
    stream: &mut TcpStream,
    mut buf: Vec<u8>,
    deadline: Instant,
    max_body: usize,
) -> Result<(Request, Vec<u8>), Failed> {
    let end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buf.len() > MAX_HEAD {
            return Err(Failed::Answer(431, format!("the request's head is larger than {} KiB", MAX_HEAD >> 10)));
        }
        read_some(stream, deadline, &mut buf)?;
    };
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| bad("the request's head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let (method, target, version) = (first.next(), first.next(), first.next());
    let (Some(method), Some(target), Some(v)) = (method, target, version) else {
        return Err(bad("the request line is not `METHOD /path HTTP/1.1`"));
    };
    if !v.starts_with("HTTP/1.") {
        return Err(bad("only HTTP/1.x is spoken here"));
    }
    let mut headers = Vec::new();
    for line in lines {
        let (k, v) = line.split_once(':').ok_or_else(|| bad("a header line has no `:`"))?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let path = target.split('?').next().unwrap_or("").to_string();
    let http11 = v == "HTTP/1.1";
    let mut request = Request { method: method.to_string(), path, headers, body: Vec::new(), http11 };
    if request.header("Transfer-Encoding").is_some() {
        return Err(Failed::Answer(411, "send the body with a Content-Length, not in chunks".into()));
    }
    let length = match request.header("Content-Length") {
        None => 0,
        Some(n) => n.parse::<usize>().map_err(|_| bad("the Content-Length is not a number"))?,
    };
    if length > max_body {
        return Err(Failed::Answer(413, format!("the request is larger than {} KiB", max_body >> 10)));
    }
    let mut body = buf.split_off(end + 4);
    while body.len() < length {
        read_some(stream, deadline, &mut body)?;
    }
    let rest = body.split_off(length);
    request.body = body;
    Ok((request, rest))
}

fn bad(line: &str) -> Failed {
    Failed::Answer(400, line.to_string())
}

/// One read into `buf`, waiting no later than `deadline`.
fn read_some(stream: &mut TcpStream, deadline: Instant, buf: &mut Vec<u8>) -> Result<(), Failed> {
    // Past the deadline what has already arrived is still read (a connection that waited for a
    // handler thread is not the client's fault); what has not, is not waited for.
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    let timeout = || Failed::Answer(408, format!("the request took longer than {} s to arrive", READ_LIMIT.as_secs()));
    let _ = stream.set_read_timeout(Some(left));
    let mut chunk = [0u8; 8192];
    match stream.read(&mut chunk) {
        Ok(0) => Err(Failed::Gone),
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(())
        }
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Err(timeout()),
        Err(e) if e.kind() == ErrorKind::Interrupted => Ok(()),
        Err(_) => Err(Failed::Gone),
    }
}

/// Writes one answer: `true` when it was written and the connection stays open for the next
/// request (`keep`). Else it is closed; when the request's body was not read (`unread`), the
/// rest is drained for a moment first, so that closing does not reset the connection before
/// the client has read the answer.
pub fn respond(conn: &mut Conn, (status, content_type): (u16, &str), body: &[u8], keep: bool, unread: bool) -> bool {
    let keep = keep && !unread;
    let connection =
        if keep { format!("keep-alive\r\nKeep-Alive: timeout={}", KEEP_ALIVE.as_secs()) } else { "close".to_string() };
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: {connection}\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\r\n",
        reason(status),
        body.len()
    );
    let stream = &mut conn.stream;
    let _ = stream.set_write_timeout(Some(WRITE_LIMIT));
    // One write for head and body: no small packet waiting on the client's delayed ACK.
    let mut whole = head.into_bytes();
    whole.extend_from_slice(body);
    if stream.write_all(&whole).is_err() {
        return false;
    }
    if keep {
        return true;
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    if unread {
        let until = Instant::now() + Duration::from_secs(1);
        let mut sink = Vec::new();
        while sink.len() < (1 << 20) && read_some(stream, until, &mut sink).is_ok() {}
    }
    false
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        _ => "Service Unavailable",
    }
}

/// Whether the client of `stream` has gone: its side closed (end of file) or reset. A client
/// that only shut down its writing half looks gone too (no browser does that).
#[cfg(unix)]
pub fn gone(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut byte = 0u8;
    // SAFETY: a one-byte peek into a local buffer on a socket this stream owns; it neither
    // blocks (MSG_DONTWAIT) nor consumes anything (MSG_PEEK).
    let n = unsafe {
        libc::recv(stream.as_raw_fd(), (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
    };
    if n == 0 {
        return true;
    }
    n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock
}

/// Elsewhere no probe: a queued trace runs.
#[cfg(not(unix))]
pub fn gone(_: &TcpStream) -> bool {
    false
}
