//! The position-wise feed-forward network: `ffn.hidden`, `ffn.act`, `ffn.out`.

use super::linear;
use crate::config::{Activation, ModelConfig};
use crate::sources::params::LayerParams;
use crate::trace::Recorder;
use anyhow::Result;
use candle_core::Tensor;

pub fn ffn(cfg: &ModelConfig, p: &LayerParams, x: &Tensor, l: usize, rec: &mut Recorder) -> Result<Tensor> {
    let hidden = linear(x, &p.linear1)?; // [pos, d_ff]
    rec.tensor(&format!("layers.{l}.ffn.hidden"), cfg, &hidden)?;
    let act = match cfg.activation {
        Activation::Relu => hidden.relu()?,
        Activation::Gelu => hidden.gelu_erf()?,
        Activation::GeluTanh => hidden.gelu()?,
    }; // [pos, d_ff]
    rec.tensor(&format!("layers.{l}.ffn.act"), cfg, &act)?;
    let out = linear(&act, &p.linear2)?; // [pos, d_model]
    rec.tensor(&format!("layers.{l}.ffn.out"), cfg, &out)?;
    Ok(out)
}
