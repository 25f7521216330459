//! One encoder layer: attention and FFN, each wrapped in a residual sum and a LayerNorm.
//!
//! Post-norm (the seeds, Vaswani et al. 2017): `add_norm1.out = LN(x + attn(x))`, then
//! `add_norm2.out = LN(add_norm1.out + ffn(add_norm1.out))`. Pre-norm (as
//! `nn.TransformerEncoderLayer(norm_first=True)`): `norm1.out = LN(x)`,
//! `add_norm1.sum = x + attn(norm1.out)`, `norm2.out = LN(add_norm1.sum)`,
//! `add_norm2.sum = add_norm1.sum + ffn(norm2.out)`, which is the layer's output.
//! Gemma's sandwich norms add a norm of each sublayer's output before its sum:
//! `norm1_post.out = RMS(attn.out)`, `add_norm1.sum = x + norm1_post.out`, and likewise
//! `norm2_post.out` of `ffn.out`.
//! A decoder layer of an encoder–decoder has a cross-attention sublayer after its
//! self-attention's (`cross.rs`): `add_norm_cross.sum` (and `.out` post-norm).
//! An attention-only layer (a textbook's `MultiHeadAttention` module) is the attention
//! alone: its output is `attn.out`. A parallel layer (GPT-NeoX, `config.parallel`) is
//! pre-norm with both sublayers reading the layer input: `add_norm2.sum = x + attn(norm1(x))
//! + ffn(norm2(x))`, with no `add_norm1.sum`.

use super::norm::norm;
use super::pass::Pass;
use super::{attention::attention, cross, ffn::ffn};
use crate::config::{ModelConfig, Norm};
use crate::hook::Hooks;
use crate::params::{Block, LayerNorm, LayerParams};
use anyhow::Result;
use candle_core::Tensor;

/// Layer `l` on `x`; `pass` carries a generation's cache, an encoder's output or T5's bias,
/// if any (`pass.rs`).
pub fn layer(
    cfg: &ModelConfig,
    p: &LayerParams,
    x: &Tensor,
    l: usize,
    pass: &mut Pass,
    hooks: &mut Hooks,
) -> Result<Tensor> {
    let Some(b) = &p.block else {
        // An attention-only layer's output is its recorded attn.out: a hook (steering) there
        // changes what the next layer reads, not the recorded attn.out.
        let out = attention(cfg, p, x, l, pass, hooks)?; // [pos, d_out]
        return hooks.through(&format!("layers.{l}.output"), cfg, out);
    };
    match cfg.norm {
        Norm::Post => {
            let attn_out = attention(cfg, p, x, l, pass, hooks)?; // [pos, d_model]
            let sum1 = (x + &attn_out)?; // [pos, d_model]
            let sum1 = hooks.at(&format!("layers.{l}.add_norm1.sum"), cfg, sum1)?;
            let out1 = norm(&sum1, &b.norm1, cfg)?; // [pos, d_model]
            let out1 = hooks.at(&format!("layers.{l}.add_norm1.out"), cfg, out1)?;
            let out1 = cross::sublayer(cfg, p, out1, (l, pass), hooks)?; // [pos, d_model]
            let ffn_out = ffn(cfg, b, &out1, l, hooks)?; // [pos, d_model]
            let sum2 = (&out1 + &ffn_out)?; // [pos, d_model]
            let sum2 = hooks.at(&format!("layers.{l}.add_norm2.sum"), cfg, sum2)?;
            let out2 = norm(&sum2, &b.norm2, cfg)?; // [pos, d_model]: the layer's output
            let out2 = hooks.at(&format!("layers.{l}.add_norm2.out"), cfg, out2)?;
            Ok(out2)
        }
        Norm::Pre if cfg.parts.parallel => parallel(cfg, (p, b), x, (l, pass), hooks),
        Norm::Pre => {
            let normed1 = norm(x, &b.norm1, cfg)?; // [pos, d_model]
            let normed1 = hooks.at(&format!("layers.{l}.norm1.out"), cfg, normed1)?;
            let attn_out = attention(cfg, p, &normed1, l, pass, hooks)?; // [pos, d_model]
            let attn_out =
                post_norm(cfg, b.post_attn_norm.as_ref(), attn_out, &format!("layers.{l}.norm1_post.out"), hooks)?; // [pos, d_model]
            let sum1 = (x + &attn_out)?; // [pos, d_model]
            let sum1 = hooks.at(&format!("layers.{l}.add_norm1.sum"), cfg, sum1)?;
            let sum1 = cross::sublayer(cfg, p, sum1, (l, pass), hooks)?; // [pos, d_model]
            let normed2 = norm(&sum1, &b.norm2, cfg)?; // [pos, d_model]
            let normed2 = hooks.at(&format!("layers.{l}.norm2.out"), cfg, normed2)?;
            let ffn_out = ffn(cfg, b, &normed2, l, hooks)?; // [pos, d_model]
            let ffn_out =
                post_norm(cfg, b.post_ffn_norm.as_ref(), ffn_out, &format!("layers.{l}.norm2_post.out"), hooks)?; // [pos, d_model]
            let sum2 = (&sum1 + &ffn_out)?; // [pos, d_model]: the layer's output
            let sum2 = hooks.at(&format!("layers.{l}.add_norm2.sum"), cfg, sum2)?;
            Ok(sum2)
        }
    }
}

/// GPT-NeoX's parallel layer (`use_parallel_residual`): attention and FFN both read the layer
/// input, so there is no residual sum between them.
fn parallel(
    cfg: &ModelConfig,
    (p, b): (&LayerParams, &Block),
    x: &Tensor,
    (l, pass): (usize, &mut Pass),
    hooks: &mut Hooks,
) -> Result<Tensor> {
    let normed1 = norm(x, &b.norm1, cfg)?; // [pos, d_model]
    let normed1 = hooks.at(&format!("layers.{l}.norm1.out"), cfg, normed1)?;
    let attn_out = attention(cfg, p, &normed1, l, pass, hooks)?; // [pos, d_model]
    let normed2 = norm(x, &b.norm2, cfg)?; // [pos, d_model]: the layer input's, not a sum's
    let normed2 = hooks.at(&format!("layers.{l}.norm2.out"), cfg, normed2)?;
    let ffn_out = ffn(cfg, b, &normed2, l, hooks)?; // [pos, d_model]
                                                    // (ffn + attn) + x, in transformers' order, so the sum is the same to the last bit.
    let sum = ((&ffn_out + &attn_out)? + x)?; // [pos, d_model]: the layer's output
    let sum = hooks.at(&format!("layers.{l}.add_norm2.sum"), cfg, sum)?;
    Ok(sum)
}

/// A sandwich norm (Gemma): the norm of a sublayer's output before its residual sum,
/// recorded as `id`; the output itself where the block has none.
fn post_norm(cfg: &ModelConfig, p: Option<&LayerNorm>, out: Tensor, id: &str, hooks: &mut Hooks) -> Result<Tensor> {
    let Some(p) = p else { return Ok(out) };
    let normed = norm(&out, p, cfg)?; // [pos, d_model]
    let normed = hooks.at(id, cfg, normed)?;
    Ok(normed)
}
