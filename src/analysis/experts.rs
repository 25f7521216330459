//! `--ablate-expert L.E`: an ablated expert's router logit becomes −inf, a hook at the
//! layer's `ffn.router.logits`: the softmax gives it probability 0, the others' probabilities
//! are renormalised over the experts left, and top-k never picks it.

use crate::config::ModelConfig;
use crate::hook::{Hook, Site};
use anyhow::Result;
use candle_core::{Device, Tensor};

/// The run's ablated experts as (layer, expert), in the order given.
#[derive(Debug, Clone, Default)]
pub struct Experts {
    pub gone: Vec<(usize, usize)>,
}

impl Hook for Experts {
    /// This layer's router logits ([pos, expert]) with its ablated experts' at −inf.
    fn at(&self, site: &Site, _: &ModelConfig, logits: Tensor) -> Result<Tensor> {
        let layer = site.layer.unwrap_or(0);
        let gone: Vec<usize> = self.gone.iter().filter(|(l, _)| *l == layer).map(|(_, e)| *e).collect();
        if gone.is_empty() {
            return Ok(logits);
        }
        let count = logits.dim(1)?;
        let bias: Vec<f32> = (0..count).map(|e| if gone.contains(&e) { f32::NEG_INFINITY } else { 0.0 }).collect();
        Ok(logits.broadcast_add(&Tensor::from_vec(bias, (1, count), &Device::Cpu)?)?)
    }
}
