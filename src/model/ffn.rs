//! The position-wise feed-forward network: `ffn.hidden`, `ffn.act`, `ffn.out`; or, gated
//! (SwiGLU, Shazeer 2020, as the Llama family has it), `ffn.gate`, `ffn.up`,
//! `ffn.act` = act(gate) ⊙ up, `ffn.out`.

use super::linear;
use crate::config::{Activation, ModelConfig};
use crate::params::Block;
use crate::trace::Recorder;
use anyhow::Result;
use candle_core::Tensor;

pub fn ffn(cfg: &ModelConfig, p: &Block, x: &Tensor, l: usize, rec: &mut Recorder) -> Result<Tensor> {
    let act = match &p.gate {
        None => {
            let hidden = linear(x, &p.linear1)?; // [pos, d_ff]
            rec.tensor(&format!("layers.{l}.ffn.hidden"), cfg, &hidden)?;
            activation(cfg.activation, &hidden)? // [pos, d_ff]
        }
        Some(gate_proj) => {
            let gate = linear(x, gate_proj)?; // [pos, d_ff]
            rec.tensor(&format!("layers.{l}.ffn.gate"), cfg, &gate)?;
            let up = linear(x, &p.linear1)?; // [pos, d_ff]
            rec.tensor(&format!("layers.{l}.ffn.up"), cfg, &up)?;
            (activation(cfg.activation, &gate)? * up)? // [pos, d_ff]
        }
    };
    rec.tensor(&format!("layers.{l}.ffn.act"), cfg, &act)?;
    let out = linear(&act, &p.linear2)?; // [pos, d_model]
    rec.tensor(&format!("layers.{l}.ffn.out"), cfg, &out)?;
    Ok(out)
}

pub fn activation(a: Activation, x: &Tensor) -> Result<Tensor> {
    Ok(match a {
        Activation::Relu => x.relu()?,
        Activation::Gelu => x.gelu_erf()?,
        Activation::GeluTanh => x.gelu()?,
        Activation::Silu => x.silu()?,
    })
}
