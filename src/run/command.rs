//! The command line's run once its settings are read (`crate::command::run` reads the command
//! line and hands them here): a batch, the jsonl stream, or one run written to stdout.

use super::{arithmetic, batch, entry, stream};
use crate::output;
use crate::settings::{Format, Settings};
use crate::views;
use anyhow::Result;
use std::io::Write;

/// Runs `settings`, writing what the command prints to `out`.
pub fn command(settings: &Settings, mut clock: output::Clock, out: &mut dyn Write) -> Result<()> {
    output::check_files(settings)?;
    if let Some(batch) = crate::sources::batch::sentences(settings)? {
        return batch::run(settings, &batch, clock, out);
    }
    if settings.output.format == Format::Jsonl {
        return stream::stream(settings, out, &mut clock);
    }
    let notes = |n: &[String]| output::notes(n, settings.quiet);
    let mut done = entry::finish_timed(settings, &notes, false, &mut clock)?;
    let cut = views::positions::cut(&done.trace, &done.views, settings.output.views.positions.as_ref())?;
    done.files.commit()?; // in place only now that nothing but stdout is left to fail
    output::stdout(cut.trace_or(&done.trace), cut.views_or(&done.views), &settings.output, done.check.as_ref(), out)?;
    if done.checked.is_ok() {
        output::notes(&done.views.screen_notes, settings.quiet);
        output::notes(&arithmetic::ggml_note(settings, &done.trace)?.into_iter().collect::<Vec<_>>(), settings.quiet);
    }
    clock.lap("render and write");
    clock.report();
    done.checked
}
