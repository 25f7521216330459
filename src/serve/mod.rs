//! `attn-trace serve`: the model loaded once behind a local HTTP server, answering the same
//! options as the command line (docs/SERVE.md). `command.rs` reads the serve command line and
//! hands over [`Hooks`]: how a request's options become [`Settings`] (the command's own clap
//! definition and its one-line messages), so this module imports no `cli`.
//!
//! The HTTP crate is `tiny_http`: synchronous, four small dependencies and no async runtime,
//! so it adds seconds, not minutes, to a build on two cores (tokio + hyper would add the
//! largest part of the dependency tree for a server that runs one forward pass at a time).
//!
//! Threads: [`HANDLERS`] threads take requests from the listener, check them (Host, Origin,
//! size, options) and hand each trace to the one model thread through a bounded queue
//! (`worker.rs`); past [`Options::queue`] waiting traces the answer is 503 "busy". SIGINT and
//! SIGTERM set a flag that every loop checks, so the server stops with exit 0.

mod http;
mod worker;

use crate::settings::Settings;
use anyhow::{Context, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How a request's options become settings: `Err` is the command's one-line message.
pub type Parse = dyn Fn(&[String]) -> std::result::Result<Settings, String> + Send + Sync;

/// What the command hands over: the option parser, the error line of a failed run, and the
/// command line a request stands for (the server's own model flags added).
pub struct Hooks {
    pub parse: Box<Parse>,
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

/// Threads reading requests; each waits for its trace's answer.
const HANDLERS: usize = 8;

/// Set by SIGINT or SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);

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
    let server = tiny_http::Server::http(&addr)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("listening on {addr}"))?;
    let port = server.server_addr().to_ip().map(|a| a.port()).context("the listening address")?;
    watch_signals();
    if !local {
        eprintln!(
            "attn-trace serve: warning: listening on {} (--allow-remote): anyone who can reach it can run the model",
            opts.host
        );
    }
    let shown = if local { "127.0.0.1".to_string() } else { opts.host.clone() };
    eprintln!("attn-trace serve: listening on http://{shown}:{port}/");
    let ctx = Arc::new(http::Context::new(&opts.host, port, hooks, queue));
    let server = Arc::new(server);
    let threads: Vec<_> = (0..HANDLERS)
        .map(|_| {
            let (server, ctx) = (Arc::clone(&server), Arc::clone(&ctx));
            std::thread::spawn(move || serve_requests(&server, &ctx))
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    eprintln!("attn-trace serve: stopped");
    Ok(())
}

/// One handler thread: requests until the stop flag is set.
fn serve_requests(server: &tiny_http::Server, ctx: &http::Context) {
    while !STOP.load(Ordering::SeqCst) {
        match server.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(request)) => http::handle(ctx, request),
            Ok(None) => {}
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
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
