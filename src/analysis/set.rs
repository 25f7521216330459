//! `--set STEP=FILE`: a step replaced by a saved tensor, a hook at the step's id. The file is
//! read (and its step id checked) by the run before the pass (`run/set.rs`); here the shape
//! is checked against the step's in this run, and the pass goes on from the saved values.

use crate::config::{ModelConfig, SetStep};
use crate::error::usage;
use crate::hook::{Hook, Site};
use anyhow::Result;
use candle_core::{Device, Tensor};

/// One replaced step.
pub struct Set {
    pub step: SetStep,
}

impl Hook for Set {
    /// The saved tensor in place of `t`. A generation's decode steps (whose pass starts after
    /// position 0) compute their own: the file holds the pass over the input.
    fn at(&self, site: &Site, _: &ModelConfig, t: Tensor) -> Result<Tensor> {
        if site.offset > 0 {
            return Ok(t);
        }
        let s = &self.step;
        if t.dims() != s.shape.as_slice() {
            return Err(usage(
                format!("--set {}", s.step),
                format!("{} has shape {:?}, but {} is {:?} in this run", s.file, s.shape, s.step, t.dims()),
                "save the step from a run of as many tokens, with the same model",
            ));
        }
        let saved = Tensor::from_vec(s.values.to_vec(), t.shape(), &Device::Cpu)?.to_dtype(t.dtype())?;
        Ok(saved)
    }
}
