//! Activation patching's exact sweep (`mod.rs` says what it measures): one patched run per
//! cell, the patch a hook that copies the clean run's values of one step into the corrupted
//! run, at one layer: a head's rows of `attn.context`, or one position of the layer's output
//! (the unrecorded site `layers.L.output`, `hook/mod.rs`).

use super::runs::{embedded, ready, run_from, score};
use super::sweep::{effect, Method, Metric, Row, Sweep, What};
use crate::config::ModelConfig;
use crate::hook::{Hook, Registry, Site};
use crate::model::{head, unembed};
use crate::params::{Input, Params};
use anyhow::{anyhow, Result};
use candle_core::{Device, Tensor};
use std::ops::Range;
use std::sync::Arc;

/// Another run's values of a step copied into this run's: one head's rows of a step with
/// heads (`[head, pos, …]`), one position's (the axis before the last: `[pos, d]`, or every
/// head's row of `[head, pos, d]`), or one head's at one position.
pub struct Copied {
    pub head: Option<usize>,
    pub position: Option<usize>,
    /// The other run's whole step, flattened: the same shape as this run's.
    pub from: Arc<Vec<f32>>,
}

impl Copied {
    /// The flat ranges of a tensor of `dims` that the patch replaces.
    fn ranges(&self, dims: &[usize]) -> Result<Vec<Range<usize>>> {
        let (heads, n, width) = match *dims {
            [n, width] => (1, n, width),
            [heads, n, width] => (heads, n, width),
            _ => return Err(anyhow!("internal: a patch of a step of shape {dims:?}")),
        };
        let (head, position) = (self.head.filter(|_| dims.len() == 3), self.position);
        if head.is_some_and(|h| h >= heads) || position.is_some_and(|p| p >= n) {
            return Err(anyhow!("internal: a patch outside a step of shape {dims:?}"));
        }
        let block = |g: usize| match position {
            Some(p) => (g * n + p) * width..(g * n + p + 1) * width,
            None => g * n * width..(g + 1) * n * width,
        };
        Ok(match head {
            Some(h) => vec![block(h)],
            None => (0..heads).map(block).collect(),
        })
    }
}

impl Hook for Copied {
    fn at(&self, _: &Site, _: &ModelConfig, t: Tensor) -> Result<Tensor> {
        let dims = t.dims().to_vec();
        let mut all = t.flatten_all()?.to_vec1::<f32>()?;
        if all.len() != self.from.len() {
            return Err(anyhow!("internal: a patch of {} values into a step of {}", self.from.len(), all.len()));
        }
        for r in self.ranges(&dims)? {
            all[r.clone()].copy_from_slice(&self.from[r]);
        }
        Ok(Tensor::from_vec(all, dims, &Device::Cpu)?)
    }
}

/// One layer's cells, as (head, position) patches of a step of `shape`: each head's rows
/// (`Heads`), each position (`Resid`, a `Step` without heads), or each head at each position
/// (a `Step` with heads), in that order.
fn cells(what: What, heads: usize, shape: &[usize]) -> Vec<(Option<usize>, Option<usize>)> {
    match what {
        What::Heads => (0..heads).map(|h| (Some(h), None)).collect(),
        _ if what.per_head() => {
            let (heads, n) = (shape[0], shape.get(1).copied().unwrap_or(0));
            (0..heads).flat_map(|h| (0..n).map(move |p| (Some(h), Some(p)))).collect()
        }
        _ => (0..shape.first().copied().unwrap_or(0)).map(|p| (None, Some(p))).collect(),
    }
}

/// Runs the sweep: the clean and corrupted baselines, then one patched run per layer × head
/// (or layer × position, or layer × head × position of a step), each with the run's own hooks
/// (`hooks`) after the patch.
pub fn sweep(
    cfg: &ModelConfig,
    params: &Params,
    (clean, corrupted): (&Input, &Input),
    what: What,
    metric: &Metric,
    hooks: &Registry,
) -> Result<Sweep> {
    let (l_count, layers) = ready(params)?;
    // Applied once per patched run: a stored head is made f32 once, here.
    let head = head::Unembed::of(cfg, params).map(head::Unembed::dense).transpose()?;
    let step = what.step();
    let c = run_from(cfg, &layers, (0, embedded(cfg, params, clean, false)?), Some(step), hooks)?;
    let base = run_from(cfg, &layers, (0, embedded(cfg, params, corrupted, true)?), None, hooks)?;
    let final_clean = unembed::final_norm(cfg, params, &c.last)?; // [pos, d_model]
    let clean_m = score(params, cfg, head.as_ref(), metric, &c.last, Some(&final_clean))?;
    let corrupted_m = score(params, cfg, head.as_ref(), metric, &base.last, Some(&final_clean))?;
    let mut rows = Vec::new();
    let mut layer_runs = 2 * l_count;
    for (l, (kept, shape)) in c.kept.into_iter().zip(&c.shapes).enumerate() {
        let from = Arc::new(kept);
        for (h, position) in cells(what, cfg.heads, shape) {
            let patch = Copied { head: h, position, from: from.clone() };
            let mut patched = Registry::running(hooks.run.clone());
            patched.add(format!("layers.{l}.{step}"), &patch);
            patched.extend(hooks);
            let run = run_from(cfg, &layers, (l, base.inputs[l].clone()), None, &patched)?;
            layer_runs += l_count - l;
            let m = score(params, cfg, head.as_ref(), metric, &run.last, Some(&final_clean))?;
            let (index, h) = match what {
                What::Heads => (h.unwrap_or(0), None),
                _ => (position.unwrap_or(0), h),
            };
            rows.push(Row { layer: l, index, head: h, metric: m, effect: effect(m, clean_m, corrupted_m) });
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
