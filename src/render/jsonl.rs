//! `--format jsonl`: JSON Lines. The first line is `{"schema_version", "input", "config"}`;
//! every further line is one step object, exactly as in the JSON document's `steps`
//! (render/json.rs writes both). Lines are written as the model records each step: the
//! model runs on a worker thread whose trace hands every step to a bounded channel instead
//! of keeping it, and this thread formats, writes and flushes one line at a time. So memory
//! holds a few steps rather than the whole trace, and a reader that stops early (`| head -3`)
//! ends the stream: the next send fails, the trace stops copying tensors, and the run exits 0.
//! Unlike the other formats, an error after the first line leaves the lines before it.

use super::json;
use crate::settings::Settings;
use crate::trace::{Step, Trace};
use anyhow::{anyhow, Result};
use candle_core::Tensor;
use std::io::{self, Write};
use std::sync::mpsc::sync_channel;

/// The first line: what was traced, without steps.
pub fn header(trace: &Trace) -> io::Result<String> {
    let input = json::input_object(trace);
    Ok(format!(
        "{{\"schema_version\": {}, \"input\": {}, \"config\": {}}}\n",
        json::SCHEMA_VERSION,
        serde_json::to_string(&input)?,
        serde_json::to_string(&trace.config)?
    ))
}

/// An already computed trace as JSON Lines.
pub fn write(trace: &Trace, w: &mut dyn Write) -> io::Result<()> {
    w.write_all(header(trace)?.as_bytes())?;
    for step in &trace.steps {
        json::write_step(step, w)?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// What the model's thread sends: the header line (it needs the trace's input and config),
/// then the steps, unformatted: formatting happens on this thread, straight into `out`'s
/// buffer, rather than into a whole-line copy on the model's thread (MiniLM at 256 tokens,
/// `--format jsonl`: 475 → 442 ms, 15 runs each).
enum Piece {
    Header(String),
    Step(Step),
}

/// Computes the trace while writing it to `out`, line by line. Returns the trace (holding
/// its steps only if `keep`, for `--save-trace`) and the encoder's output.
pub fn stream(settings: &Settings, keep: bool, out: &mut dyn Write) -> Result<(Trace, Tensor)> {
    // A few steps in flight let the model run ahead of a slow reader without holding the trace.
    let (tx, rx) = sync_channel::<Piece>(4);
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || -> Result<(Trace, Tensor, Option<io::Error>)> {
            let (mut trace, output) = crate::compute_with(settings, move |trace| {
                // A closed channel means the writer stopped (the reader left, or an error).
                let closed = |_| io::Error::from(io::ErrorKind::BrokenPipe);
                tx.send(Piece::Header(header(trace)?)).map_err(closed)?;
                trace.stream(Box::new(move |step| tx.send(Piece::Step(step)).map_err(closed)), keep);
                Ok(())
            })?;
            // Dropping the sink drops the sender, which ends the writing loop below.
            let stopped = trace.end_stream();
            Ok((trace, output, stopped))
        });
        let mut w = io::BufWriter::with_capacity(1 << 16, &mut *out);
        let mut written: io::Result<()> = Ok(());
        for piece in rx {
            written = match piece {
                Piece::Header(line) => w.write_all(line.as_bytes()),
                Piece::Step(step) => json::write_step(&step, &mut w).and_then(|()| w.write_all(b"\n")),
            }
            .and_then(|()| w.flush());
            if written.is_err() {
                break; // dropping the receiver stops the worker's stream
            }
        }
        let (trace, output, stopped) =
            worker.join().map_err(|_| anyhow!("internal: the tracing thread panicked"))??;
        written?;
        match stopped {
            Some(e) => Err(e.into()),
            None => Ok((trace, output)),
        }
    })
}
