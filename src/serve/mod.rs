//! `attn-trace serve`: the model loaded once behind a local HTTP server, answering the same
//! options as the command line (docs/SERVE.md). `command.rs` reads the serve command line and
//! hands over [`Hooks`]: how a request's options become [`Settings`] (the command's own clap
//! definition and its one-line messages), so this module imports no `cli`.
//!
//! No HTTP crate: `wire.rs` reads a connection's requests on `std::net`, each under a deadline
//! (a slow or silent client gets 408 after [`wire::READ_LIMIT`]), and keeps the socket, so a
//! request's handler sees its client go and cancels its trace, queued or running. tiny_http,
//! used before, gave neither (see `wire.rs`); tokio + hyper would be most of the dependency
//! tree for a server that runs one forward pass at a time.
//!
//! Threads: this one accepts connections into a bounded line ([`PENDING`]; past it a
//! connection is refused with 503); [`HANDLERS`] threads take them, read and check each
//! request (Host, Origin, size, options) and hand its trace to the one model thread through a
//! bounded queue (`worker.rs`); past [`Options::queue`] waiting traces the answer is 503
//! "busy". A handler keeps a connection for its next request (keep-alive) while it is idle
//! for less than [`wire::KEEP_ALIVE`] and no other connection waits in the line. SIGINT and
//! SIGTERM set a flag that every loop checks, so the server stops with exit 0.
//! A request's options are the command line's, less what a shared server caps: a generation
//! of at most [`MAX_GENERATE`] tokens (`limited`).

mod http;
mod wire;
mod worker;

use crate::settings::Settings;
use anyhow::{Context, Result};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The serve command line's help, usage and completions: `command.rs` reads the arguments
/// by hand (the model flags are the main command's, parsed by its own definition), and this
/// definition is what `attn-trace serve --help`, `attn-trace help serve`, `--man` and
/// `--completions` show.
pub fn command() -> clap::Command {
    use clap::{Arg, ArgAction};
    let value = |id: &'static str, name: &'static str, help: &'static str| {
        Arg::new(id).long(id).value_name(name).help(help).action(ArgAction::Set)
    };
    clap::Command::new("serve")
        .about("Load the model once behind a local page and JSON API (docs/SERVE.md)")
        .arg(value("port", "N", "The port; 0 picks a free one [default: 8080]"))
        .arg(value(
            "host",
            "ADDR",
            "The address to listen on; another than 127.0.0.1 needs --allow-remote [default: 127.0.0.1]",
        ))
        .arg(
            Arg::new("allow-remote")
                .long("allow-remote")
                .action(ArgAction::SetTrue)
                .help("Listen on another address than 127.0.0.1 (anyone reaching it can run the model)"),
        )
        .arg(value("queue", "N", "Most traces waiting for the model while one runs; past it: 503 busy [default: 4]"))
        .arg(value(
            "compare-with",
            "B",
            "A second model: the page's \"Compare\" shows attn-trace compare's page of the server's model \
             (A, under test) against B (the reference), docs/COMPARE.md",
        ))
        .arg(
            Arg::new("model flags")
                .value_name("MODEL FLAGS")
                .num_args(0..)
                .trailing_var_arg(true)
                .allow_hyphen_values(true)
                .help("The main command's model flags (--model M, or the toy model's), fixed for every request"),
        )
}

/// How a request's options become settings: `Err` is the command's one-line message.
pub type Parse = dyn Fn(&[String]) -> std::result::Result<Settings, String> + Send + Sync;

/// Work run on the model's thread, making an HTML page (`Hooks::compare`).
pub type Work = Box<dyn FnOnce() -> Result<Vec<u8>> + Send>;

/// How a request's options become a comparison against the server's reference model: `Err`
/// is the command's one-line message.
pub type Compare = dyn Fn(&[String]) -> std::result::Result<Work, String> + Send + Sync;

/// What the command hands over: the option parser, the error line of a failed run, and the
/// command line a request stands for (the server's own model flags added).
pub struct Hooks {
    pub parse: Box<Parse>,
    /// `--compare-with B`: a request's options as `attn-trace compare … --model A --model B
    /// --html`'s page; `None` when the server has no reference model.
    pub compare: Option<Box<Compare>>,
    /// The reference model's `--model` value, shown in "the command for this view".
    pub reference: Option<String>,
    pub error_line: fn(&anyhow::Error) -> String,
    /// The server's model flags, as typed after `serve` (shown in "the command for this view").
    pub model_args: Vec<String>,
}

/// The serve command line's own flags.
pub struct Options {
    pub host: String,
    pub port: u16,
    pub allow_remote: bool,
    /// Most traces that may wait for the model while one runs.
    pub queue: usize,
    /// The settings of a first trace, run before listening: loads the model (and fails early).
    pub warm: Settings,
}

/// Threads reading requests; each waits for its trace's answer. Cheap (the model runs on its
/// own thread), and many, so that a few silent clients, each held up to [`wire::READ_LIMIT`],
/// do not make the others wait.
const HANDLERS: usize = 32;
/// Accepted connections waiting for a handler thread.
const PENDING: usize = 64;
/// Most tokens a request may generate (`--generate N`): a generation holds the model's thread
/// for all its decode steps (a client that leaves stops it; one that waits holds every other
/// request back).
pub const MAX_GENERATE: usize = 128;

/// Set by SIGINT or SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);
/// Accepted connections in the line, not yet taken by a handler thread.
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// Whether a handler should give up an idle kept-alive connection: the server stops, or
/// another connection waits for a handler thread.
fn yielding() -> bool {
    STOP.load(Ordering::SeqCst) || WAITING.load(Ordering::SeqCst) > 0
}

/// Runs the server until SIGINT or SIGTERM.
pub fn run(opts: Options, hooks: Hooks) -> Result<()> {
    let local = matches!(opts.host.as_str(), "127.0.0.1" | "localhost" | "::1");
    if !local && !opts.allow_remote {
        return Err(crate::error::usage(
            format!("--host {}", opts.host),
            "the server listens on 127.0.0.1 unless told otherwise, and anyone who can reach another address can run the model",
            "add --allow-remote to mean it, or reach it through an SSH tunnel (docs/SERVE.md)",
        ));
    }
    let queue = worker::start(opts.warm.clone(), opts.queue, hooks.error_line)?;
    let addr = if opts.host.contains(':') {
        format!("[{}]:{}", opts.host, opts.port)
    } else {
        format!("{}:{}", opts.host, opts.port)
    };
    let listener = TcpListener::bind(&addr).with_context(|| format!("listening on {addr}"))?;
    let port = listener.local_addr().context("the listening address")?.port();
    listener.set_nonblocking(true).context("the listening socket")?;
    watch_signals();
    if !local {
        eprintln!(
            "attn-trace serve: warning: listening on {} (--allow-remote): anyone who can reach it can run the model",
            opts.host
        );
    }
    let shown = if local { "127.0.0.1".to_string() } else { opts.host.clone() };
    eprintln!("attn-trace serve: listening on http://{shown}:{port}/");
    let ctx = Arc::new(http::Context::new(&opts.host, port, limited(hooks), queue));
    let (tx, rx) = mpsc::sync_channel::<(TcpStream, Instant)>(PENDING);
    let rx = Arc::new(Mutex::new(rx));
    let threads: Vec<_> = (0..HANDLERS)
        .map(|_| {
            let (rx, ctx) = (Arc::clone(&rx), Arc::clone(&ctx));
            std::thread::spawn(move || serve_requests(&rx, &ctx))
        })
        .collect();
    accept(&listener, &tx);
    drop(tx);
    for t in threads {
        let _ = t.join();
    }
    eprintln!("attn-trace serve: stopped");
    Ok(())
}

/// `hooks` whose parser also refuses what the command line allows but a request may not ask
/// of a shared server: a generation longer than [`MAX_GENERATE`] tokens (400, one line).
fn limited(mut hooks: Hooks) -> Hooks {
    let parse = hooks.parse;
    hooks.parse = Box::new(move |args: &[String]| {
        let settings = parse(args)?;
        match &settings.generate {
            Some(g) if g.max_new > MAX_GENERATE => Err(format!(
                "--generate {}: a request to the server generates at most {MAX_GENERATE} tokens (pass \
                 --generate {MAX_GENERATE} or fewer, or run the command line for a longer one)",
                g.max_new
            )),
            _ => Ok(settings),
        }
    });
    hooks
}

/// Accepts connections until the stop flag is set.
fn accept(listener: &TcpListener, tx: &SyncSender<(TcpStream, Instant)>) {
    while !STOP.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_nodelay(true);
                WAITING.fetch_add(1, Ordering::SeqCst);
                if let Err(TrySendError::Full((stream, _))) = tx.try_send((stream, Instant::now())) {
                    WAITING.fetch_sub(1, Ordering::SeqCst);
                    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                    let _ = (&stream).write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 16\r\nConnection: close\r\n\r\n{\"error\":\"busy\"}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// One handler thread: connections until the accepting thread stops.
fn serve_requests(rx: &Mutex<Receiver<(TcpStream, Instant)>>, ctx: &http::Context) {
    loop {
        let next = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        match next {
            Ok((stream, accepted)) => {
                WAITING.fetch_sub(1, Ordering::SeqCst);
                http::handle(ctx, stream, accepted)
            }
            Err(_) => return,
        }
    }
}

#[cfg(unix)]
extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// SIGINT and SIGTERM set [`STOP`] (an atomic store is all a signal handler may do).
fn watch_signals() {
    #[cfg(unix)]
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}
