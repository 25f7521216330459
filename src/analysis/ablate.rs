//! `--ablate L.H` (and an encoder–decoder's `dec.L.H`, `cross.L.H`): an ablated head's
//! context becomes zero (transformers' `head_mask`) or its mean over positions
//! (`--ablate-mode mean`) before the output projection, a hook at the layer's `attn.context`
//! (`cross_attn.context`): the recorded context shows the change and everything after follows.

use crate::config::{AblateMode, ModelConfig};
use crate::hook::{Hook, Site};
use anyhow::Result;
use candle_core::{Device, Tensor, D};

/// Ablated heads as (layer, head), in the order given, and what their context becomes.
#[derive(Debug, Clone, Default)]
pub struct Heads {
    pub heads: Vec<(usize, usize)>,
    pub mode: Option<AblateMode>,
}

impl Hook for Heads {
    fn at(&self, site: &Site, _: &ModelConfig, context: Tensor) -> Result<Tensor> {
        let layer = site.layer.unwrap_or(0);
        let heads: Vec<usize> = self.heads.iter().filter(|(l, _)| *l == layer).map(|(_, h)| *h).collect();
        drop_heads(&heads, self.mode, context)
    }
}

/// `context` [head, pos, d_v] with `heads` zeroed, or replaced by their mean over positions.
pub fn drop_heads(heads: &[usize], mode: Option<AblateMode>, context: Tensor) -> Result<Tensor> {
    if heads.is_empty() {
        return Ok(context);
    }
    let h = context.dim(0)?;
    let keep: Vec<f32> = (0..h).map(|g| if heads.contains(&g) { 0.0 } else { 1.0 }).collect();
    let keep = Tensor::from_vec(keep, (h, 1, 1), &Device::Cpu)?; // [head, 1, 1]
    let kept = context.broadcast_mul(&keep)?; // [head, pos, d_v]
    if mode != Some(AblateMode::Mean) {
        return Ok(kept);
    }
    let mean = context.mean_keepdim(D::Minus2)?.broadcast_as(context.shape())?; // [head, pos, d_v]
    let dropped = keep.affine(-1.0, 1.0)?; // 1 where ablated
    Ok((kept + mean.broadcast_mul(&dropped)?)?)
}

/// `--ablate STEP`: steps (full ids) zeroed, or replaced by their mean over positions (the
/// first `pos` axis the catalogue gives the step: `query_pos` for the scores), as a head's
/// context is. A step without positions has no mean: it is zeroed in either mode.
#[derive(Debug, Clone, Default)]
pub struct Steps {
    pub steps: Vec<String>,
    pub mode: Option<AblateMode>,
}

impl Hook for Steps {
    fn at(&self, site: &Site, cfg: &ModelConfig, t: Tensor) -> Result<Tensor> {
        let axis = crate::trace::steps::dims(site.name, cfg).iter().position(|d| d.ends_with("pos"));
        match (self.mode, axis) {
            (Some(AblateMode::Mean), Some(axis)) => Ok(t.mean_keepdim(axis)?.broadcast_as(t.shape())?.contiguous()?),
            _ => Ok(t.zeros_like()?),
        }
    }
}
