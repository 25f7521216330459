//! `--steer`, `--steer-from` (activation addition, Turner et al. 2023): `alpha × vector` is
//! added to a layer's output at every absolute position from the vector's `from` on, a hook
//! at the step that is the layer's output: `add_norm2.sum` (pre-norm, parallel),
//! `add_norm2.out` (post-norm), or for an attention-only layer the unrecorded site
//! [`OUTPUT`] after its recorded `attn.out` (which shows the output before any steering).

use crate::config::{self, ModelConfig, Norm};
use crate::hook::{Hook, Site};
use anyhow::Result;
use candle_core::{Device, Tensor};

/// An attention-only layer's output after its recorded `attn.out` (`model/layer.rs`): a hook
/// site the trace does not record.
pub const OUTPUT: &str = "output";

/// The run's steering vectors, in the order given.
#[derive(Debug, Clone, Default)]
pub struct Steer {
    pub vectors: Vec<config::Steer>,
}

impl Steer {
    /// The step (without layer) that is a layer's output in a model of `cfg`.
    pub fn step(cfg: &ModelConfig) -> &'static str {
        match (cfg.parts.attention_only, cfg.norm) {
            (true, _) => OUTPUT,
            (false, Norm::Post) => "add_norm2.out",
            (false, _) => "add_norm2.sum",
        }
    }
}

impl Hook for Steer {
    /// The layer's output `x` ([pos, d_model] for the absolute positions from `site.offset`
    /// on; a decode step has one) plus every steering vector of the layer.
    fn at(&self, site: &Site, _: &ModelConfig, x: Tensor) -> Result<Tensor> {
        let (layer, offset) = (site.layer.unwrap_or(0), site.offset);
        let mut x = x;
        for s in self.vectors.iter().filter(|s| s.layer == layer) {
            let (n, d) = x.dims2()?;
            let first = s.from.saturating_sub(offset).min(n);
            if first == n {
                continue;
            }
            let add: Vec<f32> = s.vector.iter().map(|v| s.alpha * v).collect();
            let add = Tensor::from_vec(add, (1, d), &Device::Cpu)?; // [1, d_model]
            x = match first {
                0 => x.broadcast_add(&add)?,
                _ => Tensor::cat(&[&x.narrow(0, 0, first)?, &x.narrow(0, first, n - first)?.broadcast_add(&add)?], 0)?,
            };
        }
        Ok(x)
    }
}
