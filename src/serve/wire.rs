//! HTTP/1.1 requests read from a byte buffer, and answers written as bytes: no sockets here
//! (`reactor.rs` reads and writes them), so every rule is a pure function of what arrived.
//!
//! The rules are RFC 9112's, read strictly where a lenient reading is how requests are
//! smuggled past another parser: lines end in CRLF (a bare LF is refused at once, not waited
//! on), no control character (NUL, a lone CR) in the head, no space before a header's colon,
//! no folded header (a line starting with a space), `Content-Length` one plain number given
//! once, no `Transfer-Encoding` (a body comes with its length; both at once is refused as a
//! smuggling attempt), and one `Host`, `Origin`, `Content-Type` and `Sec-Fetch-Site` each.
//! A refusal of the head is final for the connection: the answer closes it, since where the
//! next request would start is not known.

use std::time::Duration;

/// The longest a kept-alive connection may wait, idle, for its next request (each answer
/// says so in `Keep-Alive`; `reactor.rs` holds to it).
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// Largest request head (request line and headers).
pub const MAX_HEAD: usize = 16 << 10;
/// Largest request body: a prompt and its options, not a document.
pub const MAX_BODY: usize = 64 << 10;
/// Most header lines in one request (a browser sends about 20).
pub const MAX_HEADERS: usize = 64;
/// Headers that a request may give once: two `Content-Length`s, or two `Host`s, are how one
/// parser is made to read a request another reads differently.
const SINGLE: [&str; 6] = ["host", "content-length", "transfer-encoding", "origin", "content-type", "sec-fetch-site"];

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
    /// The header called `name` (any case); the head was refused if it came twice.
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

/// What the bytes read so far hold.
pub enum Parsed {
    /// Not yet a whole request: read more.
    Incomplete,
    /// A request, and how many bytes of the buffer it took (the rest is the next one's).
    Request(Box<Request>, usize),
    /// A head that is refused: the status and the one-line message. The connection closes.
    Refused(u16, String),
}

fn refused(status: u16, line: impl Into<String>) -> Parsed {
    Parsed::Refused(status, line.into())
}

/// Reads the request at the start of `buf`; a body over `max_body` is refused (413) before
/// it is read, and an empty line or two before the request line (which RFC 9112 says to
/// skip) are skipped.
pub fn parse(buf: &[u8], max_body: usize) -> Parsed {
    let skipped = buf.chunks(2).take_while(|c| *c == b"\r\n").count() * 2;
    let buf = &buf[skipped..];
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return unfinished_head(buf);
    };
    if end > MAX_HEAD {
        return refused(431, format!("the request's head is larger than {} KiB", MAX_HEAD >> 10));
    }
    let (mut request, length) = match head(&buf[..end], max_body) {
        Ok(read) => read,
        Err(refusal) => return refusal,
    };
    let body = &buf[end + 4..];
    if body.len() < length {
        return Parsed::Incomplete;
    }
    request.body = body[..length].to_vec();
    Parsed::Request(Box::new(request), skipped + end + 4 + length)
}

/// A head whose end has not arrived: refused at once when it can no longer become a request
/// (a bare LF would otherwise keep the client waiting for a CRLF it never sends), else read on.
fn unfinished_head(buf: &[u8]) -> Parsed {
    if let Some(refusal) = line_endings(buf) {
        return refusal;
    }
    // Not HTTP at all (a TLS handshake, a binary protocol): refused now, not after 10 s.
    if let Some(refusal) = control_character(buf) {
        return refusal;
    }
    if buf.len() > MAX_HEAD {
        return refused(431, format!("the request's head is larger than {} KiB", MAX_HEAD >> 10));
    }
    Parsed::Incomplete
}

/// A line feed without its carriage return, or a carriage return without its line feed (the
/// last byte may be a CR whose LF is still on its way).
fn line_endings(head: &[u8]) -> Option<Parsed> {
    let bare_lf = head.iter().enumerate().any(|(i, &b)| b == b'\n' && (i == 0 || head[i - 1] != b'\r'));
    let bare_cr = head.iter().enumerate().any(|(i, &b)| b == b'\r' && head.get(i + 1).is_some_and(|&n| n != b'\n'));
    (bare_lf || bare_cr).then(|| refused(400, "a line of the request's head does not end in CRLF (a bare LF or CR)"))
}

/// Field values may hold any visible byte and tabs; no other control character anywhere.
fn control_character(head: &[u8]) -> Option<Parsed> {
    let control = |b: &u8| (*b < 0x20 && !matches!(*b, b'\t' | b'\r' | b'\n')) || *b == 0x7f;
    head.iter().any(control).then(|| refused(400, "the request's head holds a control character (NUL or another)"))
}

/// The request line and headers (`head`, without the blank line), and the body's length.
fn head(head: &[u8], max_body: usize) -> Result<(Request, usize), Parsed> {
    if let Some(refusal) = line_endings(head) {
        return Err(refusal);
    }
    if let Some(refusal) = control_character(head) {
        return Err(refusal);
    }
    let head = std::str::from_utf8(head).map_err(|_| refused(400, "the request's head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let (method, target, http11) = request_line(lines.next().unwrap_or(""))?;
    let mut headers: Vec<(String, String)> = Vec::new();
    for line in lines {
        if headers.len() == MAX_HEADERS {
            return Err(refused(431, format!("the request has more than {MAX_HEADERS} headers")));
        }
        headers.push(header_line(line)?);
    }
    for name in SINGLE {
        if headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case(name)).count() > 1 {
            return Err(refused(400, format!("the request has two {} headers", canonical(name))));
        }
    }
    let path = target.split('?').next().unwrap_or("").to_string();
    let request = Request { method: method.to_string(), path, headers, body: Vec::new(), http11 };
    let length = body_length(&request, max_body)?;
    Ok((request, length))
}

/// `METHOD /path HTTP/1.1`: the method, the target (a path, or `*`), and whether HTTP/1.1.
fn request_line(line: &str) -> Result<(&str, &str, bool), Parsed> {
    let malformed = || refused(400, "the request line is not `METHOD /path HTTP/1.1`");
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(malformed());
    };
    if method.is_empty() || !method.bytes().all(is_token) || target.is_empty() {
        return Err(malformed());
    }
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(refused(400, format!("{}: only HTTP/1.1 and HTTP/1.0 are spoken here", shown(version)))),
    };
    // A path; absolute-form (`http://host/…`) is what a proxy is sent, and would name another
    // host than the Host header checked for DNS rebinding.
    if !(target.starts_with('/') || target == "*") {
        return Err(refused(400, format!("{}: the request's target must be a path (/…)", shown(target))));
    }
    Ok((method, target, http11))
}

/// `Name: value`: the name a token right before the colon, the value without its edges' blanks.
fn header_line(line: &str) -> Result<(String, String), Parsed> {
    if line.starts_with([' ', '\t']) {
        return Err(refused(400, "a header line starts with a space (a folded header); send each header on one line"));
    }
    let Some((name, value)) = line.split_once(':') else {
        return Err(refused(400, format!("{}: a header line has no `:`", shown(line))));
    };
    if name.is_empty() || !name.bytes().all(is_token) {
        return Err(refused(400, format!("{}: not a header name (a space before the `:`?)", shown(name))));
    }
    Ok((name.to_string(), value.trim_matches([' ', '\t']).to_string()))
}

/// The body's length: `Content-Length`, one plain number (no sign, no list); a chunked body
/// (`Transfer-Encoding`) is not read.
fn body_length(request: &Request, max_body: usize) -> Result<usize, Parsed> {
    let length = request.header("Content-Length");
    if request.header("Transfer-Encoding").is_some() {
        if length.is_some() {
            return Err(refused(
                400,
                "the request has both Transfer-Encoding and Content-Length (send only the length)",
            ));
        }
        return Err(refused(411, "send the body with a Content-Length, not in chunks (Transfer-Encoding)"));
    }
    let Some(length) = length else { return Ok(0) };
    if length.is_empty() || !length.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refused(400, format!("Content-Length {}: not a number of bytes", shown(length))));
    }
    // Too many digits for any number is as large as too large a number.
    match length.parse::<usize>() {
        Ok(n) if n <= max_body => Ok(n),
        _ => Err(refused(413, format!("the request's body is larger than {} KiB", max_body >> 10))),
    }
}

/// RFC 9110's `tchar`: the characters of a method or a header's name.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `content-length` → `Content-Length`.
fn canonical(name: &str) -> String {
    name.split('-').map(|w| w[..1].to_ascii_uppercase() + &w[1..]).collect::<Vec<_>>().join("-")
}

/// A client's text quoted in a message: escaped, and at most 60 characters.
pub fn shown(s: &str) -> String {
    let head: String = s.chars().take(60).collect();
    let more = if head.len() < s.len() { "…" } else { "" };
    format!("{head:?}{more}")
}

/// `{"code": code, "error": line}`: every error's body, one line of JSON.
pub fn error_body(line: &str, code: u8) -> Vec<u8> {
    serde_json::json!({ "error": line, "code": code }).to_string().into_bytes()
}

/// One answer's bytes: the head and the body. `keep` says whether the connection stays open
/// for the next request; `allow` is a 405's list of methods.
pub fn answer(status: u16, content_type: &str, body: &[u8], keep: bool, allow: Option<&str>) -> Vec<u8> {
    let connection =
        if keep { format!("keep-alive\r\nKeep-Alive: timeout={}", KEEP_ALIVE.as_secs()) } else { "close".to_string() };
    let allow = allow.map(|a| format!("Allow: {a}\r\n")).unwrap_or_default();
    // No other site may frame the page (a click on it would be the user's): X-Frame-Options
    // for older browsers, CSP's frame-ancestors for the rest.
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: {connection}\r\n\
         {allow}Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n\
         Content-Security-Policy: frame-ancestors 'none'\r\nReferrer-Policy: no-referrer\r\n\r\n",
        reason(status),
        body.len()
    );
    let mut whole = head.into_bytes();
    whole.extend_from_slice(body);
    whole
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        _ => "Service Unavailable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(bytes: &[u8]) -> u16 {
        match parse(bytes, 1024) {
            Parsed::Incomplete => 0,
            Parsed::Request(..) => 200,
            Parsed::Refused(status, _) => status,
        }
    }

    #[test]
    fn a_request_is_read_whole_and_the_next_one_left_in_the_buffer() {
        let two = b"POST /api/trace?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nabGET / HTTP/1.1\r\n\r\n";
        let Parsed::Request(request, used) = parse(two, 1024) else { panic!("not a request") };
        assert_eq!(
            (request.method.as_str(), request.path.as_str(), &request.body[..]),
            ("POST", "/api/trace", &b"ab"[..])
        );
        assert_eq!(&two[used..], b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!(status(b"\r\nGET / HTTP/1.1\r\n\r\n"), 200, "an empty line before the request is skipped");
        assert_eq!(status(b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab"), 0, "a body still arriving");
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost: h\r"), 0, "a CR whose LF is on its way");
        assert_eq!(status(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"), 400, "a TLS handshake, at once");
    }

    #[test]
    fn what_one_parser_could_read_differently_from_another_is_refused() {
        let cases: [(&[u8], u16); 16] = [
            (b"GET / HTTP/1.1\nHost: h\n\n", 400),
            (b"GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: h\r\nHost: evil\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: h\r\n x: y\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab", 400),
            (b"POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\nab", 400),
            (b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\nab", 400),
            (b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413),
            (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nab", 400),
            (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n", 411),
            (b"GET http://evil/ HTTP/1.1\r\n\r\n", 400),
            (b"GET / HTTP/1.1 x\r\n\r\n", 400),
            (b"GET / HTTP/2.0\r\n\r\n", 400),
        ];
        for (bytes, want) in cases {
            assert_eq!(status(bytes), want, "{:?}", String::from_utf8_lossy(bytes));
        }
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: a\r\n")).collect();
        assert_eq!(status(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()), 431);
        let long = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(status(long.as_bytes()), 431, "a head over the limit, read in one piece");
        assert_eq!(status(&long.as_bytes()[..MAX_HEAD + 10]), 431, "a head over the limit, still arriving");
    }
}
