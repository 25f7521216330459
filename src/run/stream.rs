//! `--format jsonl`'s run: each step written as it is computed, the pass on its own thread
//! (`output::stream`), the trace kept only for `--save-trace`.

use super::params::Making;
use super::staged::Run;
use super::{check, pass};
use crate::output;
use crate::settings::Settings;
use crate::trace::Recorder;
use anyhow::{Context, Result};
use std::io::Write;

/// Runs `settings` with its steps streamed to `out`.
pub(super) fn stream(settings: &Settings, out: &mut dyn Write, clock: &mut output::Clock) -> Result<()> {
    let mut run = Run::open(settings, true)?;
    clock.lap("open");
    clock.estimated(run.plan.estimate);
    let params = run.params(Making::Fresh)?;
    // Notes only once the parameters exist, so that a refusal stays one line.
    output::notes(&run.loaded.notes, settings.quiet);
    let mut files = run.weights(&params)?;
    clock.lap("parameters");
    let rec = run.recorder(run.plan.record.clone());
    let flops = run.forward_flops(&params, &rec);
    let (loaded, plan) = (&run.loaded, &run.plan);
    let forward = |rec: &mut Recorder| {
        pass::forward(&loaded.cfg, &params, &loaded.input, (rec, &pass::hooks(loaded))).context("computing the trace")
    };
    let keep = settings.outputs.save_trace.is_some();
    let (mut trace, last) = output::stream(rec, (keep, &plan.view_record), forward, out)?;
    clock.lap_computing("forward pass and streaming", flops);
    let last = check::last(settings, loaded, &params, last)?;
    let saved = plan.save.as_ref().map(|file| trace.split_for_file(&plan.view_record, file));
    let checked = check::testing(settings, loaded, &last, (saved.as_ref().unwrap_or(&trace), &mut files))?.1;
    files.commit()?;
    clock.report();
    checked
}
