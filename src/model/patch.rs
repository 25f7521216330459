//! Activation patching (as in TransformerLens's patching utilities): the clean input's
//! activations are copied into the corrupted input's run, one at a time (every layer × head's
//! context, or every layer × position of the residual stream), and each run's metric is
//! compared with the two unpatched runs: effect = (patched − corrupted) / (clean − corrupted),
//! 1 when the patch restores the clean behaviour and 0 when it changes nothing. When the
//! clean and corrupted metrics are equal that is 0/0: the effects are undefined (`None`),
//! and each row's own metric is still given.
//!
//! The metric: for a language model, the logit difference between two answer tokens at the
//! last position (logit[a] − logit[b]); for a masked-LM checkpoint given two answers, the same
//! difference at the clean sentence's `[MASK]` position, through the masked-LM head; for any
//! other encoder, the distance of the output from the clean output (‖out − clean‖ over every
//! position, so the clean metric is 0 and the effect is 1 − d/d_corrupted).
//!
//! Reuse: a patch at layer l changes nothing before layer l, so each patched run starts from
//! the corrupted run's residual stream at layer l's input (kept from the baseline run) and
//! computes only layers l…L−1: a sweep over L layers costs about half the full runs.

pub use super::intervene::Patch;
use super::pass::Pass;
use super::{embed, head, stack, unembed};
use crate::config::ModelConfig;
use crate::hook::{Hooks, Registry};
use crate::params::Input;
use crate::params::{LayerParams, Layers, Params};
use crate::trace::{Recorder, Selection};
use anyhow::{anyhow, Result};
use candle_core::Tensor;
use std::sync::Arc;

/// What is patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    /// Each head's context (`attn.context`), at every position.
    Heads,
    /// The layer output at each position (the residual stream).
    Resid,
}

/// How the grid is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// One patched run per cell (this file).
    Exact,
    /// One clean run, one corrupted run and one backward pass: the first-order estimate of
    /// every cell at once (`attrpatch.rs`).
    Attribution,
    /// Path patching: each head's output along its direct path into the receivers taken from
    /// the corrupted run, in the clean run (`pathpatch.rs`).
    Path,
}

/// The metric, with what it needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// logit[a] − logit[b] at `position` (the last one for a language model, the `[MASK]`
    /// for a masked-LM encoder).
    LogitDiff { a: u32, b: u32, position: usize },
    /// The output's distance from the clean output.
    OutputDistance,
}

/// One patched run.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub layer: usize,
    /// The head (`Heads`) or the position (`Resid`).
    pub index: usize,
    pub metric: f64,
    /// `None` when the clean and corrupted metrics are equal (the effect would be 0/0).
    pub effect: Option<f64>,
}

/// A whole sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    pub method: Method,
    pub what: What,
    pub metric: Metric,
    pub clean: f64,
    pub corrupted: f64,
    pub rows: Vec<Row>,
    /// Layer runs computed, and what full runs without reuse would have cost.
    pub layer_runs: usize,
    pub layer_runs_without_reuse: usize,
    /// Path patching's receivers, as `--patch-path` names them (`logits`, `9.6:q,…`).
    pub receivers: Option<String>,
}

/// A recorder that keeps only `attn.context` (what a head patch copies).
pub(super) fn quiet(cfg: &ModelConfig, n: usize, keep_context: bool) -> Recorder {
    let steps = if keep_context { ["attn.context".to_string()].into_iter().collect() } else { Default::default() };
    Recorder::new(vec![String::new(); n], cfg.clone(), Selection { steps: Some(steps), ..Default::default() })
}

/// One run from layer `from` on, with `x` the input of layer `from`: the residual stream's
/// inputs of every layer, the per-layer contexts (if kept), and the final output.
pub(super) struct Run {
    pub inputs: Vec<Tensor>,
    pub contexts: Vec<Vec<f32>>,
    pub outputs: Vec<Tensor>,
    pub last: Tensor,
}

pub(super) fn run_from(
    cfg: &ModelConfig,
    layers: &Layers,
    (from, mut pass): (usize, super::pass::Pass),
    x: Tensor,
    (keep, hooks): (bool, &Registry),
) -> Result<Run> {
    let mut rec = quiet(cfg, x.dim(0)?, keep);
    let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
    let mut hooks = Hooks::with(&mut rec, hooks.clone());
    let last = stack::stack(cfg, layers, (from, &mut pass), x, &mut hooks, |_, input, out, _| {
        inputs.push(input.clone());
        outputs.push(out.clone());
        Ok(())
    })?; // [pos, d_model]
    drop(hooks);
    let (trace, _) = rec.finish();
    let contexts = trace.steps.iter().filter_map(|s| s.f32s().map(<[f32]>::to_vec)).collect();
    Ok(Run { inputs, contexts, outputs, last })
}

/// The metric of a run's last hidden state (before the final norm), through the same final
/// norm and head as the forward pass.
pub(super) fn score(
    params: &Params,
    cfg: &ModelConfig,
    head: Option<&head::Unembed>,
    metric: &Metric,
    x: &Tensor,
    clean: Option<&Tensor>,
) -> Result<f64> {
    let x = unembed::final_norm(cfg, params, x)?; // [pos, d_model]
    match metric {
        Metric::LogitDiff { a, b, position } => {
            let row = x.narrow(0, *position, 1)?; // [1, d_model]
            let logits = unembed::logits(cfg, params, head, &row)?
                .ok_or_else(|| anyhow!("internal: a logit metric needs a head"))?; // [1, vocab]
            let logits = logits.flatten_all()?.to_vec1::<f32>()?;
            Ok(logits[*a as usize] as f64 - logits[*b as usize] as f64)
        }
        Metric::OutputDistance => {
            let Some(c) = clean else { return Ok(0.0) };
            let d = (&x - c)?.sqr()?.sum_all()?.to_scalar::<f32>()?;
            Ok((d as f64).sqrt())
        }
    }
}

/// The embeddings of `input`. An encoder's `token_rows` are the clean sentence's: the
/// corrupted one (`whole_table`) looks its rows up in the whole table (kept for `--patch`).
pub(super) fn embedded(
    cfg: &ModelConfig,
    params: &Params,
    input: &Input,
    (whole_table, hooks): (bool, &Registry),
) -> Result<Tensor> {
    let n = match input {
        Input::Ids { ids, .. } => ids.len(),
        Input::Matrix(m) => m.dim(0)?,
    };
    let mut rec = quiet(cfg, n, false);
    let mut hooks = Hooks::with(&mut rec, hooks.clone());
    if whole_table {
        return embed::embed(cfg, &Params { token_rows: None, ..params.clone() }, input, &mut hooks);
    }
    embed::embed(cfg, params, input, &mut hooks)
}

/// (patched − corrupted) / (clean − corrupted), or `None` where the denominator is 0 (the
/// runs do not differ on the metric) or not finite.
pub fn effect(patched: f64, clean: f64, corrupted: f64) -> Option<f64> {
    let span = clean - corrupted;
    (span != 0.0 && span.is_finite()).then(|| (patched - corrupted) / span)
}

/// Runs the sweep: the clean and corrupted baselines, then one patched run per layer × head
/// (or layer × position).
pub fn sweep(
    cfg: &ModelConfig,
    params: &Params,
    clean: &Input,
    corrupted: &Input,
    what: What,
    (metric, hooks): (&Metric, &Registry),
) -> Result<Sweep> {
    // Every layer is needed many times: read a lazily loaded checkpoint once.
    let layers: Vec<LayerParams> =
        (0..params.layers.len()).map(|i| Ok(params.layers.get(i)?.into_owned())).collect::<Result<_>>()?;
    let (l_count, layers) = (layers.len(), Layers::Ready(layers));
    // Applied once per patched run: a stored head is made f32 once, here.
    let head = head::Unembed::of(cfg, params).map(head::Unembed::dense).transpose()?;
    if params.token.is_none() && params.stored.is_none() {
        return Err(anyhow!("internal: patching needs the whole token table"));
    }
    let c = run_from(cfg, &layers, (0, Pass::default()), embedded(cfg, params, clean, (false, hooks))?, (true, hooks))?;
    let x = embedded(cfg, params, corrupted, (true, hooks))?; // [pos, d_model]
    let base = run_from(cfg, &layers, (0, Pass::default()), x, (false, hooks))?;
    let final_clean = unembed::final_norm(cfg, params, &c.last)?; // [pos, d_model]
    let clean_m = score(params, cfg, head.as_ref(), metric, &c.last, Some(&final_clean))?;
    let corrupted_m = score(params, cfg, head.as_ref(), metric, &base.last, Some(&final_clean))?;
    let (n, heads) = (c.last.dim(0)?, cfg.heads);
    let mut rows = Vec::new();
    let mut layer_runs = 2 * l_count;
    for l in 0..l_count {
        let count = match what {
            What::Heads => heads,
            What::Resid => n,
        };
        for index in 0..count {
            let values = match what {
                What::Heads => {
                    let ctx = &c.contexts[l];
                    let per = ctx.len() / heads;
                    ctx[index * per..(index + 1) * per].to_vec()
                }
                What::Resid => c.outputs[l].get(index)?.to_vec1::<f32>()?,
            };
            let head_of = (what == What::Heads).then_some(index);
            let patch = Patch { layer: l, head: head_of, position: index, values: Arc::new(values) };
            let run = run_from(cfg, &layers, (l, Pass::patched(Some(&patch))), base.inputs[l].clone(), (false, hooks))?;
            layer_runs += l_count - l;
            let m = score(params, cfg, head.as_ref(), metric, &run.last, Some(&final_clean))?;
            let effect = effect(m, clean_m, corrupted_m);
            rows.push(Row { layer: l, index, metric: m, effect });
        }
    }
    let runs = rows.len();
    Ok(Sweep {
        method: Method::Exact,
        what,
        metric: metric.clone(),
        clean: clean_m,
        corrupted: corrupted_m,
        rows,
        layer_runs,
        layer_runs_without_reuse: (runs + 2) * l_count,
        receivers: None,
    })
}
