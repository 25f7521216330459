//! The run's third stage: the model's pass recorded, one forward pass or with `--generate` a
//! generation (`generate.rs`); the calls into the model themselves are `pass.rs`'s.

use super::staged::Run;
use super::{generate, pass};
use crate::analysis::interventions::Interventions;
use crate::analysis::Read;
use crate::params::Params;
use crate::trace::generate::Generation;
use crate::trace::{Recorder, Selection};
use anyhow::{Context, Result};
use candle_core::Tensor;

impl Run<'_> {
    /// A recorder for this run that keeps what `selection` wants (`pass::recorder`).
    pub fn recorder(&self, selection: Selection) -> Recorder {
        pass::recorder(&self.loaded, selection, self.settings)
    }

    /// The forward pass into `rec`, or with `--generate` a generation whose prompt pass it
    /// is, with the analyses that read it (`--attribute`, `--lens`); returns the last hidden
    /// state, the generation's record and what the analyses found.
    pub fn record(&self, params: &Params, rec: &mut Recorder) -> Result<(Tensor, Option<Generation>, Read)> {
        let (settings, loaded, plan) = (self.settings, &self.loaded, &self.plan);
        let reading = pass::reading(settings, (loaded, params, plan.attribution.clone()))?;
        // The interventions first: the analyses that read the pass see what it goes on with.
        let iv = Interventions::of(&loaded.cfg);
        let mut hooks = pass::hooks(loaded, &iv);
        reading.register(&loaded.cfg, &mut hooks);
        let (last, generation) = match &settings.generate {
            Some(asked) => {
                let (last, generation) = generate::run(settings, (loaded, params, plan), (rec, &hooks), asked)?;
                (last, Some(generation))
            }
            None => {
                let last =
                    pass::forward(&loaded.cfg, params, &loaded.input, (rec, &hooks)).context("computing the trace")?;
                (last, None)
            }
        };
        Ok((last, generation, reading.finish(&loaded.cfg, rec)?))
    }

    /// The floating-point operations of the forward pass `rec` is about to record, for
    /// `--timings` (`pass::forward_flops`).
    pub fn forward_flops(&self, params: &Params, rec: &Recorder) -> u64 {
        pass::forward_flops(&self.loaded, params, rec, self.settings.analysis.lens)
    }

    /// What [`Run::record`] computed, for `--timings`: its name and floating-point operations.
    pub(crate) fn flops(&self, params: &Params, rec: &Recorder, g: Option<&Generation>) -> (&'static str, u64) {
        match g {
            Some(g) => ("generation", generate::flops(&self.loaded, g)),
            None => ("forward pass", self.forward_flops(params, rec)),
        }
    }
}
