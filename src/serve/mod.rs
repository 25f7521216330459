//! `attn-trace serve`: the model loaded once behind a local HTTP server, answering the same
//! options as the command line (docs/SERVE.md). `command/serve.rs` reads the serve command
//! line and hands over [`Hooks`]: how a request's options become [`Settings`] (the command's
//! own clap definition and its one-line messages), so this module imports no `cli`.
//!
//! No HTTP crate (docs/SERVE.md says why). Threads: this one runs the reactor
//! (`reactor.rs`), which holds every connection at once — accepts it, reads its requests
//! (`wire.rs`) under a deadline and writes its answers under another — so an idle or slow
//! client costs a buffer, not a thread; at most [`reactor::MAX_CONNECTIONS`] are open, and a
//! new one takes the place of the one that waited longest. A request read whole goes to one
//! of the handler threads (`http.rs`: Host, Origin and the other checks of `guard.rs`, the
//! routes), which hands its trace to the one model thread through a bounded queue
//! (`worker.rs`; past [`Options::queue`] waiting traces the answer is 503 "busy") and waits,
//! looking at whether its client is still there. There are `queue + 1 + SPARE_HANDLERS`
//! handlers: as many as can wait for the model, and a few for every other answer. SIGINT and
//! SIGTERM set a flag that the reactor and the handlers look at, so the server stops with
//! exit 0. A request's options are the command line's, less what a shared server caps: a
//! generation of at most [`MAX_GENERATE`] tokens (`limited`), a trace of at most
//! `--trace-limit` seconds.

mod guard;
mod hooks;
mod http;
mod poll;
mod queue;
mod reactor;
mod wire;
mod worker;
pub use hooks::{Compare, Hooks, Work};

use crate::settings::Settings;
use anyhow::{Context, Result};
use std::net::{IpAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

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
        .arg(value(
            "queue",
            "N",
            "Most traces waiting for the model while one runs (at most 64); past it: 503 busy [default: 4]",
        ))
        .arg(value(
            "trace-limit",
            "SECONDS",
            "The longest one request's trace may run; past it the trace stops and is answered 503 [default: 120]",
        ))
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

/// The serve command line's own flags.
pub struct Options {
    pub host: String,
    pub port: u16,
    pub allow_remote: bool,
    /// Most traces that may wait for the model while one runs (at most [`MAX_QUEUE`]).
    pub queue: usize,
    /// The longest one request's trace may run.
    pub trace_limit: Duration,
    /// The settings of a first trace, run before listening: loads the model (and fails early).
    pub warm: Settings,
}

/// Handler threads beyond those that may wait for the model (one per queued trace, and the
/// running one's): they answer the page, refusals and "busy" while the others wait.
const SPARE_HANDLERS: usize = 4;
/// Most traces `--queue` lets wait: each holds a handler thread and its request.
pub const MAX_QUEUE: usize = 64;
/// Most tokens a request may generate (`--generate N`): a generation holds the model's thread
/// for all its decode steps (a client that leaves stops it; one that waits holds every other
/// request back).
pub const MAX_GENERATE: usize = 128;

/// Set by SIGINT or SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);

fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Whether `host` is this machine's loopback: `localhost`, 127.0.0.1 or ::1.
fn is_loopback(host: &str) -> bool {
    let ip = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().ok();
    host.eq_ignore_ascii_case("localhost") || ip.is_some_and(|ip| ip.is_loopback())
}

/// Runs the server until SIGINT or SIGTERM.
pub fn run(opts: Options, hooks: Hooks) -> Result<()> {
    let local = is_loopback(&opts.host);
    if !local && !opts.allow_remote {
        return Err(crate::error::usage(
            format!("--host {}", opts.host),
            "the server listens on 127.0.0.1 unless told otherwise, and anyone who can reach another address can run the model",
            "add --allow-remote to mean it, or reach it through an SSH tunnel (docs/SERVE.md)",
        ));
    }
    let queue = Arc::new(queue::Queue::new(opts.queue, opts.trace_limit));
    worker::start(opts.warm.clone(), Arc::clone(&queue), hooks.error_line)?;
    let addr = if opts.host.contains(':') && !opts.host.starts_with('[') {
        format!("[{}]:{}", opts.host, opts.port)
    } else {
        format!("{}:{}", opts.host, opts.port)
    };
    let listener = TcpListener::bind(&addr).with_context(|| format!("listening on {addr}"))?;
    let bound = listener.local_addr().context("the listening address")?;
    let port = bound.port();
    listener.set_nonblocking(true).context("the listening socket")?;
    let (poller, waker) = poll::pair().context("the server's wake-up socket")?;
    watch_signals();
    if !local {
        eprintln!(
            "attn-trace serve: warning: listening on {} (--allow-remote) with no authentication and no encryption: \
             anyone who can reach this address can run the model and read every answer (an SSH tunnel to \
             127.0.0.1 is safer, docs/SERVE.md)",
            opts.host
        );
    }
    eprintln!("attn-trace serve: listening on http://{bound}/");
    let ctx = Arc::new(http::Context::new(&opts.host, port, limited(hooks), Arc::clone(&queue)));
    let (jobs_tx, jobs) = mpsc::channel::<reactor::Job>();
    let (done, done_rx) = mpsc::channel::<reactor::Done>();
    let (jobs, waker) = (Arc::new(Mutex::new(jobs)), Arc::new(waker));
    let handlers: Vec<_> = (0..opts.queue + 1 + SPARE_HANDLERS)
        .map(|_| {
            let (ctx, jobs, done, waker) = (Arc::clone(&ctx), Arc::clone(&jobs), done.clone(), Arc::clone(&waker));
            std::thread::spawn(move || http::handle(&ctx, &jobs, &done, &waker, &stopping))
        })
        .collect();
    reactor::run(&listener, jobs_tx, &done_rx, &poller, &stopping);
    for t in handlers {
        let _ = t.join();
    }
    queue.close();
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
