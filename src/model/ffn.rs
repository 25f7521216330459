//! The position-wise feed-forward network: `ffn.hidden`, `ffn.act`, `ffn.out`; or, gated
//! (SwiGLU, Shazeer 2020, as the Llama family has it), `ffn.gate`, `ffn.up`,
//! `ffn.act` = act(gate) ⊙ up, `ffn.out`.
//!
//! Or a mixture of gated FFNs (Mixtral, Qwen2-MoE, Qwen3-MoE; `config.experts`) as
//! transformers' sparse MoE blocks compute it: `ffn.router.logits` = x·W_routerᵀ,
//! `ffn.router.probs` their softmax, `ffn.router.chosen` the `top_k` most probable experts
//! (most probable first, as `torch.topk` orders them), `ffn.router.weights` their
//! probabilities (divided by their sum with `norm_topk_prob`), `ffn.experts.out` each chosen
//! expert's FFN output, and their weighted sum `ffn.experts.mixed`; with Qwen2-MoE's shared
//! expert, `ffn.shared.out` times its gate `ffn.shared.gate` is added to it. Without one the
//! sum is `ffn.out`. The sum is transformers' to the bit: each expert's weighted rows are added
//! to zeros expert by expert in index order (`index_add_`), so a token's terms are summed in
//! the order of its experts' indices, not its ranks (with three experts the two orders differ
//! in the last bits). Each expert runs only on the rows routed to it.

use super::kernels::{linear::linear, softmax};
use crate::config::tiles::{even_tiles, WIDE_FFN_STEPS};
use crate::config::{Activation, ModelConfig};
use crate::hook::Hooks;
use crate::params::{Block, Dense, Experts, Ffn};
use crate::trace::{steps, Values};
use anyhow::{anyhow, Result};
use candle_core::{Device, Tensor};

pub fn ffn(cfg: &ModelConfig, p: &Block, x: &Tensor, l: usize, hooks: &mut Hooks) -> Result<Tensor> {
    match &p.ffn {
        Ffn::Dense(f) => {
            let out = if wide_steps_wanted(l, hooks) {
                dense(cfg, f, x, |name, t| hooks.at(&format!("layers.{l}.{name}"), cfg, t))?
            // [pos, d_model]
            } else {
                let rows = cfg.ffn_rows(x.dim(0)?);
                let out = in_tiles(x, rows, |x| dense(cfg, f, x, |_, t| Ok(t)))?; // [pos, d_model]
                hooks.at(&format!("layers.{l}.ffn.out"), cfg, out)?
            };
            Ok(out)
        }
        Ffn::Experts(m) => moe(cfg, m, x, l, hooks),
    }
}

/// Whether any of layer `l`'s `[pos, d_ff]` steps is recorded or hooked: then its FFN runs
/// on every position at once, else in tiles of positions (`config::tiles`).
fn wide_steps_wanted(l: usize, hooks: &Hooks) -> bool {
    WIDE_FFN_STEPS.iter().map(|s| format!("layers.{l}.{s}")).any(|id| hooks.rec.wants(&id) || hooks.hooked(&id))
}

/// `f` ([rows, d_model] → [rows, d_model], row by row) on `x` in tiles of about `rows`
/// positions (`config::tiles::even_tiles`), joined: the untiled result bit for bit
/// (`tests::tiles_are_the_untiled_ffn_bit_for_bit`).
fn in_tiles(x: &Tensor, rows: usize, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
    if x.dim(0)? <= rows {
        return f(x);
    }
    let tiles: Vec<Tensor> =
        even_tiles(x.dim(0)?, rows).map(|(first, len)| f(&x.narrow(0, first, len)?)).collect::<Result<_>>()?; // each [len, d_model]
    Ok(Tensor::cat(&tiles, 0)?)
}

/// A dense FFN's output, each intermediate handed to `at` by its step name (the hook port's
/// `at`, which may change it); a mixture's experts pass an `at` that keeps nothing (their
/// steps are the mixture's).
pub fn dense(
    cfg: &ModelConfig,
    p: &Dense,
    x: &Tensor,
    mut at: impl FnMut(&str, Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let act = match &p.gate {
        None => {
            let hidden = linear(x, &p.linear1)?; // [pos, d_ff]
            let hidden = at("ffn.hidden", hidden)?;
            activated(cfg, &hidden)? // [pos, d_ff]
        }
        Some(gate_proj) => {
            let gate = linear(x, gate_proj)?; // [pos, d_ff]
            let gate = at("ffn.gate", gate)?;
            let up = linear(x, &p.linear1)?; // [pos, d_ff]
            let up = at("ffn.up", up)?;
            match (super::kernels::ggml::on(cfg), cfg.activation) {
                (true, Activation::GeluTanh) => super::kernels::ggml::geglu(&gate, &up)?, // [pos, d_ff]: ggml_vec_geglu_f32
                _ => (activated(cfg, &gate)? * up)?,                                      // [pos, d_ff]
            }
        }
    };
    let act = at("ffn.act", act)?;
    let out = linear(&act, &p.linear2)?; // [pos, d_model]
    at("ffn.out", out)
}

/// The FFN's activation as this pass computes it: under `--arithmetic ggml`, GELU's tanh form
/// from ggml's f16 table (`ggml.rs`); the others in f32 (ggml's SiLU differs from it by an
/// f32 rounding at most).
fn activated(cfg: &ModelConfig, x: &Tensor) -> Result<Tensor> {
    match (super::kernels::ggml::on(cfg), cfg.activation) {
        (true, Activation::GeluTanh) => return super::kernels::ggml::gelu_table(x),
        (true, Activation::Silu) => return super::kernels::ggml::exact::silu_rows(x),
        _ => {}
    }
    activation(cfg.activation, x)
}

pub fn activation(a: Activation, x: &Tensor) -> Result<Tensor> {
    Ok(match a {
        Activation::Relu => x.relu()?,
        Activation::Gelu => x.gelu_erf()?,
        Activation::GeluTanh => x.gelu()?,
        Activation::Silu => x.silu()?,
    })
}

/// Layer `l`'s mixture of experts on `x` ([pos, d_model]): routed, run and summed as the
/// module documentation says.
pub fn moe(cfg: &ModelConfig, m: &Experts, x: &Tensor, l: usize, hooks: &mut Hooks) -> Result<Tensor> {
    let spec = cfg.parts.experts.as_ref().ok_or_else(|| anyhow!("internal: layer {l} has experts, the config none"))?;
    let (n, k) = (x.dim(0)?, spec.top_k);
    let logits = linear(x, &m.router)?; // [pos, expert]
    let logits = hooks.at(&format!("layers.{l}.ffn.router.logits"), cfg, logits)?;
    let probs = softmax::softmax_last_dim(&logits)?; // [pos, expert]
    let probs = hooks.at(&format!("layers.{l}.ffn.router.probs"), cfg, probs)?;
    let probs = probs.to_vec2::<f32>()?; // [pos][expert], read row by row for the top-k
    let chosen = top_k(&probs, k); // [pos][rank]: expert ids, most probable first
    let ids = Values::Int(chosen.iter().flatten().map(|&e| e as i64).collect());
    hooks.rec.record(&format!("layers.{l}.ffn.router.chosen"), &steps::dims("ffn.router.chosen", cfg), &[n, k], ids);
    if hooks.hooked(&format!("layers.{l}.ffn.router.chosen")) {
        let ids: Vec<Vec<u32>> = chosen.iter().map(|r| r.iter().map(|&e| e as u32).collect()).collect();
        hooks.observe(&format!("layers.{l}.ffn.router.chosen"), cfg, &Tensor::new(ids, &Device::Cpu)?)?;
        // [pos, rank]
    }
    let weights = routing_weights(&probs, &chosen, spec.norm_topk_prob); // [pos][rank]
    let routing = Tensor::new(weights.clone(), &Device::Cpu)?; // [pos, rank]
    hooks.rec.tensor(&format!("layers.{l}.ffn.router.weights"), cfg, &routing)?;
    hooks.observe(&format!("layers.{l}.ffn.router.weights"), cfg, &routing)?;
    let outs = experts_out(cfg, m, x, &chosen)?; // [pos, rank, d_model]
    let outs = hooks.at(&format!("layers.{l}.ffn.experts.out"), cfg, outs)?;
    let mixed = mix(&outs, &weights, &chosen)?; // [pos, d_model]
    let Some((shared, gate)) = &m.shared else {
        let mixed = hooks.at(&format!("layers.{l}.ffn.out"), cfg, mixed)?;
        return Ok(mixed);
    };
    let mixed = hooks.at(&format!("layers.{l}.ffn.experts.mixed"), cfg, mixed)?;
    let shared_out = dense(cfg, shared, x, |_, t| Ok(t))?; // [pos, d_model]
    let shared_out = hooks.at(&format!("layers.{l}.ffn.shared.out"), cfg, shared_out)?;
    let share = candle_nn::ops::sigmoid(&linear(x, gate)?)?; // [pos, 1]
    let share = hooks.at(&format!("layers.{l}.ffn.shared.gate"), cfg, share)?;
    let out = (mixed + share.broadcast_mul(&shared_out)?)?; // [pos, d_model]
    let out = hooks.at(&format!("layers.{l}.ffn.out"), cfg, out)?;
    Ok(out)
}

/// Each row's `k` most probable experts, most probable first; equal probabilities go to the
/// lower index (`torch.topk` leaves ties to its kernel: the fixtures have none).
fn top_k(probs: &[Vec<f32>], k: usize) -> Vec<Vec<usize>> {
    probs
        .iter()
        .map(|row| {
            let mut order: Vec<usize> = (0..row.len()).collect();
            order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
            order.truncate(k);
            order
        })
        .collect()
}

/// The chosen experts' probabilities, divided by their sum (summed in rank order, as
/// `routing_weights.sum(-1)`) when `normalise`.
fn routing_weights(probs: &[Vec<f32>], chosen: &[Vec<usize>], normalise: bool) -> Vec<Vec<f32>> {
    probs
        .iter()
        .zip(chosen)
        .map(|(row, experts)| {
            let picked: Vec<f32> = experts.iter().map(|&e| row[e]).collect();
            let sum: f32 = picked.iter().fold(0.0, |s, &p| s + p);
            picked.into_iter().map(|p| if normalise { p / sum } else { p }).collect()
        })
        .collect()
}

/// Every chosen expert's output for its token, in `chosen`'s order: [pos, rank, d_model].
/// Expert e runs once, on its rows gathered rank-major as transformers gathers them (the
/// tokens that ranked it first, then those that ranked it second, …).
fn experts_out(cfg: &ModelConfig, m: &Experts, x: &Tensor, chosen: &[Vec<usize>]) -> Result<Tensor> {
    let (n, d) = x.dims2()?;
    let k = chosen.first().map_or(0, Vec::len);
    let mut out = vec![0f32; n * k * d];
    for (e, expert) in m.experts.iter().enumerate() {
        let rows: Vec<(usize, usize)> =
            (0..k).flat_map(|r| (0..n).filter(move |&t| chosen[t][r] == e).map(move |t| (t, r))).collect();
        if rows.is_empty() {
            continue;
        }
        let at = Tensor::from_vec(rows.iter().map(|&(t, _)| t as u32).collect::<Vec<_>>(), rows.len(), x.device())?;
        let picked = x.index_select(&at, 0)?; // [rows, d_model]
        let y = dense(cfg, expert, &picked, |_, t| Ok(t))?.to_vec2::<f32>()?; // [rows, d_model]
        for (&(t, r), row) in rows.iter().zip(y) {
            out[(t * k + r) * d..(t * k + r + 1) * d].copy_from_slice(&row);
        }
    }
    Ok(Tensor::from_vec(out, (n, k, d), x.device())?)
}

/// Σ weight · output over each token's experts, in the order of the experts' indices, each
/// product rounded before it is added to the running sum from zero (transformers'
/// `index_add_` into zeros, one expert at a time).
fn mix(outs: &Tensor, weights: &[Vec<f32>], chosen: &[Vec<usize>]) -> Result<Tensor> {
    let (n, k, d) = outs.dims3()?;
    let v = outs.flatten_all()?.to_vec1::<f32>()?;
    let mut sum = vec![0f32; n * d];
    for t in 0..n {
        let mut ranks: Vec<usize> = (0..k).collect();
        ranks.sort_by_key(|&r| chosen[t][r]);
        for r in ranks {
            let (w, row) = (weights[t][r], &v[(t * k + r) * d..(t * k + r + 1) * d]);
            for (s, &o) in sum[t * d..(t + 1) * d].iter_mut().zip(row) {
                *s += o * w;
            }
        }
    }
    Ok(Tensor::from_vec(sum, (n, d), outs.device())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_orders_by_probability_and_breaks_ties_by_index() {
        let probs = vec![vec![0.1, 0.4, 0.1, 0.4], vec![0.7, 0.1, 0.2, 0.0]];
        assert_eq!(top_k(&probs, 2), vec![vec![1, 3], vec![0, 2]]);
        let w = routing_weights(&probs, &top_k(&probs, 2), true);
        assert_eq!(w[1], vec![0.7 / (0.7f32 + 0.2), 0.2 / (0.7f32 + 0.2)]);
        assert_eq!(routing_weights(&probs, &top_k(&probs, 2), false)[1], vec![0.7, 0.2]);
    }

    /// The token ranked experts 1, 2, 0: the sum adds expert 0's term first, so 1 is lost
    /// against 1e8 and the total is 0 (in rank order it would be 1).
    #[test]
    fn the_mixture_sums_in_expert_order() {
        let outs = Tensor::new(&[[[1e8f32], [-1e8], [1.0]]], &Device::Cpu).unwrap();
        let (chosen, weights) = (vec![vec![1, 2, 0]], vec![vec![1.0, 1.0, 1.0]]);
        let got = mix(&outs, &weights, &chosen).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(got, vec![0.0]);
    }

    /// A gated FFN whose inner dimensions are blocked in two by gemm on this project's machine
    /// (1,100 and 1,500 > 1,024), on 200 positions: in tiles of 64 (each under the 64 rows where
    /// `linear` switches the product's order) and of 16, the same bits as on all 200 at once.
    #[test]
    fn tiles_are_the_untiled_ffn_bit_for_bit() {
        let (n, d, ff) = (200, 1100, 1500);
        let cpu = Device::Cpu;
        let lin = |o: usize, i: usize| crate::params::Linear {
            weight: Tensor::randn(0f32, 0.05, (o, i), &cpu).unwrap(),
            bias: None,
            ggml: None,
        };
        let f = Dense { linear1: lin(ff, d), linear2: lin(d, ff), gate: Some(lin(ff, d)) };
        let cfg = ModelConfig { activation: Activation::Silu, ..ModelConfig::toy() };
        let x = Tensor::randn(0f32, 1., (n, d), &cpu).unwrap();
        let bits = |t: Tensor| {
            t.flatten_all().unwrap().to_vec1::<f32>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let whole = bits(dense(&cfg, &f, &x, |_, t| Ok(t)).unwrap());
        for rows in [64, 16, 199] {
            let tiled = in_tiles(&x, rows, |x| dense(&cfg, &f, x, |_, t| Ok(t))).unwrap();
            assert_eq!(tiled.dims(), &[n, d]);
            assert!(bits(tiled) == whole, "tiles of {rows}");
        }
    }
}
