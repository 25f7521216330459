//! Running the library's work for Python: off the GIL, on the library's pool, stoppable, and
//! never a panic.
//!
//! A trace is one call into Rust, and Python runs its signal handlers only between bytecodes,
//! so Ctrl-C would wait for the whole run. The caller waits in slices instead, with the GIL
//! released, and runs Python's handlers between them; an exception a handler raises (the
//! KeyboardInterrupt of Ctrl-C) sets the run's cancel flag, which the model checks before each
//! layer (`model::cancel`), and is raised once the run has stopped. Other Python threads run
//! meanwhile: nothing here holds the GIL while the work runs. A panic (a bug) is caught, as the
//! server catches one, and raised as `attn_trace.Error` with code 1 rather than as pyo3's
//! PanicException, which `except Exception` does not catch.

use attn_trace::model::{cancel, kernels::pool};
use pyo3::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

/// How long the caller waits before it runs Python's signal handlers again: short enough that
/// Ctrl-C feels immediate, long enough to cost nothing.
const SLICE: Duration = Duration::from_millis(50);

/// What the worker hands back: the work's result, or the payload of its panic.
type Outcome<R> = std::thread::Result<anyhow::Result<R>>;

/// `work` on a worker of the library's pool, with the GIL released; Ctrl-C stops it at the
/// next layer and raises KeyboardInterrupt.
pub fn stoppable<R: Send>(py: Python<'_>, work: impl FnOnce() -> anyhow::Result<R> + Send) -> PyResult<R> {
    let flag = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<Outcome<R>>();
    let cancel = Arc::clone(&flag);
    let waited = std::thread::scope(|s| {
        // The flag is the worker's: the model reads it on the thread the run is on.
        let run = move || {
            let _watch = cancel::Watch::new(cancel);
            work()
        };
        let worker = move || drop(tx.send(catch_unwind(AssertUnwindSafe(|| pool::on_a_worker(run)))));
        let started = std::thread::Builder::new().name("attn-trace python".into()).spawn_scoped(s, worker);
        started.map(|_| wait(py, rx, &flag))
    });
    let (outcome, interrupted) = waited.map_err(|e| crate::error(py, format!("starting the run: {e}"), 1))?;
    if let Some(e) = interrupted {
        return Err(e);
    }
    match outcome {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(crate::fail(py, e)),
        Err(panic) => Err(panicked(py, panic.as_ref())),
    }
}

/// Waits for the worker's outcome in slices, running Python's signal handlers between them.
/// The first exception a handler raises cancels the run; the wait goes on until it stops
/// (the worker borrows the caller's settings), and that exception is handed back with it.
fn wait<R: Send>(py: Python<'_>, mut rx: mpsc::Receiver<Outcome<R>>, flag: &AtomicBool) -> (Outcome<R>, Option<PyErr>) {
    let mut interrupted = None;
    loop {
        // The receiver goes into the GIL-free closure and comes back (it is Send, not Sync).
        let (back, got) = py.detach(move || {
            let got = rx.recv_timeout(SLICE);
            (rx, got)
        });
        rx = back;
        match got {
            Ok(outcome) => return (outcome, interrupted),
            Err(RecvTimeoutError::Timeout) if interrupted.is_none() => {
                if let Err(e) = py.check_signals() {
                    flag.store(true, Ordering::Relaxed);
                    interrupted = Some(e);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            // The worker always sends (its panic is caught): it ended without running.
            Err(RecvTimeoutError::Disconnected) => return (Err(Box::new("the run's thread ended")), interrupted),
        }
    }
}

/// A panic as `attn_trace.Error` (code 1): one line, with the panic's message.
fn panicked(py: Python<'_>, payload: &(dyn std::any::Any + Send)) -> PyErr {
    let said =
        payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned());
    let said = said.unwrap_or_else(|| "no message".into()).replace('\n', " ");
    crate::error(
        py,
        format!("internal error: the run panicked: {said} (please report it, with the call that made it)"),
        1,
    )
}
