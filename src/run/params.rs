//! The run's second stage: the parameters made from the opened source, with `--steer`'s
//! vectors read or measured first (`steer.rs`: `--steer-from` runs the model on its two
//! prompts) and put in the configuration the run records; `--save-weights`' file prepared.

use super::staged::Run;
use super::steer;
use crate::output;
use crate::params::Params;
use anyhow::{anyhow, Result};

/// How the source's parameters are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Making {
    /// Read for this run alone.
    Fresh,
    /// Kept where a `sources::memo` scope keeps them (a batch, a server), `made`: with the
    /// layers converted once for all the runs.
    Kept { made: bool },
}

impl Run<'_> {
    /// The parameters, the configuration given `--steer`'s vectors (read and checked first,
    /// so that a bad file is refused before any parameter is read).
    pub fn params(&mut self, making: Making) -> Result<Params> {
        let source = self.source.take().ok_or_else(|| anyhow!("internal: a run's parameters are made once"))?;
        steer::params(self.settings, &mut self.loaded, |l| match making {
            Making::Fresh => source.params(l),
            Making::Kept { made } => source.params_once(l, made),
        })
    }

    /// `--save-weights`' file, not yet in place (the caller commits it).
    pub fn weights(&self, params: &Params) -> Result<output::Pending> {
        let mut files = output::Pending::default();
        output::save_weights(params, &self.loaded, self.settings.outputs.save_weights.as_deref(), &mut files)?;
        Ok(files)
    }
}
