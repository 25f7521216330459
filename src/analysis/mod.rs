//! The analyses: what a run asks of the forward pass beyond recording it. Each is a set of
//! hooks ([`crate::hook::Hook`]) registered by step id on the pass's port, outside the model:
//! the model computes and names its steps, and knows none of them (as TransformerLens's
//! `run_with_hooks` and llama.cpp's adapters, which live outside the model's graph).
//!
//! One file or folder per analysis; adding one is docs/ARCHITECTURE.md's "Adding an
//! analysis".

pub mod ablate;
pub mod attribute;
pub mod experts;
pub mod interventions;
pub mod knockout;
pub mod lens;
pub mod patch;
pub mod set;
pub mod steer;

use crate::config::ModelConfig;
use crate::hook::Registry;
use crate::params::Params;
use crate::trace::attribute::{Attribution, Request};
use crate::trace::{Recorder, Trace};
use anyhow::Result;

/// The analyses that read a run's pass without changing it, built before the pass: direct
/// logit attribution (`--attribute`) and the logit lens (`--lens`, `--lens-track`).
pub struct Reading<'p> {
    attribute: Option<attribute::Attribute<'p>>,
    lens: Option<lens::Lens<'p>>,
}

/// What the logit lens asks: how many tokens per position (`--top-k`, at least 1), and the
/// ids it follows (`--lens-track`).
pub struct LensAsk {
    pub k: usize,
    pub track: Vec<u32>,
}

impl<'p> Reading<'p> {
    /// The analyses of a pass of `params` over `n` positions.
    pub fn new(
        cfg: &ModelConfig,
        params: &'p Params,
        n: usize,
        (attribution, lens): (Option<Request>, Option<LensAsk>),
    ) -> Result<Reading<'p>> {
        let attribute = attribution.map(|r| attribute::Attribute::new(cfg, params, r, n)).transpose()?;
        let lens = lens.map(|a| lens::Lens::new(cfg, params, a.k, a.track));
        Ok(Reading { attribute, lens })
    }

    /// Adds their hooks to the run's `registry`.
    pub fn register<'h>(&'h self, cfg: &ModelConfig, registry: &mut Registry<'h>) {
        if let Some(a) = &self.attribute {
            a.register(cfg, registry);
        }
        if let Some(l) = &self.lens {
            l.register(cfg, registry);
        }
    }

    /// After the pass: the attribution finished, its steps (`attribution.heads`,
    /// `attribution.sources`) recorded into `rec` as the pass's last, and what the lens read.
    pub fn finish(self, cfg: &ModelConfig, rec: &mut Recorder) -> Result<Read> {
        let attribution = self.attribute.map(|a| a.finish(cfg)).transpose()?;
        if let Some(a) = &attribution {
            attribute::record(cfg, a, rec);
        }
        Ok(Read { attribution, lens: self.lens.map(lens::Lens::finish) })
    }
}

/// What [`Reading`] found, for the trace.
#[derive(Default)]
pub struct Read {
    pub attribution: Option<Attribution>,
    lens: Option<lens::Found>,
}

impl Read {
    /// Sets the trace's `attribution`, `lens` and `lens_track` (those asked for).
    pub fn fill(self, trace: &mut Trace) {
        if let Some(a) = self.attribution {
            trace.attribution = Some(a);
        }
        if let Some(found) = self.lens {
            found.fill(trace);
        }
    }
}
