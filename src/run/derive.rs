//! The run's fourth stage: what the recorded pass gives, derived. The trace taken from the
//! recorder (the generation attached, `--attribute`'s late pass, the predictions named), then
//! the views, `--params`' tables, the notes and `--patch`'s sweep.

use super::staged::Run;
use super::{explain, finish, generate};
use crate::analysis::Read;
use crate::output::{self, Clock};
use crate::params::Params;
use crate::sources::naming;
use crate::trace::generate::Generation;
use crate::trace::{Recorder, Trace};
use crate::views;
use anyhow::Result;

impl Run<'_> {
    /// The trace `rec` recorded, with the generation's record, `--attribute`'s pass where the
    /// run's own could not attribute, and the predictions named by the model's tokenizer.
    pub fn traced(
        &self,
        params: &Params,
        rec: Recorder,
        (generation, read): (Option<Generation>, Read),
    ) -> Result<Trace> {
        let (mut trace, _) = rec.finish();
        trace.generation = generation;
        read.fill(&mut trace);
        explain::explain(self.settings, (&self.loaded, params), &mut trace)?;
        naming::name_predictions(&mut trace, &self.loaded, naming::own_vocab(self.settings));
        Ok(trace)
    }

    /// The views of `trace` (its `--save-trace` part split off first), with every head's map
    /// when `maps`, `--params`' tables, the notes (each also passed to `notes_now`) and
    /// `--patch`'s sweep; `files` is what the run has still to put in place.
    pub(crate) fn derive(
        &self,
        params: &Params,
        mut trace: Trace,
        (maps, reducing): (bool, views::Reducing),
        notes_now: &dyn Fn(&[String]),
        clock: &mut Clock,
        files: output::Pending,
    ) -> Result<finish::Finished> {
        let (settings, loaded, plan) = (self.settings, &self.loaded, &self.plan);
        let saved = finish::file_trace(plan, &mut trace);
        let o = &settings.output.views;
        let seen = views::stacks::seen_as(&trace, o.stack); // an encoder–decoder's attention `--stack` names
        let all_maps =
            maps.then(|| views::maps::maps(seen.as_ref().unwrap_or(&trace), o.merge_pieces, o.average_heads));
        let (trace, mut views) = views::derive(trace, plan, &settings.output)?;
        reducing.fill(&mut views)?;
        clock.lap("views");
        if settings.output.params {
            views.params = Some(views::params::steps(params, &plan.show)?);
        }
        let mut notes = loaded.notes.clone();
        let generated = trace.generation.as_ref().map(|g| generate::notes(loaded, settings.generate.as_ref(), g));
        for said in generated.into_iter().chain(trace.attribution.as_ref().map(views::attribute::notes)) {
            notes_now(&said);
            notes.extend(said);
        }
        if let Some(corrupted) = &settings.analysis.patch {
            notes.extend(self.patch(params, corrupted, (&trace, &mut views), notes_now)?);
            clock.lap("patching sweep");
        }
        views.notes = notes.clone();
        let done = finish::Finished { trace, views, check: None, checked: Ok(()), saved, maps: all_maps, notes, files };
        Ok(done)
    }
}
