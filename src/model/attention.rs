//! Multi-head scaled dot-product attention (Vaswani et al. 2017, §3.2), step by step:
//! `attn.q/k/v`, `attn.raw_scores`, `attn.mask`, `attn.scores`, `attn.weights`,
//! `attn.context`, `attn.concat`, `attn.out`.

use super::{linear, record};
use crate::config::ModelConfig;
use crate::init::LayerParams;
use crate::trace::{Trace, Values};
use anyhow::Result;
use candle_core::{Device, Tensor};

pub fn attention(cfg: &ModelConfig, p: &LayerParams, x: &Tensor, l: usize, trace: &mut Trace) -> Result<Tensor> {
    let id = |name: &str| format!("layers.{l}.attn.{name}");
    let n = x.dim(0)?;
    let (h, d_k, d_v) = (cfg.heads, cfg.d_k, cfg.d_v);
    let (dk, dv): (&str, &str) = if d_k == d_v { ("d_head", "d_head") } else { ("d_k", "d_v") };

    // The fused projections hold the heads side by side: head i owns columns i·d .. (i+1)·d.
    let split = |t: Tensor, d: usize| -> Result<Tensor> { Ok(t.reshape((n, h, d))?.transpose(0, 1)?.contiguous()?) };
    let q = split(linear(x, &p.q_proj)?, d_k)?; // [head, pos, d_k]
    record(trace, &id("q"), &["head", "pos", dk], &q)?;
    let k = split(linear(x, &p.k_proj)?, d_k)?; // [head, pos, d_k]
    record(trace, &id("k"), &["head", "pos", dk], &k)?;
    let v = split(linear(x, &p.v_proj)?, d_v)?; // [head, pos, d_v]
    record(trace, &id("v"), &["head", "pos", dv], &v)?;

    let raw_scores = q.matmul(&k.t()?)?; // [head, query_pos, key_pos]
    record(trace, &id("raw_scores"), &["head", "query_pos", "key_pos"], &raw_scores)?;
    let scaled = raw_scores.affine(cfg.scale, 0.0)?; // [head, query_pos, key_pos]
    let scores = if cfg.causal {
        // A query may not see keys after it: those scores become −inf, so exp gives 0.
        let hidden: Vec<bool> = (0..n * n).map(|i| i % n > i / n).collect();
        let bias: Vec<f32> = hidden.iter().map(|&m| if m { f32::NEG_INFINITY } else { 0.0 }).collect();
        trace.record(&id("mask"), &["query_pos", "key_pos"], &[n, n], Values::Bool(hidden));
        scaled.broadcast_add(&Tensor::from_vec(bias, (n, n), &Device::Cpu)?)?
    } else {
        scaled
    }; // [head, query_pos, key_pos]
    record(trace, &id("scores"), &["head", "query_pos", "key_pos"], &scores)?;
    let weights = candle_nn::ops::softmax_last_dim(&scores)?; // [head, query_pos, key_pos]
    record(trace, &id("weights"), &["head", "query_pos", "key_pos"], &weights)?;
    let context = weights.matmul(&v)?; // [head, pos, d_v]
    record(trace, &id("context"), &["head", "pos", dv], &context)?;
    let concat = context.transpose(0, 1)?.contiguous()?.reshape((n, h * d_v))?; // [pos, heads·d_v]
    record(trace, &id("concat"), &["pos", "heads·d_v"], &concat)?;
    let out = linear(&concat, &p.out_proj)?; // [pos, d_model]
    record(trace, &id("out"), &["pos", "d_model"], &out)?;
    Ok(out)
}
