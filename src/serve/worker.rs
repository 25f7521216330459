//! The model's thread: one trace at a time, taken from a bounded queue. It holds a
//! `sources::memo` scope for its whole life, so a decoder's parameters and a model's
//! tokenizer are made once (by the warm-up trace) and shared by every request, as a batch's
//! sentences share them. A panic in one trace is caught and answered as an error; the thread
//! goes on with the next. Each trace has a cancel flag, set by the request's handler thread
//! when its client goes (`http.rs`) or when the trace has run longer than the server's
//! `--trace-limit`: a queued trace whose flag is set does not run, and a running one stops
//! before its next layer (`model::cancel`); one whose client left is not answered, one past
//! the limit is answered with a one-line error. An answer larger than [`MAX_ANSWER`] is
//! refused rather than held.

use super::queue::{Answer, Kind, Queue, Task};
use crate::model::cancel;
use crate::settings::Settings;
use crate::{output, render, sources};
use anyhow::{anyhow, Result};
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};

/// Largest answer the server builds (a trace's JSON document or page, in memory until sent).
pub const MAX_ANSWER: usize = 256 << 20;

/// Starts the model's thread and runs `warm` on it (loading the model); its error is the
/// server's, before it listens. At most `queue` traces wait; each may run for `limit`.
pub fn start(warm: Settings, queue: Arc<Queue>, error_line: fn(&anyhow::Error) -> String) -> Result<()> {
    let (ready_tx, ready) = mpsc::channel::<std::result::Result<(), anyhow::Error>>();
    std::thread::Builder::new().name("attn-trace model".into()).spawn(move || {
        crate::model::kernels::pool::on_a_worker_of_its_own(move || {
            let _once = sources::memo::Scope::making_layers();
            let warmed = caught(|| trace(&warm, Kind::Json)).map(|_| ());
            let ok = warmed.is_ok();
            let _ = ready_tx.send(warmed);
            if ok {
                model_loop(&queue, error_line);
            }
        })
    })?;
    ready.recv().map_err(|_| anyhow!("the model thread stopped while loading"))??;
    Ok(())
}

fn model_loop(queue: &Queue, error_line: fn(&anyhow::Error) -> String) {
    while let Some(job) = queue.take() {
        let html = matches!(job.task, Task::Trace(_, Kind::Page) | Task::Page(_));
        let traced = {
            let _watch = cancel::Watch::new(Arc::clone(&job.ticket.cancel));
            match job.task {
                Task::Trace(settings, kind) => caught(|| trace(&settings, kind)),
                Task::Page(work) => caught(work),
            }
        };
        queue.finished();
        let limit = queue.limit;
        let answer = match traced {
            Ok(body) => Answer::ok(body, html),
            Err(_) if job.ticket.over_time.load(Ordering::SeqCst) => {
                eprintln!("attn-trace serve: a trace ran past --trace-limit ({} s); stopped", limit.as_secs());
                let line = format!(
                    "the trace ran past the server's limit of {} s (--trace-limit) and was stopped (ask for less: \
                     fewer tokens, patched heads or generated tokens; or run the command line)",
                    limit.as_secs()
                );
                Answer::error(503, &line, 2)
            }
            // A client that left while its trace ran: stopped at a layer's start, not answered.
            Err(e) if cancel::is_cancelled(&e) || job.ticket.cancel.load(Ordering::SeqCst) => {
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
    let (done, _, _) = crate::run::computed(&settings, &|_| {}, false, &mut output::Clock::new(false))?;
    let mut out = Capped { bytes: Vec::new(), over: false, cap: MAX_ANSWER };
    let written = match kind {
        Kind::Json => output::stdout(&done.trace, &done.views, &settings.output, None, &mut out),
        Kind::Page | Kind::View => {
            let maps = done.views.maps.as_ref().ok_or_else(|| anyhow!("this trace has no attention maps to draw"))?;
            render::html::write(&done.trace, maps, &done.views, &settings.output, &mut out).map_err(Into::into)
        }
    };
    if out.over {
        return Err(crate::error::usage(
            "the answer",
            format!("it would be larger than the server's limit of {} MiB", MAX_ANSWER >> 20),
            "narrow it with --steps, --layer or --head, or run the command line",
        ));
    }
    written?;
    let buf = out.bytes;
    if kind == Kind::View {
        let page = String::from_utf8(buf)?;
        let predictions = render::predictions::to_json(&done.trace).unwrap_or_else(|| "[]".into());
        return Ok(
            format!("{{\"page\": {}, \"predictions\": {predictions}}}", serde_json::to_string(&page)?).into_bytes()
        );
    }
    Ok(buf)
}

/// An answer's buffer, which refuses to grow past `cap` bytes ([`MAX_ANSWER`]): a request whose
/// answer would be larger is refused rather than held.
struct Capped {
    bytes: Vec<u8>,
    over: bool,
    cap: usize,
}

impl Write for Capped {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + b.len() > self.cap {
            self.over = true;
            return Err(std::io::Error::other("the answer is larger than the server's limit"));
        }
        self.bytes.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_past_its_cap_is_refused_and_says_so() {
        let mut out = Capped { bytes: Vec::new(), over: false, cap: 8 };
        assert!(out.write_all(b"12345").is_ok() && !out.over);
        assert!(out.write_all(b"6789").is_err() && out.over);
        assert_eq!(out.bytes, b"12345", "nothing past the cap is kept");
    }
}
