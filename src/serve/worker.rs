//! The model's thread: one trace at a time, taken from a bounded queue. It holds a
//! `sources::memo` scope for its whole life, so a decoder's parameters and a model's
//! tokenizer are made once (by the warm-up trace) and shared by every request, as a batch's
//! sentences share them. A panic in one trace is caught and answered as an error; the thread
//! goes on with the next. Each trace has a cancel flag, set by the request's handler thread
//! when its client goes (`http.rs`): a queued trace whose flag is set does not run, and a
//! running one stops before its next layer (`model::cancel`); neither is answered.

use crate::model::cancel;
use crate::settings::Settings;
use crate::{output, render, sources};
use anyhow::{anyhow, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

/// What a request asks for: the JSON document (`--format json`'s bytes), the HTML page, or
/// what the server's own page shows after each change (`{"page": HTML, "predictions": …}`,
/// from one trace rather than two).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Json,
    Page,
    View,
}

/// A reply: HTTP status, body, and whether it is an HTML page (else JSON).
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
    pub html: bool,
}

impl Answer {
    /// `{"error": line, "code": code}`.
    pub fn error(status: u16, line: &str, code: u8) -> Answer {
        let body = serde_json::json!({ "error": line, "code": code }).to_string().into_bytes();
        Answer { status, body, html: false }
    }

    /// The queue is full.
    fn busy() -> Answer {
        Answer { status: 503, body: br#"{"error":"busy"}"#.to_vec(), html: false }
    }
}

/// How often a handler waiting for its trace asks whether its client is still there.
const PROBE_EVERY: Duration = Duration::from_millis(50);

/// What the model's thread runs for a request.
pub enum Task {
    /// A trace of these settings, answered as `Kind` says.
    Trace(Box<Settings>, Kind),
    /// An HTML page made by work the command hands over (`Hooks::compare`: `attn-trace
    /// compare`'s page against the server's reference model).
    Page(super::Work),
}

struct Job {
    task: Task,
    reply: mpsc::Sender<Answer>,
    /// Set when the client has gone: the trace is not run, or stops at its next layer.
    cancel: Arc<AtomicBool>,
}

/// The sending end of the model's queue.
pub struct Queue {
    tx: SyncSender<Job>,
}

impl Queue {
    /// The answer to one trace (503 "busy" when the queue is full), or `None` when `gone()`
    /// said, while it waited, that its client has left: then the trace is cancelled.
    pub fn submit(&self, task: Task, gone: &dyn Fn() -> bool) -> Option<Answer> {
        let (reply, answer) = mpsc::channel();
        let cancel = Arc::new(AtomicBool::new(false));
        match self.tx.try_send(Job { task, reply, cancel: Arc::clone(&cancel) }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Some(Answer::busy()),
            Err(TrySendError::Disconnected(_)) => return Some(Answer::error(503, "the model thread has stopped", 1)),
        }
        loop {
            match answer.recv_timeout(PROBE_EVERY) {
                Ok(answer) => return Some(answer),
                Err(RecvTimeoutError::Disconnected) => return Some(Answer::error(500, "the trace was dropped", 1)),
                Err(RecvTimeoutError::Timeout) if gone() => {
                    cancel.store(true, Ordering::Relaxed);
                    return None;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

/// Starts the model's thread and runs `warm` on it (loading the model); its error is the
/// server's, before it listens.
pub fn start(warm: Settings, queue: usize, error_line: fn(&anyhow::Error) -> String) -> Result<Queue> {
    let (tx, rx) = mpsc::sync_channel::<Job>(queue);
    let (ready_tx, ready) = mpsc::channel::<std::result::Result<(), anyhow::Error>>();
    std::thread::Builder::new().name("attn-trace model".into()).spawn(move || {
        crate::model::pool::on_a_worker_of_its_own(move || {
            let _once = sources::memo::Scope::making_layers();
            let warmed = caught(|| trace(&warm, Kind::Json)).map(|_| ());
            let ok = warmed.is_ok();
            let _ = ready_tx.send(warmed);
            if ok {
                model_loop(&rx, error_line);
            }
        })
    })?;
    ready.recv().map_err(|_| anyhow!("the model thread stopped while loading"))??;
    Ok(Queue { tx })
}

fn model_loop(rx: &Receiver<Job>, error_line: fn(&anyhow::Error) -> String) {
    while let Ok(job) = rx.recv() {
        // A client that left before its turn: its trace does not run.
        if job.cancel.load(Ordering::Relaxed) {
            eprintln!("attn-trace serve: a client left before its trace ran; skipped");
            continue;
        }
        let html = matches!(job.task, Task::Trace(_, Kind::Page) | Task::Page(_));
        let traced = {
            let _watch = cancel::Watch::new(Arc::clone(&job.cancel));
            match job.task {
                Task::Trace(settings, kind) => caught(|| trace(&settings, kind)),
                Task::Page(work) => caught(work),
            }
        };
        let answer = match traced {
            Ok(body) => Answer { status: 200, body, html },
            // A client that left while its trace ran: stopped at a layer's start, not answered.
            Err(e) if cancel::is_cancelled(&e) || job.cancel.load(Ordering::Relaxed) => {
                eprintln!("attn-trace serve: a client left while its trace ran; stopped");
                continue;
            }
            Err(e) => {
                let code = crate::error::exit_code(&e);
                Answer::error(if code == crate::error::exit::USAGE { 400 } else { 500 }, &error_line(&e), code)
            }
        };
        // A client that left has nobody to answer.
        let _ = job.reply.send(answer);
    }
}

/// `work`, with a panic made an error.
fn caught(work: impl FnOnce() -> Result<Vec<u8>>) -> Result<Vec<u8>> {
    match catch_unwind(AssertUnwindSafe(work)) {
        Ok(r) => r,
        Err(_) => Err(anyhow!("internal error: this trace panicked (the server goes on)")),
    }
}

/// One trace's bytes: what `attn-trace … --format json` prints, or the `--html` page.
fn trace(settings: &Settings, kind: Kind) -> Result<Vec<u8>> {
    if sources::batch::sentences(settings)?.is_some() {
        return Err(crate::error::usage("a request", "traces one sentence", "send one sentence per request"));
    }
    let mut settings = settings.clone();
    if kind != Kind::Json {
        // Drawn in memory: nothing is written to this path.
        settings.output.views.html = Some("serve.html".into());
    }
    let (done, _, _) = crate::computed(&settings, &|_| {}, false, &mut output::Clock::new(false))?;
    let mut buf = Vec::new();
    match kind {
        Kind::Json => output::stdout(&done.trace, &done.views, &settings.output, None, &mut buf)?,
        Kind::Page | Kind::View => {
            let maps = done.views.maps.as_ref().ok_or_else(|| anyhow!("this trace has no attention maps to draw"))?;
            render::html::write(&done.trace, maps, &done.views, &settings.output, &mut buf)?;
        }
    }
    if kind == Kind::View {
        let page = String::from_utf8(buf)?;
        let predictions = render::predictions::to_json(&done.trace).unwrap_or_else(|| "[]".into());
        return Ok(
            format!("{{\"page\": {}, \"predictions\": {predictions}}}", serde_json::to_string(&page)?).into_bytes()
        );
    }
    Ok(buf)
}
