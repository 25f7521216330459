//! Multi-head scaled dot-product attention (Vaswani et al. 2017, §3.2), step by step:
//! `attn.q/k/v`, with rotary positions `attn.q_rot/k_rot`, `attn.raw_scores`, `attn.mask`,
//! `attn.scores`, `attn.weights`, `attn.context`, `attn.concat`, `attn.out`. Grouped-query
//! attention has fewer key/value heads than query heads; each is shared by a group. Heads
//! built as separate single-head modules (`config.separate_heads`) compute the same numbers:
//! their projections are the fused ones' row blocks, and `torch.cat` of their outputs is
//! `attn.concat`.

use super::kernels::{ggml, linear::linear};
use super::pass::Pass;
use crate::config::ModelConfig;
use crate::hook::Hooks;
use crate::params::LayerParams;
use anyhow::Result;
use candle_core::Tensor;

/// Layer `l`'s attention on `x`, `[pos, d_model]` at positions `offset..offset + pos`, where
/// `offset` is how many positions `pass`'s cache holds (0 without one): queries read the
/// cached keys and values too, and this pass's are appended to them.
pub fn attention(
    cfg: &ModelConfig,
    p: &LayerParams,
    x: &Tensor,
    l: usize,
    pass: &mut Pass,
    hooks: &mut Hooks,
) -> Result<Tensor> {
    let (n, offset) = (x.dim(0)?, pass.offset());
    let (h, kvh, d_v) = (cfg.heads, cfg.kv_heads(), cfg.d_v);
    let (q, k, v) = projected(cfg, p, x, (l, offset), hooks)?; // [head, pos, d_k], [kv_head, pos, d_k], [kv_head, pos, d_v]
    let (k, v) = match pass.cache.as_deref_mut() {
        Some(cache) => cache.extend(l, &k, &v)?, // [kv_head, key_pos, d_k], [kv_head, key_pos, d_v]
        None => (k, v),
    };
    // Grouped-query attention: query head g reads key/value head g / (heads / kv_heads).
    let k = repeat_kv(&k, h / kvh)?; // [head, key_pos, d_k]
    let v = repeat_kv(&v, h / kvh)?; // [head, key_pos, d_v]

    // One row per query head, as the scores read them (unrecorded sites: path patching's
    // receivers replace one query head's q, k or v there).
    let q = hooks.through(&format!("layers.{l}.attn.q_heads"), cfg, q)?; // [head, pos, d_k]
    let k = hooks.through(&format!("layers.{l}.attn.k_heads"), cfg, k)?; // [head, key_pos, d_k]
    let v = hooks.through(&format!("layers.{l}.attn.v_heads"), cfg, v)?; // [head, key_pos, d_v]

    let context = match super::tiled::tiles(cfg, l, pass, hooks) {
        true => super::tiled::context(cfg, (&q, &k, &v), (l, offset), hooks)?, // [head, pos, d_v]
        false => whole(cfg, (&q, &k, &v), (l, offset), pass, hooks)?,          // [head, pos, d_v]
    };
    let context = hooks.at(&format!("layers.{l}.attn.context"), cfg, context)?;
    let concat = context.transpose(0, 1)?.contiguous()?.reshape((n, h * d_v))?; // [pos, heads·d_v]
    let concat = hooks.at(&format!("layers.{l}.attn.concat"), cfg, concat)?;
    let out = match &p.out_proj {
        Some(o) => linear(&concat, o)?, // [pos, d_model or d_out]
        None => concat,                 // [pos, heads·d_v]: the wrapper's torch.cat of heads
    };
    let out = hooks.at(&format!("layers.{l}.attn.out"), cfg, out)?;
    Ok(out)
}

/// The layer's scores, mask, softmax and context over every query at once (`attention`
/// when a square step is recorded or something reads the whole matrices; else `tiled.rs`):
/// the context `[head, pos, d_v]`.
fn whole(
    cfg: &ModelConfig,
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    (l, offset): (usize, usize),
    pass: &Pass,
    hooks: &mut Hooks,
) -> Result<Tensor> {
    let (h, n) = (cfg.heads, q.dim(1)?);
    let raw_scores = match ggml::on(cfg) {
        true => ggml::exact::scores(q, k, hooks.run().ggml_interleaved, ggml::q_scale(cfg, hooks.run()))?, // [head, query_pos, key_pos]: llama.cpp's f16 kernel
        false => super::kernels::product::matmul(q, &k.t()?)?, // [head, query_pos, key_pos]
    };
    let raw_scores = hooks.at(&format!("layers.{l}.attn.raw_scores"), cfg, raw_scores)?;
    let scaled = raw_scores.affine(cfg.scale, 0.0)?; // [head, query_pos, key_pos]
    let scaled = match &pass.bias {
        Some(bias) => scaled.broadcast_add(bias)?, // [head, query_pos, key_pos]: T5's position bias
        None => scaled,
    };
    let hidden = super::mask::hidden_keys(cfg, l, (offset, n));
    let scores = super::mask::capped_and_masked(cfg, scaled, hidden.as_deref(), l, Some(hooks))?; // [head, query_pos, key_pos]
    let scores_id = format!("layers.{l}.attn.scores");
    let hooked = hooks.hooked(&scores_id); // a knockout's −inf, say: the scores tell which rows see no key
    let scores = hooks.at(&scores_id, cfg, scores)?;
    let weights = match ggml::on(cfg) {
        true => ggml::exact::softmax(&scores)?, // [head, query_pos, key_pos]
        false => super::kernels::softmax::softmax_last_dim(&scores)?, // [head, query_pos, key_pos]
    };
    let blind = match hooked {
        true => super::mask::blind_in(&scores)?,
        false => super::mask::blind_rows(hidden.as_deref(), (h, offset, n), (offset + n, &Default::default())),
    };
    let weights = match blind {
        Some(rows) => super::mask::zero_rows(&weights, &rows)?, // [head, query_pos, key_pos]
        None => weights,
    };
    let weights = hooks.at(&format!("layers.{l}.attn.weights"), cfg, weights)?;
    let context = match ggml::on(cfg) {
        true => ggml::exact::context(&weights, v)?, // [head, pos, d_v]: in f16, as llama.cpp's cache holds v
        false => super::kernels::product::matmul(&weights, v)?, // [head, pos, d_v]
    };
    super::tiled::read(hooks, l, &weights, (0, n, offset + n))?;
    Ok(context)
}

/// The queries, keys and values of `x` (`[pos, d_model]` at positions from `offset` on):
/// `[head, pos, d_k]`, `[kv_head, pos, d_k]` (after any q/k norm and the rotation) and
/// `[kv_head, pos, d_v]`.
pub fn projected(
    cfg: &ModelConfig,
    p: &LayerParams,
    x: &Tensor,
    (l, offset): (usize, usize),
    hooks: &mut Hooks,
) -> Result<(Tensor, Tensor, Tensor)> {
    let n = x.dim(0)?;
    let (h, kvh, d_k, d_v) = (cfg.heads, cfg.kv_heads(), cfg.d_k, cfg.d_v);
    // The fused projections hold the heads side by side: head i owns columns i·d .. (i+1)·d.
    let split = |t: Tensor, heads: usize, d: usize| -> Result<Tensor> {
        Ok(t.reshape((n, heads, d))?.transpose(0, 1)?.contiguous()?)
    };
    let q = split(linear(x, &p.q_proj)?, h, d_k)?; // [head, pos, d_k]
    let q = hooks.at(&format!("layers.{l}.attn.q"), cfg, q)?;
    let k = split(linear(x, &p.k_proj)?, kvh, d_k)?; // [kv_head, pos, d_k]
    let k = hooks.at(&format!("layers.{l}.attn.k"), cfg, k)?;
    let v = split(linear(x, &p.v_proj)?, kvh, d_v)?; // [kv_head, pos, d_v]
    let v = hooks.at(&format!("layers.{l}.attn.v"), cfg, v)?;
    let (q, k) = normed_and_rotated(cfg, p, (q, k), (l, offset), hooks)?; // [head, pos, d_k], [kv_head, pos, d_k]
    Ok((q, k, v))
}

/// q and k as the scores read them: each head's RMSNorm where the layer has one (Qwen3),
/// then the rotary positions (from `offset` on) where the layer has them.
fn normed_and_rotated(
    cfg: &ModelConfig,
    p: &LayerParams,
    (q, k): (Tensor, Tensor),
    (l, offset): (usize, usize),
    hooks: &mut Hooks,
) -> Result<(Tensor, Tensor)> {
    let n = q.dim(1)?;
    let (q, k) = match &p.qk_norm {
        // RMSNorm over each head's width, before the rotation (Qwen3, Gemma 3).
        Some(qk) => {
            let q_norm = super::norm::norm(&q, &qk.q, cfg)?; // [head, pos, d_k]
            let q_norm = hooks.at(&format!("layers.{l}.attn.q_norm"), cfg, q_norm)?;
            let k_norm = super::norm::norm(&k, &qk.k, cfg)?; // [kv_head, pos, d_k]
            let k_norm = hooks.at(&format!("layers.{l}.attn.k_norm"), cfg, k_norm)?;
            (q_norm, k_norm)
        }
        None => (q, k),
    };
    Ok(match cfg.parts.rope_at(l) {
        // llama.cpp's own rotation, where its angles are this rope's.
        Some(rope) if super::kernels::ggml::on(cfg) && super::kernels::ggml::exact::plain(rope, cfg.d_k) => {
            let q_rot = super::kernels::ggml::exact::rotate(&q, rope, offset)?; // [head, pos, d_k]
            let q_rot = hooks.at(&format!("layers.{l}.attn.q_rot"), cfg, q_rot)?;
            let k_rot = super::kernels::ggml::exact::rotate(&k, rope, offset)?; // [kv_head, pos, d_k]
            let k_rot = hooks.at(&format!("layers.{l}.attn.k_rot"), cfg, k_rot)?;
            (q_rot, k_rot)
        }
        Some(rope) => {
            let (cos, sin) = super::rope::cos_sin(rope, (offset, n))?; // [pos, rotary width] each
            let q_rot = super::rope::rotate(&q, &cos, &sin)?; // [head, pos, d_k]
            let q_rot = hooks.at(&format!("layers.{l}.attn.q_rot"), cfg, q_rot)?;
            let k_rot = super::rope::rotate(&k, &cos, &sin)?; // [kv_head, pos, d_k]
            let k_rot = hooks.at(&format!("layers.{l}.attn.k_rot"), cfg, k_rot)?;
            (q_rot, k_rot)
        }
        None => (q, k),
    })
}

/// Repeats each key/value head `times` times along the head axis: [kv_head, pos, d] →
/// [kv_head·times, pos, d] (Hugging Face's `repeat_kv`).
pub fn repeat_kv(t: &Tensor, times: usize) -> Result<Tensor> {
    if times == 1 {
        return Ok(t.clone());
    }
    let (kvh, n, d) = t.dims3()?;
    Ok(t.unsqueeze(1)?.expand((kvh, times, n, d))?.reshape((kvh * times, n, d))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Activation, InitConfig, Norm, Positions};
    use crate::params::{Block, Dense, Ffn, LayerNorm, Linear};
    use crate::trace::Recorder;
    use candle_core::Device;

    fn eye() -> Linear {
        Linear { weight: Tensor::new(&[[1f32, 0.0], [0.0, 1.0]], &Device::Cpu).unwrap(), bias: None, ggml: None }
    }

    #[test]
    fn softmax_of_zero_and_ln3_is_a_quarter_and_three_quarters() {
        // Identity projections, scale 1: token 1 = [√ln3, 0] scores [0, ln 3] against the
        // keys [0, 0] and itself, so its weights are [1/4, 3/4] and its context 3/4 of itself.
        let a = 3f32.ln().sqrt();
        let x = Tensor::new(&[[0f32, 0.0], [a, 0.0]], &Device::Cpu).unwrap();
        let norm = LayerNorm {
            weight: Tensor::ones(2, candle_core::DType::F32, &Device::Cpu).unwrap(),
            bias: Some(Tensor::zeros(2, candle_core::DType::F32, &Device::Cpu).unwrap()),
        };
        let p = LayerParams {
            q_proj: eye(),
            k_proj: eye(),
            v_proj: eye(),
            out_proj: Some(eye()),
            block: Some(Block {
                norm1: norm.clone(),
                ffn: Ffn::Dense(Dense { linear1: eye(), linear2: eye(), gate: None }),
                norm2: norm,
                post_attn_norm: None,
                post_ffn_norm: None,
            }),
            qk_norm: None,
            cross: None,
        };
        let cfg = ModelConfig {
            d_model: 2,
            heads: 1,
            d_k: 2,
            d_v: 2,
            d_ff: 2,
            layers: 1,
            vocab_size: 0,
            max_len: 2,
            positions: Positions::None,
            causal: false,
            scale: 1.0,
            norm: Norm::Post,
            activation: Activation::Relu,
            attn_bias: false,
            ffn_bias: false,
            eps: 1e-5,
            raw_input: true,
            model: None,
            init: InitConfig::File { path: String::new(), stored_dtype: None },
            parts: Default::default(),
            ..Default::default()
        };
        let mut rec = Recorder::new(vec!["a".into(), "b".into()], cfg.clone(), Default::default());
        let out = attention(&cfg, &p, &x, 0, &mut Pass::default(), &mut Hooks::new(&mut rec)).unwrap();
        let (trace, _) = rec.finish();
        let w = trace.get("layers.0.attn.weights").unwrap().f32s().unwrap().to_vec();
        let close = |a: f32, b: f32| (a - b).abs() < 1e-6;
        assert!(close(w[0], 0.5) && close(w[1], 0.5), "{w:?}");
        assert!(close(w[2], 0.25) && close(w[3], 0.75), "{w:?}");
        let out = out.to_vec2::<f32>().unwrap();
        assert!(close(out[1][0], 0.75 * a) && close(out[1][1], 0.0), "{out:?}");
    }
}
