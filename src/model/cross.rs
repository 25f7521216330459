//! Cross-attention (Vaswani et al. 2017, §3.2.3, "encoder–decoder attention"): an
//! encoder–decoder's decoder layer reads the encoder's output after its own tokens. Queries
//! come from the decoder's residual stream, keys and values from the encoder's output, so
//! every map is decoder positions × encoder positions: `cross_attn.q/k/v`,
//! `cross_attn.raw_scores`, `.scores`, `.weights`, `.context`, `.concat`, `.out`. No mask
//! (every decoder token may read every source token) and no position bias (T5 gives its
//! cross-attention none). A generation makes the keys and values once, in its cache: the
//! encoder's output is the same at every decode step.

use super::kernels::linear::linear;
use super::norm::norm;
use super::pass::{KvCache, Pass};
use crate::config::{ModelConfig, Norm};
use crate::hook::Hooks;
use crate::params::{Cross, LayerParams};
use anyhow::Result;
use candle_core::Tensor;

/// The cross-attention sublayer on `x`, the residual stream after the self-attention's sum
/// (post-norm: after its norm), `[pos, d_model]`, with its residual sum and norm; `x` itself
/// where layer `l` has none or there is no `memory`.
pub fn sublayer(
    cfg: &ModelConfig,
    p: &LayerParams,
    x: Tensor,
    (l, pass): (usize, &mut Pass),
    hooks: &mut Hooks,
) -> Result<Tensor> {
    let (Some(c), Some(memory)) = (&p.cross, pass.memory) else { return Ok(x) };
    let cache = pass.cache.as_deref_mut();
    match cfg.norm {
        Norm::Pre => {
            let normed = norm(&x, &c.norm, cfg)?; // [pos, d_model]
            let normed = hooks.at(&format!("layers.{l}.norm_cross.out"), cfg, normed)?;
            let out = attend(cfg, c, (&normed, memory, cache), l, hooks)?; // [pos, d_model]
            let sum = (&x + &out)?; // [pos, d_model]
            let sum = hooks.at(&format!("layers.{l}.add_norm_cross.sum"), cfg, sum)?;
            Ok(sum)
        }
        Norm::Post => {
            let out = attend(cfg, c, (&x, memory, cache), l, hooks)?; // [pos, d_model]
            let sum = (&x + &out)?; // [pos, d_model]
            let sum = hooks.at(&format!("layers.{l}.add_norm_cross.sum"), cfg, sum)?;
            let normed = norm(&sum, &c.norm, cfg)?; // [pos, d_model]
            let normed = hooks.at(&format!("layers.{l}.add_norm_cross.out"), cfg, normed)?;
            Ok(normed)
        }
    }
}

/// Queries of `x` [pos, d_model] read keys and values of `memory` [enc_pos, d_model], made
/// once per generation when a decode step's `cache` is given.
fn attend(
    cfg: &ModelConfig,
    c: &Cross,
    (x, memory, cache): (&Tensor, &Tensor, Option<&mut KvCache>),
    l: usize,
    hooks: &mut Hooks,
) -> Result<Tensor> {
    let (n, m, h) = (x.dim(0)?, memory.dim(0)?, cfg.heads);
    let split = |t: Tensor, rows: usize, d: usize| -> Result<Tensor> {
        Ok(t.reshape((rows, h, d))?.transpose(0, 1)?.contiguous()?)
    };
    let id = |step: &str| format!("layers.{l}.cross_attn.{step}");
    let q = split(linear(x, &c.q_proj)?, n, cfg.d_k)?; // [head, pos, d_k]
    let q = hooks.at(&id("q"), cfg, q)?;
    let project = || -> Result<(Tensor, Tensor)> {
        let k = split(linear(memory, &c.k_proj)?, m, cfg.d_k)?; // [head, enc_pos, d_k]
        let v = split(linear(memory, &c.v_proj)?, m, cfg.d_v)?; // [head, enc_pos, d_v]
        Ok((k, v))
    };
    let (k, v) = match cache {
        Some(cache) => cache.cross(l, project)?,
        None => project()?,
    };
    let k = hooks.at(&id("k"), cfg, k)?;
    let v = hooks.at(&id("v"), cfg, v)?;
    let raw_scores = super::kernels::product::matmul(&q, &k.t()?)?; // [head, pos, enc_pos]
    let raw_scores = hooks.at(&id("raw_scores"), cfg, raw_scores)?;
    let scores = raw_scores.affine(cfg.scale, 0.0)?; // [head, pos, enc_pos]
    let scores = hooks.at(&id("scores"), cfg, scores)?;
    let weights = super::kernels::softmax::softmax_last_dim(&scores)?; // [head, pos, enc_pos]
    let weights = hooks.at(&id("weights"), cfg, weights)?;
    let context = super::kernels::product::matmul(&weights, &v)?; // [head, pos, d_v]
    let context = hooks.at(&id("context"), cfg, context)?;
    let concat = context.transpose(0, 1)?.contiguous()?.reshape((n, h * cfg.d_v))?; // [pos, heads·d_v]
    let concat = hooks.at(&id("concat"), cfg, concat)?;
    let out = linear(&concat, &c.out_proj)?; // [pos, d_model]
    let out = hooks.at(&id("out"), cfg, out)?;
    Ok(out)
}
