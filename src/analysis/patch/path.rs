//! Path patching (Wang et al. 2022, "Interpretability in the wild", the IOI circuit;
//! Goldowsky-Dill et al. 2023, "Localizing model behavior with path patching"): how much of
//! the corruption's effect on the metric flows from one sender head straight into the
//! receivers, along the residual stream, with nothing in between.
//!
//! For every sender (layer ls < the first receiver's layer, head hs), in the clean run:
//!
//! ```text
//! Δ = (context_corrupted − context_clean)[ls, hs] · W_O[:, hs's columns]ᵀ   [pos, d_model]
//! ```
//!
//! is the change of the sender's output (its slice of the output projection; the bias is no
//! head's). Receivers `logits` (or `resid`): the final residual stream is the clean one + Δ,
//! through the final norm and the head. Receiver heads: each reads, for its q, k or v, its
//! layer's clean residual stream + Δ (through the layer's first norm), every other head of
//! that layer reads the clean stream; the receivers' outputs change, and everything after
//! them (the layer's FFN, the later layers, including later receivers' other heads) is
//! recomputed. Every other component between sender and receivers stays at its clean value:
//! the path is the direct one only.
//!
//! Each cell's metric is the patched run's; its effect is (patched − clean) / (corrupted −
//! clean), the share of the corruption's change in the metric that this path carries: 0 for
//! none, 1 for all of it (`sweep.rs`'s `effect` with the runs' roles swapped).
//!
//! What has no direct residual path is refused: post-norm blocks, sandwich norms (Gemma),
//! attention-only layers, heads without an output projection, and encoder–decoders.

use super::runs::{embedded, quiet, ready, run_from, score};
use super::sweep::{effect, Method, Metric, Row, Sweep, What};
use crate::config::{ModelConfig, Norm};
use crate::error::usage;
use crate::hook::{Hook, Hooks, Registry, Site};
use crate::model::attention::{projected, repeat_kv};
use crate::model::kernels::linear::linear;
use crate::model::norm::norm;
use crate::model::{head, unembed};
use crate::params::receivers::{Qkv, Receiver, Receivers};
use crate::params::{Input, LayerParams, Layers, Linear, Params};
use anyhow::{anyhow, Result};
use candle_core::{Device, Tensor};

/// Refuses a model without a direct residual path, and receivers the model does not have.
/// Returns the first receiver layer (the model's layer count for `logits`).
fn check(cfg: &ModelConfig, receivers: &Receivers) -> Result<usize> {
    let p = &cfg.parts;
    let why = if cfg.norm != Norm::Pre {
        Some("a post-norm block normalises the residual stream after every sum")
    } else if p.sandwich_norms {
        Some("a sandwich norm normalises each head's output before the residual sum")
    } else if p.attention_only || p.no_out_proj {
        Some("the heads have no output projection into a residual stream")
    } else if p.cross_attention {
        Some("an encoder–decoder's paths cross between its stacks")
    } else {
        None
    };
    if let Some(why) = why {
        return Err(usage("--patch-path", why, "use --patch without --patch-path"));
    }
    let Receivers::Heads(heads) = receivers else { return Ok(cfg.layers) };
    for r in heads {
        if r.layer >= cfg.layers || r.head >= cfg.heads {
            return Err(usage(
                "--patch-path",
                format!("the model has no head {}.{} ({} layers of {} heads)", r.layer, r.head, cfg.layers, cfg.heads),
                "name a receiver LAYER.HEAD in range",
            ));
        }
    }
    let first = heads.iter().map(|r| r.layer).min().unwrap_or(0);
    if first == 0 {
        return Err(usage(
            "--patch-path",
            "a receiver in layer 0 has no earlier head to send to it",
            "name receivers in layer 1 or later",
        ));
    }
    Ok(first)
}

/// The change of head `h`'s output in layer `l`, `[pos, d_model]`: its context's change
/// (corrupted − clean, each `[head, pos, d_v]` flattened) through its columns of the output
/// projection, without the bias.
fn sender_delta(cfg: &ModelConfig, p: &LayerParams, h: usize, (clean, corrupted): (&[f32], &[f32])) -> Result<Tensor> {
    let (heads, d_v) = (cfg.heads, cfg.d_v);
    let per = clean.len() / heads;
    let n = per / d_v;
    let mut wide = vec![0f32; n * heads * d_v]; // [pos, heads·d_v]: the concat with only h's columns
    for pos in 0..n {
        for i in 0..d_v {
            let at = h * per + pos * d_v + i;
            wide[pos * heads * d_v + h * d_v + i] = corrupted[at] - clean[at];
        }
    }
    let wide = Tensor::from_vec(wide, (n, heads * d_v), &Device::Cpu)?;
    let o = p.out_proj.as_ref().ok_or_else(|| anyhow!("internal: path patching needs an output projection"))?;
    linear(&wide, &Linear { weight: o.weight.clone(), bias: None, ggml: None })
}

/// Runs path patching: the clean and corrupted runs, then for every sender one score of the
/// final stream (`logits`) or one run from the first receiver layer on (receiver heads), each
/// with the run's own hooks (`hooks`).
pub fn sweep(
    cfg: &ModelConfig,
    params: &Params,
    (clean, corrupted): (&Input, &Input),
    receivers: &Receivers,
    metric: &Metric,
    hooks: &Registry,
) -> Result<Sweep> {
    let first = check(cfg, receivers)?;
    let (l_count, layers) = ready(params)?;
    let head = head::Unembed::of(cfg, params).map(head::Unembed::dense).transpose()?;
    let context = Some(What::Heads.step());
    let c = run_from(cfg, &layers, (0, embedded(cfg, params, clean, false)?), context, hooks)?;
    let x = run_from(cfg, &layers, (0, embedded(cfg, params, corrupted, true)?), context, hooks)?;
    let final_clean = unembed::final_norm(cfg, params, &c.last)?; // [pos, d_model]
    let score = |last: &Tensor| score(params, cfg, head.as_ref(), metric, last, Some(&final_clean));
    let (clean_m, corrupted_m) = (score(&c.last)?, score(&x.last)?);
    let mut rows = Vec::new();
    let mut layer_runs = 2 * l_count;
    for ls in 0..first {
        let p = layers.get(ls)?;
        for hs in 0..cfg.heads {
            let delta = sender_delta(cfg, &p, hs, (&c.kept[ls], &x.kept[ls]))?; // [pos, d_model]
            let last = match receivers {
                Receivers::Logits => (&c.last + &delta)?, // [pos, d_model]
                Receivers::Heads(heads) => {
                    let receive = receiving(cfg, &layers, heads, (&c.inputs, &delta))?;
                    let mut registry = Registry::running(hooks.run.clone());
                    for r in &receive {
                        for step in ["q_heads", "k_heads", "v_heads"] {
                            registry.add(format!("layers.{}.attn.{step}", r.layer), r);
                        }
                    }
                    registry.extend(hooks);
                    layer_runs += l_count - first;
                    run_from(cfg, &layers, (first, c.inputs[first].clone()), None, &registry)?.last
                }
            };
            let m = score(&last)?;
            rows.push(Row { layer: ls, index: hs, head: None, metric: m, effect: effect(m, corrupted_m, clean_m) });
        }
    }
    let runs = rows.len();
    Ok(Sweep {
        method: Method::Path,
        what: What::Heads,
        metric: metric.clone(),
        clean: clean_m,
        corrupted: corrupted_m,
        rows,
        layer_runs,
        layer_runs_without_reuse: (runs + 2) * l_count,
        receivers: Some(receivers.label()),
    })
}

/// One layer's receivers in a path-patching run, a hook at the layer's `attn.q_heads`,
/// `attn.k_heads` and `attn.v_heads`: each receiver head's q, k or v is the one computed from
/// the clean residual stream plus the sender's path (`theirs`), every other head keeps the
/// layer's own. A key or value is the receiver's alone: with grouped-query attention, the
/// other query heads of its group keep the layer's (the sites are per query head).
struct Receive {
    layer: usize,
    heads: Vec<(usize, Qkv)>,
    /// q, k and v of the receivers' input, `[head, pos, d]` each (keys and values repeated
    /// per query head).
    theirs: [Tensor; 3],
}

impl Hook for Receive {
    fn at(&self, site: &Site, cfg: &ModelConfig, ours: Tensor) -> Result<Tensor> {
        let (which, theirs) = match site.name {
            "attn.q_heads" => (Qkv::Q, &self.theirs[0]),
            "attn.k_heads" => (Qkv::K, &self.theirs[1]),
            "attn.v_heads" => (Qkv::V, &self.theirs[2]),
            _ => return Ok(ours),
        };
        if !self.heads.iter().any(|&(_, w)| w == which) {
            return Ok(ours);
        }
        let rows: Vec<Tensor> = (0..cfg.heads)
            .map(|g| if self.heads.contains(&(g, which)) { theirs.narrow(0, g, 1) } else { ours.narrow(0, g, 1) })
            .collect::<candle_core::Result<_>>()?;
        Ok(Tensor::cat(&rows, 0)?) // [head, pos, d]
    }
}

/// The receivers grouped by layer, each layer's input the clean residual stream there
/// (`inputs[l]`) + `delta`, through the layer's first norm and its projections.
fn receiving(
    cfg: &ModelConfig,
    layers: &Layers,
    heads: &[Receiver],
    (inputs, delta): (&[Tensor], &Tensor),
) -> Result<Vec<Receive>> {
    let mut out: Vec<Receive> = Vec::new();
    for r in heads {
        if let Some(g) = out.iter_mut().find(|g| g.layer == r.layer) {
            g.heads.push((r.head, r.input));
            continue;
        }
        let p = layers.get(r.layer)?;
        let b = p.block.as_ref().ok_or_else(|| anyhow!("internal: path patching needs a block"))?;
        let x = (&inputs[r.layer] + delta)?; // [pos, d_model]
        let x = norm(&x, &b.norm1, cfg)?; // [pos, d_model]
        let mut rec = quiet(cfg, x.dim(0)?);
        let (q, k, v) = projected(cfg, &p, &x, (r.layer, 0), &mut Hooks::new(&mut rec))?;
        let times = cfg.heads / cfg.kv_heads();
        let theirs = [q, repeat_kv(&k, times)?, repeat_kv(&v, times)?]; // [head, pos, d_k], [head, pos, d_k], [head, pos, d_v]
        out.push(Receive { layer: r.layer, heads: vec![(r.head, r.input)], theirs });
    }
    Ok(out)
}
