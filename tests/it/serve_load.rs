//! `attn-trace serve` under load (docs/SERVE.md, issue 35): 320 requests from 16 concurrent
//! connections, a tenth malformed and a tenth abandoned half-way, every valid answer the
//! command line's bytes, every malformed one a 4xx with a JSON error, the peak memory bounded;
//! a silent or slow client is answered 408 within the read limit without stopping the others;
//! a queued trace whose client has gone does not run, and a running one stops mid-way; idle
//! kept-alive connections give their handler threads up to a new connection.

use crate::common::cmd;
use crate::serve::{error_of, model, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const REQUESTS: usize = 320;
const CLIENTS: usize = 16;
/// The server's peak resident memory (VmHWM) on the toy model, generously.
const PEAK_BOUND_KB: u64 = 500 << 10;

const PROMPTS: [&[&str]; 5] = [
    &["The capital of France is"],
    &["Hello world", "--top-k", "3"],
    &["a b c d e", "--ablate", "0.1"],
    &["Once upon a time", "--steps", "weights"],
    &["x y z", "--layer", "1"],
];

fn malformed(server: &Server, i: usize) -> (u16, Vec<u8>) {
    let json = [("Content-Type", "application/json")];
    match i % 5 {
        0 => server.send("POST", "/api/trace", &json, b"{\"args\": [\"unfinished"),
        1 => server.send("POST", "/api/trace", &[("Origin", "http://evil.example")], br#"{"args": ["x"]}"#),
        2 => server.send("POST", "/api/trace", &json, format!("{{\"args\": [\"{}\"]}}", "a".repeat(70_000)).as_bytes()),
        3 => server.trace(&["x", "--top-k", "NaN"]),
        _ => server.trace(&["x", "--save-trace", "/tmp/x.npz"]),
    }
}

/// Half a request, then the connection closed.
fn abandon(port: u16, i: usize) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let body = br#"{"args": ["The capital of France is"]}"#;
    let head = format!(
        "POST /api/trace HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let _ = match i % 3 {
        0 => s.write_all(&head.as_bytes()[..head.len() / 2]),
        1 => s.write_all(head.as_bytes()).and_then(|()| s.write_all(&body[..body.len() / 2])),
        _ => Ok(()),
    };
}

fn peak_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn three_hundred_requests_from_sixteen_clients_get_the_right_bytes_and_memory_stays_bounded() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    // The queue holds every handler thread's trace: a valid request is never "busy" here.
    let server = Server::start(&["--queue", "16"], dir.path());
    let want: Vec<Vec<u8>> = PROMPTS
        .iter()
        .map(|args| {
            let out = cmd().args(*args).args(["--model", &model(), "--format", "json"]).output().unwrap();
            assert!(out.status.success(), "{args:?}");
            out.stdout
        })
        .collect();
    let next = AtomicUsize::new(0);
    let counts: Vec<[usize; 3]> = std::thread::scope(|s| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| {
                s.spawn(|| {
                    let mut count = [0; 3];
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= REQUESTS {
                            return count;
                        }
                        if i.is_multiple_of(10) {
                            let (status, body) = malformed(&server, i / 10);
                            assert!((400..500).contains(&status), "request {i}: status {status}");
                            assert!(!error_of(&body).is_empty(), "request {i}");
                            count[1] += 1;
                        } else if i % 10 == 5 {
                            abandon(server.port, i / 10);
                            count[2] += 1;
                        } else {
                            let (status, body) = server.trace(PROMPTS[i % PROMPTS.len()]);
                            assert_eq!(status, 200, "request {i}: {}", String::from_utf8_lossy(&body));
                            assert!(body == want[i % PROMPTS.len()], "request {i}: not the command line's bytes");
                            count[0] += 1;
                        }
                    }
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let total = counts.iter().fold([0; 3], |a, c| [a[0] + c[0], a[1] + c[1], a[2] + c[2]]);
    assert_eq!(total, [256, 32, 32], "valid, malformed, abandoned");
    let (status, body) = server.trace(PROMPTS[0]);
    assert!(status == 200 && body == want[0], "the server still answers");
    let peak = peak_kb(server.child.id());
    eprintln!("serve under load: {REQUESTS} requests in {:.1} s, peak RSS {peak} kB", started.elapsed().as_secs_f64());
    assert!(peak < PEAK_BOUND_KB, "peak resident memory {peak} kB over {PEAK_BOUND_KB} kB");
    assert!(dir.path().read_dir().unwrap().next().is_none(), "a request wrote a file");
    assert!(server.stop().success());
}

/// (status, seconds) of the answer on `s`.
fn answered(mut s: TcpStream, since: Instant) -> (u16, f64) {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let status = String::from_utf8_lossy(out.get(9..12).unwrap_or(b"000")).parse().unwrap_or(0);
    (status, since.elapsed().as_secs_f64())
}

#[test]
fn silent_and_slow_clients_get_408_within_the_read_limit_and_others_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    let start = Instant::now();
    // Ten silent connections, and one sending a byte a second.
    let silent: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(("127.0.0.1", server.port)).unwrap()).collect();
    let slow = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let head = format!("POST /api/trace HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 40\r\n\r\n", server.port);
    let statuses = std::thread::scope(|s| {
        let mut writer = slow.try_clone().unwrap();
        s.spawn(move || {
            for byte in head.bytes() {
                if writer.write_all(&[byte]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(1000));
            }
        });
        let waits: Vec<_> = silent.into_iter().chain([slow]).map(|c| s.spawn(move || answered(c, start))).collect();
        std::thread::sleep(Duration::from_millis(500));
        let (status, body) = server.trace(&["still answered"]);
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        assert!(start.elapsed() < Duration::from_secs(5), "a request waited {:?} behind silent ones", start.elapsed());
        waits.into_iter().map(|w| w.join().unwrap()).collect::<Vec<_>>()
    });
    for (status, secs) in statuses {
        assert_eq!(status, 408, "a silent or slow client");
        assert!((9.0..14.0).contains(&secs), "answered after {secs:.1} s, not the 10 s limit");
    }
    assert!(server.stop().success());
}

/// Eight long traces (generations of 128 tokens on the 512-layer toy model: seconds each, in
/// either build) sent at once and left at once: the first is stopped while it runs, and the
/// others, whose clients were gone before their turn, are skipped; the next request is
/// answered.
#[test]
fn a_queued_trace_whose_client_has_gone_does_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serving(&DEEP_TOY, &["--queue", "16"], dir.path());
    let body = br#"{"args": ["a b c", "--generate", "128", "--ignore-eos", "--layer", "0"]}"#;
    let head = format!(
        "POST /api/trace HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        server.port,
        body.len()
    );
    // Eight whole requests, each closed as soon as it is sent: all but the first are still
    // queued behind the running one when their clients have gone.
    for _ in 0..8 {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        s.write_all(head.as_bytes()).and_then(|()| s.write_all(body)).unwrap();
    }
    let left = || server.log.lock().unwrap().iter().filter(|l| l.contains("a client left")).count();
    let start = Instant::now();
    while left() < 8 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, _) = server.trace(&["after them", "--layer", "0"]);
    assert_eq!(status, 200);
    let skipped = server.log.lock().unwrap().iter().filter(|l| l.contains("left before its trace ran")).count();
    eprintln!("abandoned while queued: {skipped} of 8 skipped");
    assert!(left() == 8 && skipped >= 3, "{skipped} of 8 abandoned traces skipped: {:?}", server.log.lock().unwrap());
    assert!(server.stop().success());
}

/// A toy model of 512 layers: a 2,000-token trace takes over a minute here (debug build, 2
/// shared cores; 128 of these layers took 17 s from the command line), one layer a tenth of a
/// second, and a three-word trace a moment.
/// `--lm-head own` gives it a head to generate with; a request may not change the model.
pub(crate) const DEEP_TOY: [&str; 11] =
    ["--layers", "512", "--d-model", "64", "--heads", "2", "--max-len", "2048", "--causal", "--lm-head", "own"];

/// Sends a trace of `args` on a connection of its own, and leaves after `secs`.
fn left_after(port: u16, args: &[String], secs: u64) {
    let body = serde_json::json!({ "args": args }).to_string();
    let head = format!(
        "POST /api/trace HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(head.as_bytes()).and_then(|()| s.write_all(body.as_bytes())).unwrap();
    std::thread::sleep(Duration::from_secs(secs));
}

/// A client that leaves while its trace runs stops it before the trace's next layer
/// (docs/SERVE.md): one long forward pass, then a generation of 128 tokens (the server's cap;
/// a pass per token, several seconds here too). Each time the next request is answered, with the command
/// line's bytes, long before the abandoned trace would have ended, after the server's line
/// saying it stopped, and the server goes on answering.
#[test]
fn a_running_trace_whose_client_has_gone_stops_and_the_next_request_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::serving(&DEEP_TOY, &[], dir.path());
    let short = ["a b c", "--layer", "0"];
    let want = cmd().args(short).args(DEEP_TOY).args(["--format", "json"]).output().unwrap();
    assert!(want.status.success(), "{}", String::from_utf8_lossy(&want.stderr));
    let words: Vec<String> = (0..2000).map(|i| format!("w{}", i % 50)).collect();
    let long = [words.join(" "), "--layer".into(), "0".into(), "--steps".into(), "weights".into()];
    let generation: Vec<String> =
        ["a b c", "--generate", "128", "--ignore-eos", "--layer", "0"].map(String::from).into();
    let stopped =
        || server.log.lock().unwrap().iter().filter(|l| l.contains("left while its trace ran; stopped")).count();
    for (i, abandoned) in [&long[..], &generation[..]].into_iter().enumerate() {
        // The queue is empty: the trace starts at once and is some layers in when it is left.
        left_after(server.port, abandoned, 2);
        let left = Instant::now();
        let (status, answer) = server.trace(&short);
        let waited = left.elapsed();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
        assert!(answer == want.stdout, "the next answer is the command line's bytes");
        // The line is written before the next trace starts; the test's reader may lag a moment.
        for _ in 0..50 {
            if stopped() > i {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(stopped(), i + 1, "abandoned trace {i} was not stopped: {:?}", server.log.lock().unwrap());
        eprintln!("abandoned running trace {i}: the next request answered {:.2} s later", waited.as_secs_f64());
        assert!(waited < Duration::from_secs(30), "the next answer waited {waited:?}: the abandoned trace ran on");
    }
    let (status, again) = server.trace(&short);
    assert!(status == 200 && again == want.stdout, "the server still answers");
    assert!(server.stop().success());
}

/// Idle kept-alive connections hold no handler thread that another connection needs
/// (docs/SERVE.md): with every handler thread (32) keeping an idle connection, a new
/// connection's request is answered at once, not after the 5 s keep-alive limit.
#[test]
fn idle_kept_alive_connections_give_their_threads_up_to_a_new_connection() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    let get = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n", server.port);
    let idle: Vec<TcpStream> = (0..32)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            s.write_all(get.as_bytes()).unwrap();
            let (status, head, _) = crate::serve::next_answer(&mut s, &mut Vec::new());
            assert!(status == 200 && head.contains("Connection: keep-alive"), "{head}");
            s
        })
        .collect();
    let since = Instant::now();
    let (status, body) = server.trace(&["The capital of France is"]);
    let waited = since.elapsed();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    eprintln!("with 32 idle kept-alive connections, a new request answered in {:.2} s", waited.as_secs_f64());
    assert!(waited < Duration::from_secs(3), "the new connection waited {waited:?} for an idle one's thread");
    drop(idle);
    assert!(server.stop().success());
}
