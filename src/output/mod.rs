//! The output stage: the only place that writes. Standard output gets the rendered trace,
//! standard error the notes, and files (`--html`, `--svg`, `--save-trace`, `--save-weights`)
//! their bytes. For `--format jsonl` it also owns the thread that runs the model while this
//! thread writes each step as it arrives ([`stream`]).
//!
//! Files are written by [`file::write_file`]: whole or not at all, and never over what the
//! user did not name as the output (a device, a FIFO, a symlink).

use crate::params::Input;
use crate::params::Params;
use crate::render;
use crate::settings::{Format, Output, Settings};
use crate::sources::Loaded;
use crate::trace::{Recorder, Selection, Step, Trace};
use crate::views::Views;
use anyhow::{anyhow, Result};
use candle_core::Tensor;
use std::io::{self, Write};
use std::path::Path;
use std::sync::mpsc::sync_channel;

/// Prints notes on stderr, one line each, unless `--quiet`.
pub fn notes(notes: &[String], quiet: bool) {
    if !quiet {
        for n in notes {
            eprintln!("attn-trace: note: {n}");
        }
    }
}

/// Prints one line on stderr, unless `--quiet` (e.g. `--check`'s verdict when it passes).
pub fn line(text: &str, quiet: bool) {
    if !quiet {
        eprintln!("attn-trace: {text}");
    }
}

mod file;
mod interrupt;
pub mod peak;
pub use file::{check_file, write_file, Pending};
pub use interrupt::remove_temporaries_on_signal;

/// `--save-weights`: the parameters as safetensors, with the settings and input of `loaded`'s
/// run in the metadata (`sources::meta`), into `files` (put in place when the run succeeds).
pub fn save_weights(params: &Params, loaded: &Loaded, path: Option<&Path>, files: &mut Pending) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    let ids = match &loaded.input {
        Input::Ids { ids, .. } => Some(ids.as_slice()),
        Input::Matrix(_) => None,
    };
    let meta = crate::sources::meta::describe(&loaded.cfg, loaded.sentence.as_deref(), &loaded.tokens, ids);
    files.write("--save-weights", path, &crate::export::weights::encode(params, &meta)?)
}

/// Checks every file the run will write before it computes anything ([`file::check_file`]).
pub fn check_files(settings: &Settings) -> Result<()> {
    let o = &settings.outputs;
    let named = [
        ("--save-weights", o.save_weights.as_deref()),
        ("--save-trace", o.save_trace.as_ref().map(|(p, _)| p.as_path())),
        ("--html", settings.output.views.html.as_deref()),
        ("--svg", settings.output.views.svg.as_deref()),
    ];
    named.into_iter().filter_map(|(flag, p)| p.map(|p| (flag, p))).try_for_each(|(flag, p)| file::check_file(flag, p))
}

/// `--save-trace`: the trace's steps as safetensors or npz, into `files`.
pub fn save_trace(trace: &Trace, settings: &Settings, files: &mut Pending) -> Result<()> {
    if let Some((path, kind)) = &settings.outputs.save_trace {
        let bytes = crate::export::encode_trace(trace, *kind, settings.outputs.trace_names)?;
        files.write("--save-trace", path, &bytes)?;
    }
    Ok(())
}

/// `--html` and `--svg` into `files`, before anything goes to stdout.
pub fn view_files(trace: &Trace, views: &Views, out: &Output, files: &mut Pending) -> Result<()> {
    if let (Some(path), Some(maps)) = (&out.views.html, &views.maps) {
        let mut buf = Vec::new();
        match views.stacks.as_ref().filter(|s| !s.pages.is_empty()) {
            // An encoder–decoder's page shows each of its three attentions.
            Some(s) => render::html::write_stacks(trace, &s.pages, views, out, &mut buf)?,
            None => render::html::write(trace, maps, views, out, &mut buf)?,
        }
        files.write("--html", path, &buf)?;
    }
    if let (Some(path), Some(maps)) = (&out.views.svg, &views.maps) {
        let mut buf = Vec::new();
        match views.generation_maps.as_slice() {
            [] => render::svg::write(
                trace,
                maps,
                views.patch_grid.as_ref().map(|p| (p, views.patch_text())),
                out,
                &mut buf,
            )?,
            // A generation's picture is what each generated token looked at.
            gen => render::svg::write_generation(trace, gen, out.precision, &mut buf)?,
        }
        files.write("--svg", path, &buf)?;
    }
    Ok(())
}

/// A batch's `--html` page and `--svg` picture: each sentence's part is rendered as its
/// trace is finished (so that only the rendered parts are kept), and the files are written
/// once every sentence is, before stdout (an error in any sentence leaves no file).
#[derive(Default)]
pub struct BatchViews {
    /// Each sentence and its page section.
    html: Vec<(String, String)>,
    svg: Vec<render::svg::Block>,
    /// The bytes kept so far.
    bytes: usize,
}

impl BatchViews {
    /// Renders the parts of sentence `index` of `count` that the settings ask for. Each run
    /// checked its own memory; the parts add up, so their sum is checked against the same
    /// cap (times 3, as for one run's page: the page's growth and the copy that is written).
    pub fn add(&mut self, trace: &Trace, views: &Views, s: &Settings, (index, count): (usize, usize)) -> Result<()> {
        let (Some(maps), out) = (&views.maps, &s.output) else { return Ok(()) };
        if out.views.html.is_some() {
            let section = render::html::section(trace, maps, views, out, &format!("-s{}", index + 1))?;
            self.bytes += section.len();
            self.html.push((render::html::sentence(trace), section));
        }
        if out.views.svg.is_some() {
            let block = render::svg::block(
                trace,
                maps,
                views.patch_grid.as_ref().map(|p| (p, views.patch_text())),
                out,
                Some((index, count)),
            );
            self.bytes += block.svg.len();
            self.svg.push(block);
        }
        let what = format!("for the --html/--svg files of sentences 1 to {}", index + 1);
        crate::settings::limits::check_bytes(3.0 * self.bytes as f64, &what, s.max_memory, s.memory_available)
    }

    /// The memory the parts hold, as [`BatchViews::add`] counts it.
    pub fn held(&self) -> usize {
        3 * self.bytes
    }

    /// Writes the page and the picture `out` names, both or neither.
    pub fn write(self, out: &Output) -> Result<()> {
        let mut files = Pending::default();
        if let Some(path) = &out.views.html {
            let mut buf = Vec::new();
            render::html::write_batch(&self.html, &mut buf)?;
            files.write("--html", path, &buf)?;
        }
        if let Some(path) = &out.views.svg {
            let mut buf = Vec::new();
            render::svg::write_batch(&self.svg, &mut buf)?;
            files.write("--svg", path, &buf)?;
        }
        files.commit()
    }
}

/// One trace of a batch, rendered as a single run would be (`--format jsonl` as a whole
/// JSON document, which the batch writes on one line), with a title above tables.
pub fn batch_item(trace: &Trace, views: &Views, out: &Output, (index, count): (usize, usize)) -> Result<Vec<u8>> {
    let mut out = out.clone();
    if out.format == Format::Jsonl {
        out.format = Format::Json;
    }
    let mut buf = Vec::new();
    if out.format != Format::Json {
        let sentence = trace.sentence.as_deref().unwrap_or_default();
        buf.extend_from_slice(render::batch::title(index, count, sentence, out.width).as_bytes());
    }
    render::render(trace, views, &out, None, &mut buf)?;
    Ok(buf)
}

/// A batch's rendered traces on `w`, once every one is computed (an error leaves stdout empty).
pub fn batch(items: &[Vec<u8>], format: Format, w: &mut dyn Write) -> Result<()> {
    let mut w = io::BufWriter::with_capacity(1 << 16, w);
    render::batch::write(items, format, &mut w)?;
    w.flush()?;
    Ok(())
}

/// The rendered trace on `out`. Nothing is written before the whole trace has been computed,
/// so an error leaves stdout empty.
pub fn stdout(
    trace: &Trace,
    views: &Views,
    out: &Output,
    check: Option<&serde_json::Value>,
    w: &mut dyn Write,
) -> Result<()> {
    let mut w = io::BufWriter::with_capacity(1 << 16, w);
    render::render(trace, views, out, check, &mut w)?;
    w.flush()?;
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

/// `--format jsonl`: runs `forward` on a worker thread whose recorder hands every step to a
/// bounded channel, while this thread formats, writes and flushes one line at a time. So
/// memory holds a few steps rather than the whole trace, and a reader that stops early
/// (`| head -3`) ends the stream: the next send fails, the recorder stops copying tensors,
/// and the run exits 0. Unlike the other formats, an error after the first line leaves the
/// lines before it. Returns the trace (holding its steps only if `keep`, for `--save-trace`)
/// and the model's output.
pub fn stream(
    mut rec: Recorder,
    (keep, print): (bool, &Selection),
    forward: impl FnOnce(&mut Recorder) -> Result<Tensor> + Send,
    out: &mut dyn Write,
) -> Result<(Trace, Tensor)> {
    // A few steps in flight let the model run ahead of a slow reader without holding the trace.
    let (tx, rx) = sync_channel::<Piece>(4);
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || -> Result<(Trace, Tensor, Option<io::Error>)> {
            // A closed channel means the writer stopped (the reader left, or an error).
            let closed = |_| io::Error::from(io::ErrorKind::BrokenPipe);
            tx.send(Piece::Header(render::jsonl::header(rec.trace())?)).map_err(closed)?;
            rec.stream(Box::new(move |step| tx.send(Piece::Step(step)).map_err(closed)), keep);
            let output = forward(&mut rec)?;
            // Dropping the sink drops the sender, which ends the writing loop below.
            let (trace, stopped) = rec.finish();
            Ok((trace, output, stopped))
        });
        let mut w = io::BufWriter::with_capacity(1 << 16, &mut *out);
        let mut written: io::Result<()> = Ok(());
        for piece in rx {
            written = match piece {
                Piece::Header(line) => w.write_all(line.as_bytes()),
                // Only what the views record is printed; the rest was recorded for the file.
                Piece::Step(step) if !print.wants(&step.id, step.layer, &step.name) => Ok(()),
                Piece::Step(mut step) => {
                    print.narrow_heads_of(&mut step);
                    render::jsonl::write_line(&step, &mut w)
                }
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

/// `--timings`: the time each stage of a run took, printed on stderr at the end with the
/// process's peak resident memory; for a stage whose arithmetic is counted (the forward pass,
/// `config::flops`), a line more with its GFLOP/s and their share of the machine's f32 peak,
/// which is measured then ([`peak`]). Off, it measures nothing and prints nothing.
pub struct Clock {
    on: bool,
    start: std::time::Instant,
    last: std::time::Instant,
    /// Each stage's name, time and counted floating-point operations.
    laps: Vec<(&'static str, std::time::Duration, Option<u64>)>,
    /// The largest memory estimate the run was checked against (`settings::limits::check_run`).
    estimate: f64,
}

/// The f32 product `--timings` measures the peak with, after the run: [1024 × 1024]² (2.1
/// GFLOP, about 10 ms on this project's 2 cores), the best of 5 after a warm-up, within
/// 0.25 s. On those cores, quiet, it reads 202–217 GFLOP/s, and `cargo bench --bench peak`'s
/// best (2048³) is 211.7 (BENCHMARKS.md, "Share of the peak").
const PEAK_SIZE: usize = 1024;
const PEAK_RUNS: usize = 5;
const PEAK_BUDGET: std::time::Duration = std::time::Duration::from_millis(250);

impl Clock {
    pub fn new(on: bool) -> Self {
        let now = std::time::Instant::now();
        Clock { on, start: now, last: now, laps: Vec::new(), estimate: 0.0 }
    }

    /// Remembers that the run was checked against an estimate of `bytes` (the largest is kept:
    /// a batch checks one per sentence).
    pub fn estimated(&mut self, bytes: f64) {
        self.estimate = self.estimate.max(bytes);
    }

    /// The largest estimate remembered (0 before any).
    pub fn estimate(&self) -> f64 {
        self.estimate
    }

    /// Ends the stage `name`: the time since the previous lap is its time.
    pub fn lap(&mut self, name: &'static str) {
        self.lap_counted(name, None);
    }

    /// Ends the stage `name`, whose matrix products took `flops` floating-point operations.
    pub fn lap_computing(&mut self, name: &'static str, flops: u64) {
        self.lap_counted(name, Some(flops));
    }

    fn lap_counted(&mut self, name: &'static str, flops: Option<u64>) {
        if self.on {
            let now = std::time::Instant::now();
            self.laps.push((name, now - self.last, flops));
            self.last = now;
        }
    }

    /// Prints the stages on one stderr line (even with `--quiet`: it was asked for); then, if
    /// a stage's operations were counted, measures the f32 peak and prints it on a line, and
    /// one line per counted stage:
    ///
    /// ```text
    /// attn-trace: f32 peak: 183.2 GFLOP/s (candle matmul 1024×1024×1024, 2 threads, best of 5, 0.09 s)
    /// attn-trace: flops: forward pass: 155826782208 FLOP in 4012.3 ms, 38.84 GFLOP/s, 0.212 of the f32 peak
    /// ```
    ///
    /// The peak is measured after the peak memory is read and the stages are timed, so it
    /// changes neither.
    pub fn report(&self) {
        if !self.on {
            return;
        }
        let ms = |d: std::time::Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
        let stages: Vec<String> = self.laps.iter().map(|(n, d, _)| format!("{n} {}", ms(*d))).collect();
        let mib = |b: f64| format!("{:.1} MiB", b / 1048576.0);
        let mut peak = peak_resident().map_or("unknown".to_string(), |b| mib(b as f64));
        if self.estimate > 0.0 {
            peak = format!("{peak} (estimated {})", mib(self.estimate));
        }
        eprintln!(
            "attn-trace: timings: {}; total {}; peak resident memory {peak}",
            stages.join(", "),
            ms(self.start.elapsed())
        );
        let counted: Vec<_> = self.laps.iter().filter_map(|&(n, d, f)| f.map(|f| (n, d, f))).collect();
        if counted.is_empty() {
            return;
        }
        let rate = peak::f32_matmul(PEAK_SIZE, PEAK_RUNS, PEAK_BUDGET).ok();
        if let Some(r) = &rate {
            let (m, k, n) = r.mkn;
            eprintln!(
                "attn-trace: f32 peak: {:.1} GFLOP/s (candle matmul {m}×{k}×{n}, {} threads, best of {}, {:.2} s)",
                r.giga_per_s,
                r.threads,
                r.runs,
                r.took.as_secs_f64()
            );
        }
        for (name, d, flops) in counted {
            let gflops = flops as f64 / 1e9 / d.as_secs_f64().max(1e-9);
            let share = rate.map_or("unknown".to_string(), |r| format!("{:.3}", gflops / r.giga_per_s));
            eprintln!(
                "attn-trace: flops: {name}: {flops} FLOP in {}, {gflops:.2} GFLOP/s, {share} of the f32 peak",
                ms(d)
            );
        }
    }
}

/// The process's peak resident set size in bytes (Linux: `VmHWM` in /proc/self/status).
fn peak_resident() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
