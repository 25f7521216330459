//! The line of traces waiting for the model's thread: at most `--queue` wait while one runs
//! (past it a request is answered 503 "busy"). A trace whose client leaves while it waits is
//! taken out of the line at once, so that a storm of clients that start traces and leave
//! frees the line as fast as they leave, rather than when the model's thread reaches each;
//! one that leaves while its trace runs sets the trace's cancel flag (`model::cancel`), and
//! so does a trace that runs past `--trace-limit`, which is then answered saying so.

use crate::settings::Settings;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// What a request asks for: the JSON document (`--format json`'s bytes), the HTML page, or
/// what the server's own page shows after each change (`{"page": HTML, "predictions": …}`,
/// from one trace rather than two).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Json,
    Page,
    View,
}

/// A reply: HTTP status, body, whether it is an HTML page (else JSON), and a 405's methods.
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
    pub html: bool,
    pub allow: Option<&'static str>,
}

impl Answer {
    pub fn ok(body: Vec<u8>, html: bool) -> Answer {
        Answer { status: 200, body, html, allow: None }
    }

    /// `{"error": line, "code": code}`.
    pub fn error(status: u16, line: &str, code: u8) -> Answer {
        Answer { status, body: super::wire::error_body(line, code), html: false, allow: None }
    }
}

/// What the model's thread runs for a request.
pub enum Task {
    /// A trace of these settings, answered as `Kind` says.
    Trace(Box<Settings>, Kind),
    /// An HTML page made by work the command hands over (`Hooks::compare`: `attn-trace
    /// compare`'s page against the server's reference model).
    Page(super::Work),
}

/// How often a handler waiting for its trace asks whether its client is still there.
const PROBE_EVERY: Duration = Duration::from_millis(50);

/// A trace in the line: what to run, where to answer, and its flags.
pub struct Job {
    pub task: Task,
    pub reply: mpsc::Sender<Answer>,
    pub ticket: Arc<Ticket>,
}

/// A trace's flags, shared by its handler thread and the model's thread.
#[derive(Default)]
pub struct Ticket {
    /// Set when the client of a running trace has gone, or the trace ran past the limit: it
    /// stops at its next layer.
    pub cancel: Arc<AtomicBool>,
    /// Set (before `cancel`) when the trace ran past the limit: then it is answered, saying so.
    pub over_time: AtomicBool,
    /// When the model's thread started it.
    pub started: OnceLock<Instant>,
}

#[derive(Default)]
struct Line {
    waiting: VecDeque<Job>,
    /// The model's thread is running a trace.
    running: bool,
    /// The server has stopped: the model's thread ends.
    closed: bool,
}

/// The line, shared by the handler threads ([`Queue::submit`]) and the model's thread
/// ([`Queue::take`], [`Queue::finished`]).
pub struct Queue {
    line: Mutex<Line>,
    ready: Condvar,
    /// How many traces may wait (`--queue`).
    size: usize,
    /// The longest a trace may run (`--trace-limit`).
    pub limit: Duration,
}

impl Queue {
    pub fn new(size: usize, limit: Duration) -> Queue {
        Queue { line: Mutex::default(), ready: Condvar::new(), size, limit }
    }

    fn lock(&self) -> MutexGuard<'_, Line> {
        // A panic while holding the lock leaves the line as it was: each change is one step.
        self.line.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The answer to one trace (503 "busy" when the line is full), or `None` when `gone()`
    /// said, while it waited, that its client has left: then the trace leaves the line, or
    /// stops if it runs. A trace that runs past the limit is stopped too, and answered so.
    pub fn submit(&self, task: Task, gone: &dyn Fn() -> bool) -> Option<Answer> {
        let (reply, answer) = mpsc::channel();
        let ticket = Arc::new(Ticket::default());
        {
            let mut line = self.lock();
            // Taken at once by an idle model thread, a trace does not wait.
            let would_wait = line.waiting.len() + usize::from(line.running);
            if would_wait > self.size || line.closed {
                let line = format!(
                    "busy: {} traces already wait for the model (the server's --queue); try again in a moment",
                    self.size
                );
                return Some(Answer::error(503, &line, 1));
            }
            line.waiting.push_back(Job { task, reply, ticket: Arc::clone(&ticket) });
        }
        self.ready.notify_one();
        loop {
            match answer.recv_timeout(PROBE_EVERY) {
                Ok(answer) => return Some(answer),
                Err(RecvTimeoutError::Disconnected) => return Some(Answer::error(500, "the trace was dropped", 1)),
                Err(RecvTimeoutError::Timeout) if gone() => {
                    self.abandon(&ticket);
                    return None;
                }
                Err(RecvTimeoutError::Timeout) => {
                    if ticket.started.get().is_some_and(|t| t.elapsed() > self.limit) {
                        ticket.over_time.store(true, Ordering::SeqCst);
                        ticket.cancel.store(true, Ordering::SeqCst);
                    }
                }
            }
        }
    }

    /// The client of `ticket`'s trace has gone: out of the line if it waits, else stopped.
    fn abandon(&self, ticket: &Arc<Ticket>) {
        let mut line = self.lock();
        match line.waiting.iter().position(|job| Arc::ptr_eq(&job.ticket, ticket)) {
            Some(at) => {
                line.waiting.remove(at);
                eprintln!("attn-trace serve: a client left before its trace ran; skipped");
            }
            None => ticket.cancel.store(true, Ordering::SeqCst),
        }
    }

    /// The next trace for the model's thread, waiting for one; `None` once the server stops.
    pub fn take(&self) -> Option<Job> {
        let mut line = self.lock();
        loop {
            if line.closed {
                return None;
            }
            if let Some(job) = line.waiting.pop_front() {
                line.running = true;
                // Started under the lock: a handler that looks for it now finds it running.
                let _ = job.ticket.started.set(Instant::now());
                return Some(job);
            }
            line = self.ready.wait(line).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// The model's thread is done with the trace it took.
    pub fn finished(&self) {
        self.lock().running = false;
    }

    /// The server stops: the model's thread ends once its trace is done.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}
