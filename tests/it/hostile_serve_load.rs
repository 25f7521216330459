//! `attn-trace serve` under attack, continued (docs/SERVE.md; issue 48): hundreds of idle and
//! slow connections and clients that never read their answers do not lock a healthy client
//! out; a storm of clients that start traces and leave frees the queue at once; options that
//! name a file or device, or change the model, are refused before anything is read; a
//! request's generation and running time are bounded by the server's own limits; and
//! `--allow-remote` says the risk in one line. Each refusal is a one-line JSON error, and a
//! healthy request is answered afterwards.

use crate::common::cmd;
use crate::hostile_serve::{healthy, one_line_error};
use crate::serve::{model, Server};
use crate::serve_load::DEEP_TOY;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A field of `/proc/PID/status` (Linux), e.g. `Threads:` or `VmHWM:` (kB).
fn status_of(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("{field}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

/// A POST of `args` as its raw bytes, kept alive.
fn post(port: u16, args: &[&str]) -> Vec<u8> {
    let body = serde_json::json!({ "args": args }).to_string();
    format!(
        "POST /api/trace HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// 600 connections (past the server's 512), half silent and half sending a head a piece at a
/// time, and three clients that pipeline large answers and never read them: a new client is
/// answered at once (not after the attackers' 10 s), the server holds at most 512 connections
/// on a few threads (not a thread per connection), and its memory stays bounded.
#[test]
fn hundreds_of_idle_slow_and_unread_connections_do_not_lock_a_healthy_client_out() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    let pid = server.child.id();
    let big = post(server.port, &["x", "--generate", "128", "--ignore-eos"]);
    let unread: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            s.write_all(&big.repeat(10)).unwrap();
            s
        })
        .collect();
    let mut held: Vec<TcpStream> = Vec::new();
    for i in 0..600 {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        if i % 2 == 1 {
            let _ = s.write_all(b"POST /api/trace HTTP/1.1\r\nHost: 127.");
        }
        held.push(s);
    }
    let since = Instant::now();
    healthy(&server);
    let waited = since.elapsed();
    eprintln!("with 600 idle or slow connections and 3 unread ones, a request answered in {waited:.2?}");
    assert!(waited < Duration::from_secs(5), "a healthy client waited {waited:?}");
    let (threads, files) = (status_of(pid, "Threads:"), open_files(pid));
    eprintln!("the server: {threads} threads, {files} open files");
    assert!(files <= 512 + 16, "{files} open files: more connections than the cap");
    assert!(threads < 40, "{threads} threads: one per connection?");
    drop((held, unread));
    healthy(&server);
    assert!(status_of(pid, "VmHWM:") < 500 << 10, "peak memory");
    assert!(server.stop().success());
}

/// Forty clients start a long generation and leave together: the traces waiting for the model
/// leave the queue as their clients go, and the running one stops at its next layer, so the
/// next client is not told "busy"; the server's memory stays bounded.
#[test]
fn a_storm_of_clients_that_start_traces_and_leave_frees_the_queue_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serving(&DEEP_TOY, &["--queue", "16"], dir.path());
    let long = post(server.port, &["a b c", "--generate", "128", "--ignore-eos", "--layer", "0"]);
    let storm: Vec<TcpStream> = (0..40)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            s.write_all(&long).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    drop(storm);
    // The handlers look at their clients every 50 ms.
    std::thread::sleep(Duration::from_millis(300));
    let (status, body) = server.trace(&["after the storm", "--layer", "0"]);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let log = server.log.lock().unwrap().clone();
    let (skipped, stopped) = (
        log.iter().filter(|l| l.contains("left before its trace ran; skipped")).count(),
        log.iter().filter(|l| l.contains("left while its trace ran; stopped")).count(),
    );
    eprintln!("the storm: {skipped} queued traces skipped, {stopped} running stopped");
    assert!(skipped >= 10 && stopped <= 1, "{log:?}");
    assert!(status_of(server.child.id(), "VmHWM:") < 500 << 10, "peak memory");
    assert!(server.stop().success());
}

/// Every option that takes a path (to read or write, a device or /proc included), and every
/// flag of the toy model's definition, is refused with one line before anything is opened; a
/// sentence that looks like a path or `@file` is text.
#[test]
fn options_that_name_files_or_devices_or_change_the_model_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serving(&[], &[], dir.path());
    let p = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let (html, svg, npz, st) = (p("x.html"), p("x.svg"), p("x.npz"), p("w.safetensors"));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["x", "--steer", "0:/dev/zero"], "--steer"),
        (vec!["x", "--steer=0:/etc/passwd@2"], "--steer"),
        (vec!["x", "--chat", "--chat-template", "/etc/passwd"], "--chat-template"),
        (vec!["x", "--chat-template=/dev/urandom"], "--chat-template"),
        (vec!["x", "--html", &html], "--html"),
        (vec!["x", "--svg", &svg], "--svg"),
        (vec!["x", "--save-trace", &npz], "--save-trace"),
        (vec!["x", "--save-weights", &st], "--save-weights"),
        (vec!["x", "--weights", "/dev/zero"], "--weights"),
        (vec!["x", "--vocab", "/etc/passwd"], "--vocab"),
        (vec!["x", "--input", "/dev/stdin"], "--input"),
        (vec!["--file", "/proc/self/environ"], "--file"),
        (vec!["--batch", "/etc/passwd"], "--batch"),
        (vec!["x", "--model", "/"], "--model"),
        (vec!["x", "--model=ollama:llama3"], "--model"),
        (vec!["-"], "-"),
        (vec!["x", "--format", "table"], "--format"),
        (vec!["x", "--max-memory", "1T"], "--max-memory"),
        (vec!["x", "--completions", "bash"], "--completions"),
        (vec!["x", "--help"], "--help"),
        (vec!["x", "--layers", "1000000"], "--layers"),
        (vec!["x", "--d-model", "100000"], "--d-model"),
        (vec!["x", "--max-len", "100000000"], "--max-len"),
        (vec!["x", "--positions", "learned"], "--positions"),
        (vec!["x", "--seed", "7"], "--seed"),
        (vec!["x", "--causal"], "--causal"),
    ];
    for (args, flag) in &cases {
        let since = Instant::now();
        let (status, body) = server.trace(args);
        assert_eq!(status, 400, "{args:?}: {}", String::from_utf8_lossy(&body));
        let line = one_line_error(&body);
        assert!(line.starts_with(&format!("{flag}: not in a request to the server")), "{args:?}: {line}");
        assert!(since.elapsed() < Duration::from_secs(5), "{args:?}: answered after {:?}", since.elapsed());
    }
    // Text, not paths: the sentence and the corrupted prompt are traced as typed.
    let (status, body) = server.trace(&["@/etc/passwd"]);
    let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(status == 200 && doc["input"]["sentence"] == "@/etc/passwd");
    let (status, body) = server.trace(&["/etc/passwd", "--system", "--html", "--chat"]);
    assert!(status == 400 && !String::from_utf8_lossy(&body).contains("root:"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a request left a file");
    healthy(&server);
    assert!(server.stop().success());
}

/// A generation past the server's 128 tokens is refused; a trace that runs past
/// `--trace-limit` is stopped and answered 503 with one line, and the next request is
/// answered; `--queue` and `--trace-limit` out of range are refused at start.
#[test]
fn generation_and_running_time_are_bounded_by_the_servers_limits() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    for (n, says) in [("129", "at most 128 tokens"), ("99999999999999999999999", "invalid value")] {
        let (status, body) = server.trace(&["x", "--generate", n]);
        assert!(status == 400 && one_line_error(&body).contains(says), "{n}: {}", String::from_utf8_lossy(&body));
    }
    healthy(&server);
    assert!(server.stop().success());
    // 64 layers: a three-word trace takes a moment, a 2,000-token one many seconds.
    let toy = ["--layers", "64", "--d-model", "64", "--heads", "2", "--max-len", "2048", "--causal"];
    let deep = Server::serving(&toy, &["--trace-limit", "1"], dir.path());
    let words: Vec<String> = (0..2000).map(|i| format!("w{}", i % 50)).collect();
    let since = Instant::now();
    let (status, body) = deep.trace(&[&words.join(" "), "--layer", "0"]);
    let took = since.elapsed();
    assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
    let line = one_line_error(&body);
    assert!(line.contains("limit of 1 s (--trace-limit)"), "{line}");
    eprintln!("a trace past --trace-limit 1 answered after {took:.2?}");
    assert!(took < Duration::from_secs(10), "stopped after {took:?}");
    let (status, _) = deep.trace(&["a b c", "--layer", "0"]);
    assert_eq!(status, 200, "the next request");
    assert!(deep.stop().success());
    for bad in [["--queue", "65"], ["--queue", "-1"], ["--trace-limit", "0"], ["--trace-limit", "1e9"]] {
        let out = cmd().args(["serve", "--port", "0"]).args(bad).args(["--model", &model()]).output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(out.stdout.is_empty() && err.lines().count() == 1 && err.contains(bad[0]), "{bad:?}: {err}");
    }
}

/// `--host 0.0.0.0 --allow-remote`: one warning line naming the risk, then the address; the
/// Host is still checked (any IP address, since the server listens on all; a name is a
/// rebinding site's).
#[test]
fn allow_remote_says_the_risk_in_one_line_and_still_checks_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_attn-trace"))
        .args(["serve", "--port", "0", "--host", "0.0.0.0", "--allow-remote", "--model", &model()])
        .current_dir(dir.path())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let warning = lines.next().unwrap().unwrap();
    let listening = lines.next().unwrap().unwrap();
    assert!(warning.starts_with("attn-trace serve: warning: listening on 0.0.0.0 (--allow-remote)"), "{warning}");
    assert!(warning.contains("no authentication") && warning.contains("anyone who can reach"), "{warning}");
    let port =
        listening.strip_prefix("attn-trace serve: listening on http://0.0.0.0:").and_then(|p| p.strip_suffix('/'));
    let port: u16 = port.unwrap_or_else(|| panic!("{listening}")).parse().unwrap();
    std::thread::spawn(move || lines.for_each(drop));
    let server = Server { child, port, log: Default::default() };
    for (host, want) in [("127.0.0.1", 200), ("192.168.1.5", 200), ("[::1]", 200), ("evil.example", 403)] {
        let (status, _) = server.send("GET", "/", &[("Host", &format!("{host}:{port}"))], b"");
        assert_eq!(status, want, "Host {host}");
    }
    assert!(server.stop().success());
}
