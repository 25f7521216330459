//! The run's first stage: the sources the settings name opened, the plan made and checked
//! against the model, and every refusal that needs no parameter (`--max-output`, the memory
//! estimate, `--check` where it could not compare), before anything is computed.

use super::staged::Run;
use super::{check, explain, generate};
use crate::settings::{self, plan::Plan, Settings};
use crate::sources::{self, Loaded, Source};
use anyhow::Result;

impl<'s> Run<'s> {
    /// Opens the sources `settings` names and checks the settings against the model, with
    /// `--max-output` checked first when the steps are `printed` (on stdout, or in a server's
    /// answer; not the Python API's trace, which prints nothing unless asked).
    pub fn open(settings: &'s Settings, printed: bool) -> Result<Self> {
        let (loaded, source, plan) = opened(settings, printed)?;
        Ok(Run { settings, loaded, plan, source: Some(source) })
    }

    /// The Python API's trace keeps every shown step and every head's map
    /// ([`Plan::for_maps`]); the memory is checked again for what that records.
    pub(crate) fn keep_for_maps(&mut self) -> Result<()> {
        let plan = &mut self.plan;
        plan.for_maps();
        let n = self.loaded.tokens.len();
        settings::limits::check_run(
            (&self.loaded.cfg, &self.loaded.run),
            n,
            (&plan.record, plan.streamed),
            self.settings,
        )
        .map(|e| plan.estimate = e)
    }

    /// Whether a server converts the model's layers once for all its requests (they fit
    /// `--max-memory` whole); the clock is given the larger estimate.
    pub(crate) fn layers_made(&self, clock: &mut crate::output::Clock) -> bool {
        let (n, record) = (self.loaded.tokens.len(), (&self.plan.record, self.plan.streamed));
        let whole = sources::memo::makes_layers().then(|| {
            settings::limits::whole_model_fits((&self.loaded.cfg, &self.loaded.run), n, record, self.settings)
        });
        clock.estimated(self.plan.estimate.max(whole.flatten().unwrap_or_default()));
        whole.flatten().is_some()
    }
}

/// Opens the sources the settings name and checks the settings against the model: [`Run::open`]
/// as its parts (the parameters not yet made), for `compare`'s sides, tests and benchmarks.
pub fn prepare(settings: &Settings) -> Result<(Loaded, Source, Plan)> {
    opened(settings, false)
}

fn opened(settings: &Settings, printed: bool) -> Result<(Loaded, Source, Plan)> {
    let (mut loaded, source) = sources::open(settings)?;
    loaded.run.query_tile = settings.query_tile;
    let mut plan = Plan::new(settings, &loaded.cfg, &loaded.tokens, loaded.texts().as_deref())?;
    plan.attribution = explain::request(settings, &loaded)?;
    sources::tracked::lens_track(settings, &loaded)?;
    if printed {
        let (n, out) = (loaded.tokens.len(), &settings.output);
        settings::limits::output::check(&loaded.cfg, n, &plan.show, out, settings.max_output)?;
    }
    // Before any parameter or activation exists: the estimate follows what the plan records.
    // A generation's decode steps record at most what a pass over the whole sequence would.
    let n = generate::positions(settings, &loaded)?;
    plan.estimate =
        settings::limits::check_run((&loaded.cfg, &loaded.run), n, (&plan.record, plan.streamed), settings)?;
    // What the forward pass changes is part of the configuration the trace records.
    loaded.cfg.interventions = plan.interventions.clone();
    settings::stacks::apply_decoder(&settings.analysis, &mut loaded.cfg)?;
    loaded.notes.extend(crate::model::intervene::blind_note(&loaded.cfg, &loaded.tokens));
    check::refuse_early(settings, &loaded)?;
    Ok((loaded, source, plan))
}
