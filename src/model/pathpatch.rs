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
//! none, 1 for all of it (`patch::effect` with the runs' roles swapped).
//!
//! What has no direct residual path is refused: post-norm blocks, sandwich norms (Gemma),
//! attention-only layers, heads without an output projection, and encoder–decoders.

use super::kernels::linear::linear;
use super::pass::{Pass, Receive};
use super::patch::{self, Method, Metric, Row, Sweep, What};
use super::{head, unembed};
use crate::config::{ModelConfig, Norm};
use crate::error::usage;
use crate::hook::Registry;
use crate::params::receivers::{Receiver, Receivers};
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
/// final stream (`logits`) or one run from the first receiver layer on (receiver heads).
pub fn sweep(
    cfg: &ModelConfig,
    params: &Params,
    (clean, corrupted): (&Input, &Input),
    receivers: &Receivers,
    (metric, hooks): (&Metric, &Registry),
) -> Result<Sweep> {
    let first = check(cfg, receivers)?;
    let layers: Vec<LayerParams> =
        (0..params.layers.len()).map(|i| Ok(params.layers.get(i)?.into_owned())).collect::<Result<_>>()?;
    let (l_count, layers) = (layers.len(), Layers::Ready(layers));
    let head = head::Unembed::of(cfg, params).map(head::Unembed::dense).transpose()?;
    if params.token.is_none() && params.stored.is_none() {
        return Err(anyhow!("internal: patching needs the whole token table"));
    }
    let c = patch::embedded(cfg, params, clean, (false, hooks))?; // [pos, d_model]
    let c = patch::run_from(cfg, &layers, (0, Pass::default()), c, (true, hooks))?;
    let x = patch::embedded(cfg, params, corrupted, (true, hooks))?; // [pos, d_model]
    let x = patch::run_from(cfg, &layers, (0, Pass::default()), x, (true, hooks))?;
    let final_clean = unembed::final_norm(cfg, params, &c.last)?; // [pos, d_model]
    let score = |last: &Tensor| patch::score(params, cfg, head.as_ref(), metric, last, Some(&final_clean));
    let (clean_m, corrupted_m) = (score(&c.last)?, score(&x.last)?);
    let mut rows = Vec::new();
    let mut layer_runs = 2 * l_count;
    for ls in 0..first {
        let p = layers.get(ls)?;
        for hs in 0..cfg.heads {
            let delta = sender_delta(cfg, &p, hs, (&c.contexts[ls], &x.contexts[ls]))?; // [pos, d_model]
            let last = match receivers {
                Receivers::Logits => (&c.last + &delta)?, // [pos, d_model]
                Receivers::Heads(heads) => {
                    let receive = receiving(heads, &c.inputs, &delta)?;
                    layer_runs += l_count - first;
                    let run = patch::run_from(
                        cfg,
                        &layers,
                        (first, Pass::receiving(&receive)),
                        c.inputs[first].clone(),
                        (false, hooks),
                    )?;
                    run.last
                }
            };
            let m = score(&last)?;
            rows.push(Row { layer: ls, index: hs, metric: m, effect: patch::effect(m, corrupted_m, clean_m) });
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

/// The sweep `--patch` asks for: path patching into `path`'s receivers, else attribution
/// patching's estimate or the exact activation-patching sweep of `what`.
pub fn any(
    cfg: &ModelConfig,
    params: &Params,
    (clean, corrupted): (&Input, &Input),
    (what, attribution, path): (What, bool, Option<&Receivers>),
    (metric, hooks): (&Metric, &Registry),
) -> Result<Sweep> {
    match path {
        Some(receivers) => sweep(cfg, params, (clean, corrupted), receivers, (metric, hooks)),
        None if attribution => super::attrpatch::sweep(cfg, params, clean, corrupted, what, (metric, hooks)),
        None => patch::sweep(cfg, params, clean, corrupted, what, (metric, hooks)),
    }
}

/// The receivers grouped by layer, each layer's input the clean residual stream there
/// (`inputs[l]`) + `delta`.
fn receiving(heads: &[Receiver], inputs: &[Tensor], delta: &Tensor) -> Result<Vec<Receive>> {
    let mut out: Vec<Receive> = Vec::new();
    for r in heads {
        match out.iter_mut().find(|g| g.layer == r.layer) {
            Some(g) => g.heads.push((r.head, r.input)),
            None => {
                let x = (&inputs[r.layer] + delta)?; // [pos, d_model]
                out.push(Receive { layer: r.layer, heads: vec![(r.head, r.input)], x });
            }
        }
    }
    Ok(out)
}
