//! The run's last stage: the files (`--html`, `--svg`, `--save-trace`) and `--check`, before
//! anything goes to stdout; what the command prints and what the Python API's `trace` returns.

use super::check;
use crate::output;
use crate::settings::{plan::Plan, Settings};
use crate::sources::Loaded;
use crate::trace::{Selection, Trace};
use crate::views::{self, Views};
use anyhow::Result;

/// A run computed, its files written, before anything goes to stdout: what the command
/// prints, and what the Python API's `trace` returns.
pub struct Finished {
    /// The shown steps.
    pub trace: Trace,
    pub views: Views,
    /// `--check`'s report, and its verdict (an `Err` to end the run with after the output).
    pub check: Option<serde_json::Value>,
    pub checked: Result<()>,
    /// `--save-trace`'s steps, when they are not the shown ones (`Plan::save`).
    pub saved: Option<Trace>,
    /// With `maps`: every recorded head's attention map, for an HTML page drawn later (the
    /// Python API's notebook view), whatever `--steps` shows.
    pub maps: Option<views::maps::Maps>,
    /// The notes the run gave (also passed to `notes` as soon as the parameters exist).
    pub notes: Vec<String>,
    /// Files not yet in place (`finish` commits them; the command, just before stdout).
    pub files: output::Pending,
}

/// The last stage of `done`, a run of `settings` on `loaded` whose model gave `last`: its
/// views' files (`--html`, `--svg`), `--save-trace` and `--check`, all still pending in
/// `done.files`.
pub(super) fn finish(settings: &Settings, loaded: &Loaded, last: &check::Last, mut done: Finished) -> Result<Finished> {
    output::view_files(&done.trace, &done.views, &settings.output, &mut done.files)?;
    let saved = done.saved.as_ref().unwrap_or(&done.trace);
    let (check, checked) = check::testing(settings, loaded, last, (saved, &mut done.files))?;
    Ok(Finished { check, checked, ..done })
}

/// `--save-trace`'s own trace, split off what was recorded for it and the views alike
/// (`Trace::split_for_file`); None when the shown steps are the file's (everything recorded is
/// shown and the file wants every step), which spares a copy of the whole trace.
pub(super) fn file_trace(plan: &Plan, trace: &mut Trace) -> Option<Trace> {
    let file = plan.save.as_ref()?;
    if plan.record == plan.show && *file == Selection::default() {
        return None;
    }
    Some(trace.split_for_file(&plan.view_record, file))
}
