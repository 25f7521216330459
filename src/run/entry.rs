//! The run's stages in order, as each entry calls them: [`trace`] (the library's pipeline
//! without views or files, for tests, benchmarks and other programs), [`computed`] (up to
//! the files: a batch's sentence, a server's request) and [`finish`] (the whole run: the
//! command line's and the Python API's).

use super::check::{self, Last};
use super::finish::{self as last_stage, Finished};
use super::params::Making;
use super::staged::Run;
use crate::output;
use crate::settings::{plan::Plan, Settings};
use crate::sources::Loaded;
use crate::trace::Trace;
use crate::views;
use anyhow::Result;

/// A computed run: the trace and what it was computed from.
pub struct Traced {
    pub trace: Trace,
    /// The model's final output, `[pos, d_model]` (for `--check`).
    pub output: candle_core::Tensor,
    pub loaded: Loaded,
    pub plan: Plan,
}

/// Computes the trace the settings describe, keeping the steps they show: the library's
/// pipeline in one call, without views or rendering (`--save-weights` is still honoured).
pub fn trace(settings: &Settings) -> Result<Traced> {
    let mut run = Run::open(settings, false)?;
    let params = run.params(Making::Fresh)?;
    run.weights(&params)?.commit()?;
    let mut rec = run.recorder(run.plan.show.clone());
    let (output, generation, read) = run.record(&params, &mut rec)?;
    let trace = run.traced(&params, rec, (generation, read))?;
    Ok(Traced { trace, output, loaded: run.loaded, plan: run.plan })
}

/// As [`trace`], returning the trace alone.
pub fn compute(settings: &Settings) -> Result<Trace> {
    Ok(trace(settings)?.trace)
}

/// Computes the run `settings` describe, up to its output: the parameters, the trace, the
/// views, `--patch`, the files (`--save-weights`, `--html`, `--svg`, `--save-trace`) and
/// `--check`. `notes` is called once the parameters exist, so that a refusal stays one line.
pub fn finish(settings: &Settings, notes: &dyn Fn(&[String]), maps: bool) -> Result<Finished> {
    output::check_files(settings)?; // as the command does: a missing folder before the run
    let mut done = finish_timed(settings, notes, maps, &mut output::Clock::new(false))?;
    done.files.commit()?;
    Ok(done)
}

/// [`finish`] timed, its files not yet in place.
pub(super) fn finish_timed(
    settings: &Settings,
    notes: &dyn Fn(&[String]),
    maps: bool,
    clock: &mut output::Clock,
) -> Result<Finished> {
    let (done, loaded, last) = computed(settings, notes, maps, clock)?;
    last_stage::finish(settings, &loaded, &last, done)
}

/// The run up to its files: every stage but the last, with the sources it was computed from
/// and the model's output (for `--check`). A batch's sentences and a server's requests stop
/// here.
pub(crate) fn computed(
    settings: &Settings,
    notes_now: &dyn Fn(&[String]),
    maps: bool,
    clock: &mut output::Clock,
) -> Result<(Finished, Loaded, Last)> {
    let mut run = Run::open(settings, !maps)?;
    if maps {
        run.keep_for_maps()?;
    }
    clock.lap("open");
    let made = run.layers_made(clock);
    let params = run.params(Making::Kept { made })?;
    notes_now(&run.loaded.notes);
    let files = run.weights(&params)?;
    clock.lap("parameters");
    let mut rec = run.recorder(run.plan.record.clone());
    let lm = run.loaded.cfg.parts.lm_head.is_some();
    let reducing = views::Reducing::attach(&run.plan, &mut rec, &run.loaded.tokens, lm);
    let (last, generation, read) = run.record(&params, &mut rec)?;
    let last = check::last(settings, &run.loaded, &params, last)?;
    let (what, flops) = run.flops(&params, &rec, generation.as_ref());
    clock.lap_computing(what, flops);
    let trace = run.traced(&params, rec, (generation, read))?;
    let done = run.derive(&params, trace, (maps, reducing), notes_now, clock, files)?;
    Ok((done, run.loaded, last))
}
