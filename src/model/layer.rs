//! One encoder layer: attention and FFN, each wrapped in a residual sum and a LayerNorm.
//!
//! Post-norm (the seeds, Vaswani et al. 2017): `add_norm1.out = LN(x + attn(x))`, then
//! `add_norm2.out = LN(add_norm1.out + ffn(add_norm1.out))`. Pre-norm (as
//! `nn.TransformerEncoderLayer(norm_first=True)`): `norm1.out = LN(x)`,
//! `add_norm1.sum = x + attn(norm1.out)`, `norm2.out = LN(add_norm1.sum)`,
//! `add_norm2.sum = add_norm1.sum + ffn(norm2.out)`, which is the layer's output.

use super::norm::layer_norm;
use super::{attention::attention, ffn::ffn, record};
use crate::config::{ModelConfig, Norm};
use crate::init::LayerParams;
use crate::trace::Trace;
use anyhow::Result;
use candle_core::Tensor;

const ROWS: &[&str] = &["pos", "d_model"];

pub fn layer(cfg: &ModelConfig, p: &LayerParams, x: &Tensor, l: usize, trace: &mut Trace) -> Result<Tensor> {
    let id = |name: &str| format!("layers.{l}.{name}");
    match cfg.norm {
        Norm::Post => {
            let attn_out = attention(cfg, p, x, l, trace)?; // [pos, d_model]
            let sum1 = (x + &attn_out)?; // [pos, d_model]
            record(trace, &id("add_norm1.sum"), ROWS, &sum1)?;
            let out1 = layer_norm(&sum1, &p.norm1, cfg.eps)?; // [pos, d_model]
            record(trace, &id("add_norm1.out"), ROWS, &out1)?;
            let ffn_out = ffn(cfg, p, &out1, l, trace)?; // [pos, d_model]
            let sum2 = (&out1 + &ffn_out)?; // [pos, d_model]
            record(trace, &id("add_norm2.sum"), ROWS, &sum2)?;
            let out2 = layer_norm(&sum2, &p.norm2, cfg.eps)?; // [pos, d_model]
            record(trace, &id("add_norm2.out"), ROWS, &out2)?;
            Ok(out2)
        }
        Norm::Pre => {
            let normed1 = layer_norm(x, &p.norm1, cfg.eps)?; // [pos, d_model]
            record(trace, &id("norm1.out"), ROWS, &normed1)?;
            let attn_out = attention(cfg, p, &normed1, l, trace)?; // [pos, d_model]
            let sum1 = (x + &attn_out)?; // [pos, d_model]
            record(trace, &id("add_norm1.sum"), ROWS, &sum1)?;
            let normed2 = layer_norm(&sum1, &p.norm2, cfg.eps)?; // [pos, d_model]
            record(trace, &id("norm2.out"), ROWS, &normed2)?;
            let ffn_out = ffn(cfg, p, &normed2, l, trace)?; // [pos, d_model]
            let sum2 = (&sum1 + &ffn_out)?; // [pos, d_model]: the layer's output
            record(trace, &id("add_norm2.sum"), ROWS, &sum2)?;
            Ok(sum2)
        }
    }
}
