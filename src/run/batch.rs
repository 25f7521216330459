//! A batch (`--batch FILE`, or several sentences): the single run's pipeline once per
//! sentence with the same settings, the rendered traces kept until all are computed and then
//! written together, so an error in any leaves stdout empty and writes no file.
//!
//! The memory cap holds for the whole batch, not only for each sentence: what the batch keeps
//! for the sentences before (their rendered output, exactly as many bytes as will be written,
//! and their `--html`/`--svg` parts) is counted with each sentence's own estimate
//! (`Settings::held`), so a batch that would outgrow `--max-memory` is refused at the
//! sentence where it would, before that sentence allocates anything. A model's tokenizer is
//! parsed once for the batch, and a decoder's parameters converted once (`sources::memo`),
//! not once per sentence; they are the parameters each sentence's estimate counts, shared.

use super::entry::computed;
use crate::settings::{self, Settings};
use crate::{output, sources};
use anyhow::{Context, Result};
use std::io::Write;

/// Traces every sentence of `batch` (the summary table reduced as a single run reduces it),
/// renders each, and writes them together once all are computed. `--html` and `--svg` get one
/// section or block per sentence. Notes are printed once each, however many sentences give
/// them.
pub fn run(
    settings: &Settings,
    batch: &[sources::batch::Entry],
    mut clock: output::Clock,
    out: &mut dyn Write,
) -> Result<()> {
    settings::outputs::check_batch(settings)?;
    let mut items: Vec<Vec<u8>> = Vec::with_capacity(batch.len());
    let mut notes: Vec<String> = Vec::new();
    let mut files = output::BatchViews::default();
    let mut held = 0u128;
    // A model's tokenizer, and a decoder's parameters, are made once for all the sentences.
    let _once = sources::memo::Scope::new();
    for (i, entry) in batch.iter().enumerate() {
        let mut one = settings.for_sentence(&entry.sentence);
        one.held = held;
        // The single run's pipeline up to its files; check_batch refused every other file.
        let mut traced = || -> Result<Vec<u8>> {
            let mut own = output::Clock::new(false);
            let (done, _, _) = computed(&one, &|_| {}, false, &mut own)?;
            clock.estimated(own.estimate());
            notes.extend(done.notes.iter().filter(|n| !notes.contains(n)).cloned().collect::<Vec<_>>());
            files.add(&done.trace, &done.views, &one, (i, batch.len()))?;
            let mut item = output::batch_item(&done.trace, &done.views, &one.output, (i, batch.len()))?;
            // Kept until the end: exactly its bytes, not the buffer's spare room.
            item.shrink_to_fit();
            Ok(item)
        };
        items.push(traced().with_context(|| entry.label.clone())?);
        let printed: u128 = items.iter().map(|b| b.len() as u128).sum();
        // Each sentence's output was checked before it ran; together they must fit too.
        settings::limits::output::check_printed(printed as f64, i + 1, settings.max_output)?;
        held = printed + files.held() as u128;
    }
    let what = format!("of results for the batch's {} sentences", batch.len());
    settings::limits::check_bytes(held as f64, &what, settings.max_memory, settings.memory_available)?;
    clock.lap("traces");
    output::notes(&notes, settings.quiet);
    files.write(&settings.output)?;
    output::batch(&items, settings.output.format, out)?;
    clock.lap("render and write");
    clock.report();
    Ok(())
}
