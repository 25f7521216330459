//! The position-wise feed-forward network: `ffn.hidden`, `ffn.act`, `ffn.out`.

use super::{linear, record};
use crate::config::{Activation, ModelConfig};
use crate::init::LayerParams;
use crate::trace::Trace;
use anyhow::Result;
use candle_core::Tensor;

pub fn ffn(cfg: &ModelConfig, p: &LayerParams, x: &Tensor, l: usize, trace: &mut Trace) -> Result<Tensor> {
    let hidden = linear(x, &p.linear1)?; // [pos, d_ff]
    record(trace, &format!("layers.{l}.ffn.hidden"), &["pos", "d_ff"], &hidden)?;
    let act = match cfg.activation {
        Activation::Relu => hidden.relu()?,
        Activation::Gelu => hidden.gelu_erf()?,
        Activation::GeluTanh => hidden.gelu()?,
    }; // [pos, d_ff]
    record(trace, &format!("layers.{l}.ffn.act"), &["pos", "d_ff"], &act)?;
    let out = linear(&act, &p.linear2)?; // [pos, d_model]
    record(trace, &format!("layers.{l}.ffn.out"), &["pos", "d_model"], &out)?;
    Ok(out)
}
