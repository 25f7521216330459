//! `attn-trace serve` under attack, over real sockets (docs/SERVE.md, "Security"; issue 48):
//! DNS rebinding (a Host that is not this server), cross-site and simple POSTs (CSRF),
//! smuggled and malformed heads, oversized heads and bodies, and paths outside the API. Each
//! case is answered at once with its status and a one-line JSON error, `{"code": 2, "error":
//! …}`, a head refused closes its connection, and a healthy request is answered afterwards.
//! The slow, idle and abandoning clients and the options that name files are in
//! `hostile_serve_load.rs`.

use crate::serve::{error_of, next_answer, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// `template` with `{host}` (this server's `127.0.0.1:PORT`), `{port}`, and `{body}` (a
/// Content-Length, the blank line and a valid request body) filled in.
fn fill(template: &str, port: u16) -> Vec<u8> {
    let body = r#"{"args": ["a b c"]}"#;
    let body = format!("Content-Length: {}\r\n\r\n{body}", body.len());
    template
        .replace("{host}", &format!("127.0.0.1:{port}"))
        .replace("{port}", &port.to_string())
        .replace("{body}", &body)
        .into_bytes()
}

/// `bytes` sent on a connection of their own: the answer's status, head and body, how long it
/// took, and whether the server closed the connection after it.
fn exchange(port: u16, bytes: &[u8]) -> (u16, String, Vec<u8>, Duration, bool) {
    let since = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // A server may answer and close before the whole request is sent.
    let _ = s.write_all(bytes);
    let (status, head, body) = next_answer(&mut s, &mut Vec::new());
    let took = since.elapsed();
    let closed = head.contains("Connection: close") && {
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut rest = Vec::new();
        matches!(s.read_to_end(&mut rest), Ok(0)) || rest.is_empty()
    };
    (status, head, body, took, closed)
}

/// The body's one-line JSON error (code 2): its message.
pub(crate) fn one_line_error(body: &[u8]) -> String {
    assert!(!body.contains(&b'\n'), "not one line: {}", String::from_utf8_lossy(body));
    let v: serde_json::Value = serde_json::from_slice(body).expect("a JSON error");
    assert_eq!(v["code"], 2, "{v}");
    error_of(body)
}

/// A request that nothing above should disturb.
pub(crate) fn healthy(server: &Server) {
    let (status, body) = server.trace(&["still answered"]);
    assert_eq!(status, 200, "a healthy request afterwards: {}", String::from_utf8_lossy(&body));
}

/// Each case: the request (a template for [`fill`]), the status, a part of the error line,
/// and whether the connection closes (a head refused: where the next request starts is not
/// known).
fn check(server: &Server, cases: &[(&str, u16, &str, bool)]) {
    for &(template, want, says, closes) in cases {
        let (status, head, body, took, closed) = exchange(server.port, &fill(template, server.port));
        assert_eq!(status, want, "{template:?}: {}", String::from_utf8_lossy(&body));
        let line = one_line_error(&body);
        assert!(line.contains(says), "{template:?}: {line:?} does not say {says:?}");
        assert!(took < Duration::from_secs(5), "{template:?}: answered after {took:?}, not at once");
        assert_eq!(closed, closes, "{template:?}: connection closed? {head}");
        healthy(server);
    }
}

#[test]
fn a_host_that_is_not_this_server_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    check(
        &server,
        &[
            ("GET / HTTP/1.1\r\n\r\n", 400, "no Host header", false),
            ("GET / HTTP/1.0\r\n\r\n", 400, "no Host header", true),
            ("GET / HTTP/1.1\r\nHost: {host}\r\nHost: evil.example\r\n\r\n", 400, "two Host headers", true),
            ("GET / HTTP/1.1\r\nHost: evil.example\r\nhost: {host}\r\n\r\n", 400, "two Host headers", true),
            ("GET / HTTP/1.1\r\nHost: evil.example\r\n {host}\r\n\r\n", 400, "folded header", true),
            ("GET / HTTP/1.1\r\nHost: evil@{host}\r\n\r\n", 400, "not HOST:PORT", false),
            ("GET / HTTP/1.1\r\nHost: ::1:{port}\r\n\r\n", 400, "not HOST:PORT", false),
            ("GET / HTTP/1.1\r\nHost: {host}/x\r\n\r\n", 400, "not HOST:PORT", false),
            ("GET / HTTP/1.1\r\nHost: evil.example:{port}\r\n\r\n", 403, "DNS rebinding", false),
            ("GET / HTTP/1.1\r\nHost: localhost.:{port}\r\n\r\n", 403, "DNS rebinding", false),
            ("GET / HTTP/1.1\r\nHost: localhost.attacker.com:{port}\r\n\r\n", 403, "DNS rebinding", false),
            ("GET / HTTP/1.1\r\nHost: 0.0.0.0:{port}\r\n\r\n", 403, "DNS rebinding", false),
            ("GET / HTTP/1.1\r\nHost: 192.168.1.5:{port}\r\n\r\n", 403, "DNS rebinding", false),
            ("GET / HTTP/1.1\r\nHost: [::ffff:127.0.0.1]:{port}\r\n\r\n", 403, "DNS rebinding", false),
            ("GET / HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", 403, "DNS rebinding", false),
            ("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 403, "DNS rebinding", false),
        ],
    );
    // The same address spelt otherwise, and a name's case, are this server.
    for host in ["LOCALHOST", "[0:0:0:0:0:0:0:1]", "[::1]", "localhost"] {
        let get = format!("GET / HTTP/1.1\r\nHost: {host}:{}\r\nConnection: close\r\n\r\n", server.port);
        let (status, _, page, _, _) = exchange(server.port, get.as_bytes());
        assert!(status == 200 && String::from_utf8_lossy(&page).contains("attn-trace serve"), "{host}");
    }
    assert!(server.stop().success());
}

#[test]
fn a_post_another_site_could_send_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    let json = "Content-Type: application/json\r\n";
    let post = |headers: &str| format!("POST /api/trace HTTP/1.1\r\nHost: {{host}}\r\n{headers}{{body}}");
    // A repeated header is refused with the head, which closes the connection.
    let cases = [
        (post(&format!("{json}Origin: null\r\n")), 403, "Origin \"null\"", false),
        (post(&format!("{json}Origin: http://evil.example\r\n")), 403, "its own page", false),
        (post(&format!("{json}Origin: http://localhost:{{port}}\r\n")), 403, "its own page", false),
        (post(&format!("{json}Origin: http://127.0.0.1:1\r\n")), 403, "its own page", false),
        (post(&format!("{json}Origin: https://{{host}}\r\n")), 403, "its own page", false),
        (post(&format!("{json}Origin: http://{{host}}\r\nOrigin: http://evil.example\r\n")), 400, "two Origin", true),
        (post(&format!("{json}Sec-Fetch-Site: cross-site\r\n")), 403, "Sec-Fetch-Site", false),
        (post(&format!("{json}Sec-Fetch-Site: same-site\r\n")), 403, "Sec-Fetch-Site", false),
        (post("Content-Type: text/plain\r\n"), 415, "application/json", false),
        (post("Content-Type: text/plain\r\nOrigin: http://evil.example\r\n"), 403, "its own page", false),
        (post("Content-Type: application/x-www-form-urlencoded\r\n"), 415, "application/json", false),
        (post("Content-Type: multipart/form-data; boundary=x\r\n"), 415, "application/json", false),
        (post(""), 415, "Content-Type none", false),
        (post(&format!("{json}Content-Type: text/plain\r\n")), 400, "two Content-Type", true),
    ];
    let cases: Vec<_> = cases.iter().map(|(t, status, says, closes)| (t.as_str(), *status, *says, *closes)).collect();
    check(&server, &cases);
    // The page's own request: same origin, JSON.
    let own = "POST /api/trace HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\nSec-Fetch-Site: same-origin\r\n\
               Content-Type: application/json; charset=utf-8\r\nConnection: close\r\n{body}";
    assert_eq!(exchange(server.port, &fill(own, server.port)).0, 200);
    assert!(server.stop().success());
}

#[test]
fn smuggled_malformed_and_oversized_heads_are_refused_at_once_and_close_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    let head = "POST /api/trace HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n";
    let with = |more: &str| format!("{head}{more}");
    let many: String = (0..70).map(|i| format!("X-{i}: a\r\n")).collect();
    let cases = [
        (with("Transfer-Encoding: chunked\r\n{body}"), 400, "both Transfer-Encoding and Content-Length"),
        (with("Transfer-Encoding: chunked\r\n\r\n13\r\n{\"args\": [\"a b c\"]}\r\n0\r\n\r\n"), 411, "Content-Length"),
        (with("Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"), 411, "Content-Length"),
        (with("Content-Length: 5\r\n{body}"), 400, "two Content-Length"),
        (with("Content-Length: +19\r\n\r\n{\"args\": [\"a b c\"]}"), 400, "not a number of bytes"),
        (with("Content-Length: -1\r\n\r\n"), 400, "not a number of bytes"),
        (with("Content-Length: 19, 19\r\n\r\n{\"args\": [\"a b c\"]}"), 400, "not a number of bytes"),
        (with("Content-Length: 0x13\r\n\r\n"), 400, "not a number of bytes"),
        (with("Content-Length: 99999999999999999999999999\r\n\r\n"), 413, "larger than 64 KiB"),
        (with("Content-Length: 70000\r\n\r\n"), 413, "larger than 64 KiB"),
        (with("X-A: 1\n{body}"), 400, "CRLF"),
        ("GET / HTTP/1.1\nHost: {host}\n\n".into(), 400, "CRLF"),
        (with("X-A: 1\rX-B: 2\r\n{body}"), 400, "CRLF"),
        (with("X-A: a\0b\r\n{body}"), 400, "control character"),
        (with("Content-Length : 19\r\n\r\n{\"args\": [\"a b c\"]}"), 400, "not a header name"),
        (with("X-A: a\r\n b\r\n{body}"), 400, "folded header"),
        (with("no colon here\r\n{body}"), 400, "has no `:`"),
        (with(&format!("{many}{{body}}")), 431, "more than 64 headers"),
        (with(&format!("X-A: {}\r\n{{body}}", "a".repeat(17 << 10))), 431, "larger than 16 KiB"),
        ("GET / HTTP/2.0\r\nHost: {host}\r\n\r\n".into(), 400, "only HTTP/1.1"),
        ("GET / HTTP/1.1 extra\r\nHost: {host}\r\n\r\n".into(), 400, "request line"),
        ("GET  / HTTP/1.1\r\nHost: {host}\r\n\r\n".into(), 400, "request line"),
        ("GET http://evil.example/ HTTP/1.1\r\nHost: {host}\r\n\r\n".into(), 400, "must be a path"),
        ("GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\n\r\n".into(), 400, "must be a path"),
    ];
    let cases: Vec<_> = cases.iter().map(|(t, status, says)| (t.as_str(), *status, *says, true)).collect();
    check(&server, &cases);
    let mut raw = fill(head, server.port);
    raw.extend_from_slice(b"X-A: \xff\xfe\r\n\r\n");
    let (status, _, body, _, closed) = exchange(server.port, &raw);
    assert!(status == 400 && closed && one_line_error(&body).contains("not UTF-8"));
    // Not HTTP at all (the start of a TLS handshake, no line end yet): refused at once.
    let (status, _, body, took, closed) = exchange(server.port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03");
    assert!(status == 400 && closed && one_line_error(&body).contains("control character"));
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    healthy(&server);
    assert!(server.stop().success());
}

/// A body shorter than its Content-Length, the client then done sending: answered at once
/// (not after the 10 s read limit); a request whose pipelined successor is malformed: the
/// first answered, the second refused, the connection closed.
#[test]
fn a_body_cut_short_and_a_malformed_pipelined_request_are_answered_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    let since = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let cut = format!(
        "POST /api/trace HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"args\"",
        server.port
    );
    s.write_all(cut.as_bytes()).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let (status, _, body) = next_answer(&mut s, &mut Vec::new());
    assert_eq!(status, 400);
    assert!(one_line_error(&body).contains("ended before the request did"));
    assert!(since.elapsed() < Duration::from_secs(5), "answered after {:?}", since.elapsed());
    let good =
        fill("POST /api/trace HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{body}", server.port);
    let bad = fill(
        "POST /api/trace HTTP/1.1\r\nHost: {host}\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",
        server.port,
    );
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&[&good[..], &good, &bad].concat()).unwrap();
    let mut buf = Vec::new();
    for _ in 0..2 {
        let (status, head, _) = next_answer(&mut s, &mut buf);
        assert!(status == 200 && head.contains("keep-alive"), "{head}");
    }
    let (status, head, body) = next_answer(&mut s, &mut buf);
    assert!(status == 400 && head.contains("Connection: close"), "{head}");
    assert!(one_line_error(&body).contains("two Content-Length"));
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(buf.is_empty() && rest.is_empty(), "nothing after the refusal");
    healthy(&server);
    assert!(server.stop().success());
}

#[test]
fn no_path_reads_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: {{host}}\r\n\r\n");
    let long = format!("/{}", "a".repeat(10_000));
    let cases = [
        (get("/../../../../etc/passwd"), 404, "no such page: \"/../../../../etc/passwd\""),
        (get("/%2e%2e/%2e%2e/etc/passwd"), 404, "no such page"),
        (get("/..%2f..%2fetc%2fpasswd"), 404, "no such page"),
        (get("//etc/passwd"), 404, "no such page"),
        (get("/api/../../../etc/passwd"), 404, "no such page"),
        (get("/./"), 404, "no such page"),
        (get("/page.html"), 404, "no such page"),
        (get("/\u{ff}\u{202e}"), 404, "no such page"),
        (get("/proc/self/environ"), 404, "no such page"),
        (get(&long), 404, "no such page: \"/aaaa"),
        (get("/api/trace"), 405, "answers POST only"),
        ("HEAD / HTTP/1.1\r\nHost: {host}\r\n\r\n".into(), 405, "answers GET only"),
        ("DELETE / HTTP/1.1\r\nHost: {host}\r\n\r\n".into(), 405, "answers GET only"),
        ("OPTIONS /api/trace HTTP/1.1\r\nHost: {host}\r\n\r\n".into(), 405, "answers POST only"),
        ("OPTIONS * HTTP/1.1\r\nHost: {host}\r\n\r\n".into(), 404, "no such page"),
        (
            "POST /../etc/passwd HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{body}".into(),
            404,
            "no such page",
        ),
    ];
    let cases: Vec<_> = cases.iter().map(|(t, status, says)| (t.as_str(), *status, *says, false)).collect();
    check(&server, &cases);
    // A query names nothing: the page, as at `/`; an error line is short whatever the path.
    for path in ["/?file=/etc/passwd", "/?../../etc/passwd"] {
        let (status, _, page, _, _) = exchange(server.port, &fill(&get(path), server.port));
        assert!(status == 200 && !String::from_utf8_lossy(&page).contains("root:"), "{path}");
    }
    let (_, _, body, _, _) = exchange(server.port, &fill(&get(&long), server.port));
    assert!(body.len() < 300, "the error quotes a long path whole: {} bytes", body.len());
    assert!(server.stop().success());
}
