//! `attn-trace serve` (docs/SERVE.md): the API answers the command line's bytes, also one
//! request after another on a kept-alive connection, refuses what a request may not do (files,
//! other models, other websites, oversized bodies), stays up under concurrent requests and
//! stops on SIGTERM with exit 0.

use crate::common::{cmd, root};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) fn model() -> String {
    root().join("fixtures/decoders/llama-gqa").to_string_lossy().into_owned()
}

/// A running server, killed if the test fails before it stops it.
pub(crate) struct Server {
    pub child: Child,
    pub port: u16,
    /// Its standard error's lines after the first.
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn start(extra: &[&str], dir: &Path) -> Server {
        Server::serving(&["--model", &model()], extra, dir)
    }

    /// A server of the model `model` names (its flags: `--model M`, or the toy model's).
    pub fn serving(model: &[&str], extra: &[&str], dir: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_attn-trace"))
            .args(["serve", "--port", "0"])
            .args(model)
            .args(extra)
            .current_dir(dir)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut server = Server { child, port: 0, log: Arc::default() };
        let first = lines.next().expect("a line on stderr").unwrap();
        let port =
            first.strip_prefix("attn-trace serve: listening on http://127.0.0.1:").and_then(|p| p.strip_suffix('/'));
        server.port = port.unwrap_or_else(|| panic!("not the start line: {first}")).parse().unwrap();
        // Keep reading stderr so that the server never blocks on a full pipe.
        let log = Arc::clone(&server.log);
        std::thread::spawn(move || lines.map_while(Result::ok).for_each(|l| log.lock().unwrap().push(l)));
        server
    }

    /// One request on its own connection: (status, body).
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Vec<u8>) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
        if !headers.iter().any(|(k, _)| *k == "Host") {
            head += &format!("Host: 127.0.0.1:{}\r\n", self.port);
        }
        // What the page sends; a POST without it is refused (docs/SERVE.md, "Security").
        if method == "POST" && !headers.iter().any(|(k, _)| *k == "Content-Type") {
            head += "Content-Type: application/json\r\n";
        }
        for (k, v) in headers {
            head += &format!("{k}: {v}\r\n");
        }
        head += "\r\n";
        s.write_all(head.as_bytes()).unwrap();
        // A server may answer (413) before reading the whole body, and close.
        let _ = s.write_all(body);
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        let split = out.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head");
        let status = String::from_utf8_lossy(&out[9..12]).parse().unwrap();
        (status, out[split + 4..].to_vec())
    }

    pub fn trace(&self, args: &[&str]) -> (u16, Vec<u8>) {
        let body = serde_json::json!({ "args": args }).to_string();
        self.send("POST", "/api/trace", &[("Content-Type", "application/json")], body.as_bytes())
    }

    /// SIGTERM, and the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        for _ in 0..100 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the server did not stop within 10 s of SIGTERM");
    }
}

/// The next answer on a kept-alive connection, `buf` holding what was read beyond the last one:
/// (status, head, body), the body as long as its Content-Length says.
pub(crate) fn next_answer(s: &mut TcpStream, buf: &mut Vec<u8>) -> (u16, String, Vec<u8>) {
    let mut chunk = [0u8; 8192];
    let mut fill = |buf: &mut Vec<u8>| match s.read(&mut chunk).unwrap() {
        0 => panic!("the server closed the connection mid-answer"),
        n => buf.extend_from_slice(&chunk[..n]),
    };
    let end = loop {
        match buf.windows(4).position(|w| w == b"\r\n\r\n") {
            Some(end) => break end,
            None => fill(buf),
        }
    };
    let head = String::from_utf8(buf[..end].to_vec()).unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|n| n.trim().parse().unwrap()))
        .expect("a Content-Length");
    while buf.len() < end + 4 + length {
        fill(buf);
    }
    let rest = buf.split_off(end + 4 + length);
    let body = buf.split_off(end + 4);
    *buf = rest;
    (head[9..12].parse().unwrap(), head, body)
}

pub(crate) fn error_of(body: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(body).expect("a JSON error");
    v["error"].as_str().expect("an error line").to_string()
}

#[test]
fn the_api_answers_the_command_lines_json_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    let cases: [&[&str]; 3] = [
        &["The capital of France is"],
        &["The capital of France is", "--ablate", "0.1,1.0"],
        &["Hello world", "--steps", "weights", "--top-k", "3"],
    ];
    for args in cases {
        let (status, body) = server.trace(args);
        assert_eq!(status, 200, "{args:?}: {}", String::from_utf8_lossy(&body));
        let cli = cmd().args(args).args(["--model", &model(), "--format", "json"]).output().unwrap();
        assert!(cli.status.success());
        if body != cli.stdout {
            std::fs::write("/tmp/serve-api.json", &body).unwrap();
            std::fs::write("/tmp/serve-cli.json", &cli.stdout).unwrap();
        }
        assert!(body == cli.stdout, "{args:?}: the API's bytes differ from the command line's");
    }
    let (status, page) = server.send("GET", "/", &[], b"");
    assert_eq!(status, 200);
    let page = String::from_utf8(page).unwrap();
    assert!(page.contains("attn-trace serve") && !page.contains("https://") && !page.contains("src=\"http"));
    assert!(page.contains(&format!("{:?}", model())), "the page knows the server's model flags");
    let (status, html) = server.send("POST", "/api/page", &[], br#"{"args": ["The capital"]}"#);
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&html).contains("overview-grid"));
    // The page's own request: that page and the JSON document's predictions, from one trace.
    let (status, view) = server.send("POST", "/api/view", &[], br#"{"args": ["The capital"]}"#);
    assert_eq!(status, 200);
    let view: serde_json::Value = serde_json::from_slice(&view).unwrap();
    assert_eq!(view["page"].as_str().unwrap().as_bytes(), &html[..], "/api/view's page is /api/page's");
    let (_, doc) = server.trace(&["The capital"]);
    let doc: serde_json::Value = serde_json::from_slice(&doc).unwrap();
    assert_eq!(view["predictions"], doc["predictions"], "/api/view's predictions are the document's");
    assert!(server.stop().success());
}

/// What the page's two interventions send (docs/SERVE.md): a click on the large map's cell is
/// `--knockout L.H:Q->K` (`L:Q->K` in the mean over heads), the corrupted prompt `--patch
/// CORRUPTED --metric A B`. Each answer is the command line's `--format json`, byte for byte;
/// prompts of different token counts get the command's own one-line error, and a patch
/// request still names no file.
#[test]
fn a_knockout_and_a_patch_answer_the_command_lines_json_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    let patch = ["my shoes are small, my feet are", "--patch", "my shoes are big, my feet are"];
    let metric = ["--metric", " big", " small"];
    let cases: [Vec<&str>; 4] = [
        vec!["The capital of France is", "--knockout", "1.2:3->1"],
        vec!["The capital of France is", "--knockout", "1.2:3->1", "--knockout", "0:2->0", "--average-heads"],
        [&patch[..], &metric].concat(),
        [&patch[..], &metric, &["--patch-what", "resid", "--ablate", "0.1", "--knockout", "1.0:4->2"]].concat(),
    ];
    let plain = server.trace(&["The capital of France is"]).1;
    for args in &cases {
        let (status, body) = server.trace(args);
        assert_eq!(status, 200, "{args:?}: {}", String::from_utf8_lossy(&body));
        let cli = cmd().args(args).args(["--model", &model(), "--format", "json"]).output().unwrap();
        assert!(cli.status.success(), "{args:?}");
        assert!(body == cli.stdout, "{args:?}: the API's bytes differ from the command line's");
        let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
        if args.contains(&"--patch") {
            assert!(doc["patching"]["rows"].as_array().is_some_and(|r| !r.is_empty()), "{args:?}: no grid");
        } else {
            assert!(body != plain, "{args:?}: the knockout changed nothing");
        }
    }
    // The page's own request draws the --html page's patching grid.
    let patched = [&patch[..], &metric].concat();
    let body = serde_json::json!({ "args": patched }).to_string();
    let (status, view) = server.send("POST", "/api/view", &[], body.as_bytes());
    assert_eq!(status, 200);
    let view: serde_json::Value = serde_json::from_slice(&view).unwrap();
    assert!(view["page"].as_str().unwrap().contains("<section id=\"patching\">"));
    let refused: [&[&str]; 3] = [
        &["The capital of France is", "--patch", "The capital of Italy is not", "--metric", " a", " b"],
        &["The capital of France is", "--patch", "The capital of Italy is"],
        &["The capital of France is", "--knockout", "1.2:3->99"],
    ];
    for args in refused {
        let (status, body) = server.trace(args);
        assert_eq!(status, 400, "{args:?}");
        let cli = cmd().args(args).args(["--model", &model(), "--format", "json"]).output().unwrap();
        assert_eq!(cli.status.code(), Some(2), "{args:?}");
        let line = String::from_utf8(cli.stderr).unwrap();
        assert_eq!(format!("attn-trace: {}\n", error_of(&body)), line, "{args:?}");
    }
    let (status, body) = server.trace(&["x", "--patch", "y", "--save-trace=x.npz"]);
    assert_eq!((status, error_of(&body).contains("not in a request")), (400, true));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a request wrote a file");
    assert!(server.stop().success());
}

/// The page's generation and attribution boxes (docs/SERVE.md) send `--generate N` and
/// `--attribute ANSWER [FOIL]`: each answer is the command line's `--format json`, byte for
/// byte, the page's own request draws the `--html` page's sections, and a generation past the
/// server's cap (128 tokens) is refused in one line naming it.
#[test]
fn a_generation_and_an_attribution_answer_the_command_lines_json_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    let attribute = ["my shoes are small, my feet are", "--attribute", " big", " small"];
    let cases: [&[&str]; 4] = [
        &["The capital of France is", "--generate", "6"],
        &["The capital of France is", "--generate", "4", "--ablate", "1.2", "--baseline"],
        &attribute,
        &["my shoes are small, my feet are", "--attribute", " big", "--ablate", "0.1"],
    ];
    for args in cases {
        let (status, body) = server.trace(args);
        assert_eq!(status, 200, "{args:?}: {}", String::from_utf8_lossy(&body));
        let cli = cmd().args(args).args(["--model", &model(), "--format", "json"]).output().unwrap();
        assert!(cli.status.success(), "{args:?}");
        assert!(body == cli.stdout, "{args:?}: the API's bytes differ from the command line's");
        let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let (what, list) =
            if args.contains(&"--generate") { ("generation", "tokens") } else { ("attribution", "terms") };
        assert!(doc[what][list].as_array().is_some_and(|t| !t.is_empty()), "{args:?}: no {what}");
    }
    for (args, section) in [(cases[0], "generation"), (&attribute[..], "attribution")] {
        let body = serde_json::json!({ "args": args }).to_string();
        let (status, view) = server.send("POST", "/api/view", &[], body.as_bytes());
        assert_eq!(status, 200);
        let view: serde_json::Value = serde_json::from_slice(&view).unwrap();
        let page = view["page"].as_str().unwrap();
        assert!(page.contains(&format!("<section id=\"{section}\"")), "/api/view draws the {section} section");
    }
    let (status, body) = server.trace(&["The capital", "--generate", "129"]);
    assert_eq!(status, 400);
    assert_eq!(
        error_of(&body),
        "--generate 129: a request to the server generates at most 128 tokens (pass --generate 128 or fewer, or \
         run the command line for a longer one)"
    );
    let (_, page) = server.send("GET", "/", &[], b"");
    assert!(String::from_utf8(page).unwrap().contains("id=\"generate\" min=\"1\" max=\"128\""), "the page's cap");
    // The command's own checks still come first: 0 tokens is its message, not the cap's.
    let (status, body) = server.trace(&["The capital", "--generate", "0"]);
    assert_eq!((status, error_of(&body).starts_with("--generate: 0 tokens")), (400, true));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a request wrote a file");
    assert!(server.stop().success());
}

#[test]
fn bad_options_get_the_commands_message_and_nothing_names_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    for args in [&["The capital", "--layer", "99"][..], &["The capital", "--no-such-flag"], &["x", "--top-k", "NaN"]] {
        let (status, body) = server.trace(args);
        assert_eq!(status, 400, "{args:?}");
        let cli = cmd().args(args).args(["--model", &model(), "--format", "json"]).output().unwrap();
        assert_eq!(cli.status.code(), Some(2));
        let line = String::from_utf8(cli.stderr).unwrap();
        assert_eq!(format!("attn-trace: {}\n", error_of(&body)), line, "{args:?}");
    }
    let named: [&[&str]; 7] = [
        &["x", "--save-trace", "x.npz"],
        &["x", "--save-weights=w.safetensors"],
        &["x", "--html", "x.html"],
        &["x", "--model", "other"],
        &["--file", "/etc/passwd"],
        &["-"],
        &["x", "--format", "table"],
    ];
    for args in named {
        let (status, body) = server.trace(args);
        assert_eq!(status, 400, "{args:?}");
        assert!(error_of(&body).contains("not in a request"), "{args:?}: {}", error_of(&body));
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a request wrote a file");
    let (status, body) = server.send("POST", "/api/trace", &[], b"{\"args\": [1]}");
    assert_eq!((status, error_of(&body).starts_with("the body must be")), (400, true));
    assert!(server.stop().success());
}

#[test]
fn other_sites_and_oversized_bodies_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    let ok = br#"{"args": ["x"]}"#;
    let (status, _) = server.send("GET", "/", &[("Host", "evil.example")], b"");
    assert_eq!(status, 403, "DNS rebinding: a foreign Host");
    let (status, _) = server.send("POST", "/api/trace", &[("Host", "attacker.test:80")], ok);
    assert_eq!(status, 403);
    let (status, _) = server.send("POST", "/api/trace", &[("Origin", "http://evil.example")], ok);
    assert_eq!(status, 403, "a cross-site POST");
    let same = format!("http://localhost:{}", server.port);
    let host = format!("localhost:{}", server.port);
    let (status, _) = server.send("POST", "/api/trace", &[("Host", &host), ("Origin", &same)], ok);
    assert_eq!(status, 200, "the page's own origin");
    let big = format!("{{\"args\": [\"{}\"]}}", "a ".repeat(40_000));
    let (status, _) = server.send("POST", "/api/trace", &[], big.as_bytes());
    assert_eq!(status, 413);
    let (status, _) = server.send("GET", "/etc/passwd", &[], b"");
    assert_eq!(status, 404);
    assert!(server.stop().success());
}

#[test]
fn another_address_needs_allow_remote() {
    let out = cmd().args(["serve", "--host", "0.0.0.0", "--port", "0", "--model", &model()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-remote"));
}

#[test]
fn twenty_concurrent_requests_are_all_answered_and_sigterm_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--queue", "2"], dir.path());
    let want =
        cmd().args(["The capital of France is", "--model", &model(), "--format", "json"]).output().unwrap().stdout;
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..20)
            .map(|_| {
                s.spawn(|| {
                    let (status, body) = server.trace(&["The capital of France is"]);
                    match status {
                        200 => assert!(body == want, "a concurrent answer differs"),
                        503 => assert!(error_of(&body).starts_with("busy: "), "{}", error_of(&body)),
                        other => panic!("status {other}"),
                    }
                    status
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(statuses.contains(&200), "{statuses:?}");
    let (status, _) = server.trace(&["after the rush"]);
    assert_eq!(status, 200, "the server still answers");
    assert!(server.stop().success());
}

/// Keep-alive (docs/SERVE.md): requests one after another on one connection, and two sent at
/// once (pipelined), each get their own answer, the command line's bytes; `Connection: close`
/// is honoured, and an idle connection is closed after the keep-alive limit (5 s).
#[test]
fn requests_on_one_kept_alive_connection_each_get_their_own_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    let prompts = ["The capital of France is", "Hello world", "a b c d e"];
    let want: Vec<Vec<u8>> = prompts
        .iter()
        .map(|p| cmd().args([p, "--model", &model(), "--format", "json"]).output().unwrap().stdout)
        .collect();
    let request = |prompt: &str, close: bool| {
        let body = serde_json::json!({ "args": [prompt] }).to_string();
        let connection = if close { "Connection: close\r\n" } else { "" };
        format!(
            "POST /api/trace HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{connection}Content-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            server.port,
            body.len()
        )
    };
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut buf = Vec::new();
    // One after another, the page among them.
    for (i, p) in prompts.iter().enumerate() {
        s.write_all(request(p, false).as_bytes()).unwrap();
        let (status, head, body) = next_answer(&mut s, &mut buf);
        assert_eq!(status, 200, "request {i}: {}", String::from_utf8_lossy(&body));
        assert!(head.contains("Connection: keep-alive"), "{head}");
        assert!(body == want[i], "request {i} on the kept connection: not the command line's bytes");
    }
    let get = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n", server.port);
    s.write_all(get.as_bytes()).unwrap();
    let (status, _, page) = next_answer(&mut s, &mut buf);
    assert!(status == 200 && String::from_utf8_lossy(&page).contains("attn-trace serve"));
    // Pipelined: two requests in one write, answered in order; the second closes.
    s.write_all((request(prompts[1], false) + &request(prompts[0], true)).as_bytes()).unwrap();
    for (i, close) in [(1, false), (0, true)] {
        let (status, head, body) = next_answer(&mut s, &mut buf);
        assert!(status == 200 && body == want[i], "pipelined request for {:?}", prompts[i]);
        assert_eq!(head.contains("Connection: close"), close, "{head}");
    }
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(buf.is_empty() && rest.is_empty(), "nothing after the last answer, and the connection closed");
    // An idle connection is given up after the keep-alive limit.
    let mut idle = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    idle.write_all(request(prompts[2], false).as_bytes()).unwrap();
    let (status, _, body) = next_answer(&mut idle, &mut buf);
    assert!(status == 200 && body == want[2]);
    let since = std::time::Instant::now();
    let mut rest = Vec::new();
    idle.read_to_end(&mut rest).unwrap();
    let waited = since.elapsed().as_secs_f64();
    assert!(rest.is_empty() && (3.0..30.0).contains(&waited), "closed after {waited:.1} s idle, not about 5 s");
    assert!(server.stop().success());
}
