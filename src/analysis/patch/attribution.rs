//! Attribution patching (Nanda 2023, "Attribution patching: activation patching at
//! industrial scale"; Syed, Rager & Conmy 2023, "Attribution patching outperforms automated
//! circuit discovery"): the activation-patching grid of `activation.rs` estimated to first order
//! from one clean run, one corrupted run and one backward pass. Patching activation a (a
//! head's context, or one position of a layer's output) changes the metric by about
//!
//! ```text
//! Δ ≈ Σ (a_clean − a_corrupted) · ∂metric/∂a |corrupted run
//! ```
//!
//! summed over the head's positions and width (or the position's width). Each cell is then
//! normalised as the exact grid is: its metric is corrupted + Δ and its effect
//! Δ / (clean − corrupted) (`sweep.rs`'s `effect`). The estimate is exact when the metric is linear
//! in a; through a saturated softmax or a norm a large change is under- or over-estimated
//! (docs/INTERVENTIONS.md).
//!
//! Gradients come from candle's autograd rather than a backward pass written by hand: the
//! corrupted run's embedding output is a `Var`, so every tensor after it records its op, and
//! `Tensor::backward` differentiates the metric through all of them. The forward pass is then
//! the one every trace runs (every family, norm, rotary and activation option at once, with no
//! second copy of the model's arithmetic to keep in step, as a hand-written backward would
//! need for each option). Three adjustments make candle 0.11's autograd fit:
//!
//! - its backward pass keeps only variables' gradients (an intermediate's is dropped once
//!   passed on), so the [`Taps`] hook adds a zero `Var` to each layer's `attn.context` and output
//!   and keeps it: its gradient is the activation's, and t + 0 is t to the bit;
//! - the softmax's fused kernels have no backward, so `softmax.rs` uses candle's plain ops
//!   when its input tracks gradients;
//! - a matrix product's backward computes both operands' gradients, every weight's included,
//!   so `grad_linear.rs` makes a linear layer one op of its input alone (BENCHMARKS.md: 1.55 s
//!   and 1.68 GiB before, 0.87 s and 605 MiB after, on SmolLM2).
//!
//! What has no gradient path is refused: `--knockout` (settings; a query without keys has a
//! 0/0 softmax backward), `--arithmetic ggml` (settings; llama.cpp's kernels) and a mixture of
//! experts (here; its routing leaves the graph). An encoder's output-distance metric is kept:
//! ‖out − clean‖ is differentiable at the corrupted run, where it is not 0 (when it is,
//! clean = corrupted and every effect is 0/0 anyway).

use super::runs::{embedded, quiet, ready, score};
use super::sweep::{effect, Method, Metric, Row, Sweep, What};
use crate::config::ModelConfig;
use crate::hook::{Hook, Hooks, Registry, Site};
use crate::model::pass::Pass;
use crate::model::{head, stack, unembed};
use crate::params::{Input, Layers, Params};
use anyhow::{anyhow, Result};
use candle_core::{Tensor, Var};
use std::cell::RefCell;

/// Per layer, an attribution-patching run's activations, each as (its value, the handle whose
/// gradient is its own: the zero variable added to it where it tracks gradients, else itself).
#[derive(Default)]
struct Kept {
    contexts: Vec<(Tensor, Tensor)>,
    outputs: Vec<(Tensor, Tensor)>,
}

/// The hook that keeps every layer's `attn.context` and output (`layers.L.output`). A tensor
/// that tracks gradients goes on as t + 0, the 0 a `Var` of t's shape, and the variable is
/// kept: candle 0.11's backward pass drops an intermediate tensor's gradient once it has
/// passed it on and keeps only the variables', and the zero's gradient is t's (the sum's
/// derivative by either term is 1). t + 0 is t to the bit. It also sits at `attn.weights`,
/// where it changes nothing: a hook at a square step has the layer's attention computed
/// whole, through the softmax whose backward candle has, never in tiles.
#[derive(Default)]
struct Taps {
    kept: RefCell<Kept>,
}

impl Hook for Taps {
    fn at(&self, site: &Site, _: &ModelConfig, t: Tensor) -> Result<Tensor> {
        if site.name == "attn.weights" {
            return Ok(t);
        }
        let (t, kept) = if t.track_op() {
            let zero = Var::zeros(t.shape(), t.dtype(), t.device())?;
            ((&t + zero.as_tensor())?, (t.detach(), zero.as_tensor().clone()))
        } else {
            (t.clone(), (t.clone(), t))
        };
        let mut all = self.kept.borrow_mut();
        match site.name {
            "attn.context" => all.contexts.push(kept),
            _ => all.outputs.push(kept),
        }
        Ok(t)
    }
}

/// One full run: each layer's context `[head, pos, d_v]` and output `[pos, d_model]` (the
/// tensors, or for the corrupted run the variables whose gradients are theirs: [`Taps`]),
/// and the last hidden state (before the final norm). The taps run after the run's own
/// hooks (`hooks`): they keep what the pass goes on with, an ablated head's context ablated.
struct Run {
    taps: Kept,
    last: Tensor,
}

fn run(cfg: &ModelConfig, layers: &Layers, x: Tensor, hooks: &Registry) -> Result<Run> {
    let mut rec = quiet(cfg, x.dim(0)?);
    let taps = Taps::default();
    let mut registry = hooks.clone();
    for l in 0..layers.len() {
        for step in ["attn.weights", "attn.context", "output"] {
            registry.add(format!("layers.{l}.{step}"), &taps);
        }
    }
    let mut hooks = Hooks::with(&mut rec, registry);
    let last = stack::stack(cfg, layers, (0, &mut Pass::default()), x, &mut hooks, |_, _, _, _| Ok(()))?; // [pos, d_model]
    drop(hooks);
    Ok(Run { taps: taps.kept.into_inner(), last })
}

/// The metric of a run's last hidden state as a scalar tensor of the graph (what `runs.rs`'s
/// `score` computes as a number).
fn metric_tensor(
    cfg: &ModelConfig,
    params: &Params,
    head: Option<&head::Unembed>,
    metric: &Metric,
    (x, clean): (&Tensor, &Tensor),
) -> Result<Tensor> {
    let x = unembed::final_norm(cfg, params, x)?; // [pos, d_model]
    Ok(match metric {
        Metric::LogitDiff { a, b, position } => {
            let row = x.narrow(0, *position, 1)?; // [1, d_model]
            let logits = unembed::logits(cfg, params, head, &row)?
                .ok_or_else(|| anyhow!("internal: a logit metric needs a head"))?; // [1, vocab]
            (logits.narrow(1, *a as usize, 1)? - logits.narrow(1, *b as usize, 1)?)?.sum_all()?
            // []
        }
        Metric::OutputDistance => (&x - clean)?.sqr()?.sum_all()?.sqrt()?, // []
    })
}

/// Σ over every axis but the first of (clean − corrupted) · gradient: one estimate per head
/// (`[head, pos, d_v]`) or per position (`[pos, d_model]`). A tensor the metric does not
/// depend on has no gradient: its estimates are 0.
fn deltas(clean: &Tensor, corrupted: &Tensor, grad: Option<&Tensor>) -> Result<Vec<f64>> {
    let count = clean.dim(0)?;
    let Some(grad) = grad else { return Ok(vec![0.0; count]) };
    let product = (clean - corrupted)?.mul(grad)?.flatten_from(1)?; // [count, rest]
    let rows = product.to_dtype(candle_core::DType::F64)?.sum(1)?; // [count]
    Ok(rows.to_vec1::<f64>()?)
}

/// The sweep of `activation.rs`, estimated: the clean run, the corrupted run with gradients,
/// one backward pass from its metric, and every cell from the products above.
pub fn sweep(
    cfg: &ModelConfig,
    params: &Params,
    (clean, corrupted): (&Input, &Input),
    what: What,
    metric: &Metric,
    hooks: &Registry,
) -> Result<Sweep> {
    if let What::Step(step) = what {
        // Settings refuse `--patch-step` with `--patch-method attribution`.
        return Err(anyhow!("internal: attribution patching of {step}"));
    }
    if cfg.parts.experts.is_some() {
        // The router's top-k is chosen from numbers read out of the graph (`ffn.rs`): no
        // gradient would reach the experts, and the estimate would silently miss them.
        return Err(crate::error::usage(
            "--patch-method attribution",
            "a mixture of experts routes tokens outside the gradient's graph",
            "use --patch-method exact",
        ));
    }
    // Both runs read every layer: a lazily loaded checkpoint is read once.
    let (l_count, layers) = ready(params)?;
    // Read three times (both metrics, then the graph's): a stored head is made f32 once.
    let head = head::Unembed::of(cfg, params).map(head::Unembed::dense).transpose()?;
    let c = run(cfg, &layers, embedded(cfg, params, clean, false)?, hooks)?;
    // The corrupted run's embeddings are the graph's leaf: everything after them tracks ops.
    let leaf = Var::from_tensor(&embedded(cfg, params, corrupted, true)?)?;
    let base = run(cfg, &layers, leaf.as_tensor().clone(), hooks)?;
    let final_clean = unembed::final_norm(cfg, params, &c.last)?; // [pos, d_model]
    let clean_m = score(params, cfg, head.as_ref(), metric, &c.last, Some(&final_clean))?;
    let corrupted_m = score(params, cfg, head.as_ref(), metric, &base.last, Some(&final_clean))?;
    let grads = metric_tensor(cfg, params, head.as_ref(), metric, (&base.last, &final_clean))?.backward()?;
    let (ours, theirs) = match what {
        What::Heads => (&c.taps.contexts, &base.taps.contexts),
        What::Resid | What::Step(_) => (&c.taps.outputs, &base.taps.outputs),
    };
    if ours.len() != l_count || theirs.len() != l_count {
        return Err(anyhow!("internal: attribution patching kept {} of {l_count} layers", theirs.len()));
    }
    let mut rows = Vec::new();
    for (l, (a_clean, a_corrupted)) in ours.iter().zip(theirs).enumerate() {
        let estimates = deltas(&a_clean.0, &a_corrupted.0, grads.get(&a_corrupted.1))?;
        rows.extend(estimates.into_iter().enumerate().map(|(index, delta)| {
            let m = corrupted_m + delta;
            Row { layer: l, index, head: None, metric: m, effect: effect(m, clean_m, corrupted_m) }
        }));
    }
    let runs = rows.len();
    Ok(Sweep {
        method: Method::Attribution,
        what,
        metric: metric.clone(),
        clean: clean_m,
        corrupted: corrupted_m,
        rows,
        layer_runs: 2 * l_count,
        layer_runs_without_reuse: (runs + 2) * l_count,
        receivers: None,
    })
}
