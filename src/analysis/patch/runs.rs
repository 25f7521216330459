//! The runs a patching sweep makes: from a layer on, with the run's hooks and the sweep's,
//! keeping a step of every layer; their embeddings, and their metric.

use super::sweep::Metric;
use crate::config::ModelConfig;
use crate::hook::{Hook, Hooks, Registry, Site};
use crate::model::pass::Pass;
use crate::model::{embed, head, stack, unembed};
use crate::params::Input;
use crate::params::{LayerParams, Layers, Params};
use crate::trace::{Recorder, Selection};
use anyhow::{anyhow, Result};
use candle_core::Tensor;
use std::cell::RefCell;

/// A recorder that keeps nothing: a sweep's runs read what they need through hooks.
pub(crate) fn quiet(cfg: &ModelConfig, n: usize) -> Recorder {
    let none = Selection { steps: Some(Default::default()), ..Default::default() };
    Recorder::new(vec![String::new(); n], cfg.clone(), none)
}

/// Keeps a step of every layer as the pass goes on with it (after the run's own hooks): each
/// layer's shape and f32 values, in layer order.
#[derive(Default)]
pub(crate) struct Keep {
    pub kept: RefCell<Vec<(Vec<usize>, Vec<f32>)>>,
}

impl Hook for Keep {
    fn at(&self, _: &Site, _: &ModelConfig, t: Tensor) -> Result<Tensor> {
        let values = t.to_dtype(candle_core::DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        self.kept.borrow_mut().push((t.dims().to_vec(), values));
        Ok(t)
    }
}

/// One run from layer `from` on, with `x` the input of layer `from`: the residual stream's
/// inputs of every layer, each layer's kept step (`keep`'s, if any), and the final output.
pub(crate) struct Run {
    pub inputs: Vec<Tensor>,
    pub kept: Vec<Vec<f32>>,
    /// The kept steps' shapes.
    pub shapes: Vec<Vec<usize>>,
    pub last: Tensor,
}

/// Runs layers `from..` on `x` with `hooks` (the run's interventions, then the sweep's own),
/// keeping step `keep` (a step name, `attn.context`) of every layer after them.
pub(crate) fn run_from(
    cfg: &ModelConfig,
    layers: &Layers,
    (from, x): (usize, Tensor),
    keep: Option<&str>,
    hooks: &Registry,
) -> Result<Run> {
    let mut rec = quiet(cfg, x.dim(0)?);
    let kept = Keep::default();
    let mut registry = hooks.clone();
    if let Some(step) = keep {
        (from..layers.len()).for_each(|l| registry.add(format!("layers.{l}.{step}"), &kept));
    }
    let mut inputs = Vec::new();
    let mut hooks = Hooks::with(&mut rec, registry);
    let last = stack::stack(cfg, layers, (from, &mut Pass::default()), x, &mut hooks, |_, input, _, _| {
        inputs.push(input.clone());
        Ok(())
    })?; // [pos, d_model]
    drop(hooks);
    let (shapes, kept): (Vec<_>, Vec<_>) = kept.kept.into_inner().into_iter().unzip();
    if let Some(step) = keep.filter(|_| shapes.len() != layers.len() - from) {
        return Err(crate::error::usage(
            "--patch-step",
            format!("this model computes {step} in {} of its {} layers", shapes.len(), layers.len()),
            "name a step every layer computes (docs/TRACE.md lists them by family)",
        ));
    }
    Ok(Run { inputs, kept, shapes, last })
}

/// Every layer's parameters read once (a sweep runs each layer many times: a lazily loaded
/// checkpoint is read once), and the whole token table checked for.
pub(crate) fn ready(params: &Params) -> Result<(usize, Layers)> {
    let layers: Vec<LayerParams> =
        (0..params.layers.len()).map(|i| Ok(params.layers.get(i)?.into_owned())).collect::<Result<_>>()?;
    if params.token.is_none() && params.stored.is_none() {
        return Err(anyhow!("internal: patching needs the whole token table"));
    }
    Ok((layers.len(), Layers::Ready(layers)))
}

/// The metric of a run's last hidden state (before the final norm), through the same final
/// norm and head as the forward pass.
pub(crate) fn score(
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
pub(crate) fn embedded(cfg: &ModelConfig, params: &Params, input: &Input, whole_table: bool) -> Result<Tensor> {
    let n = match input {
        Input::Ids { ids, .. } => ids.len(),
        Input::Matrix(m) => m.dim(0)?,
    };
    let mut rec = quiet(cfg, n);
    if whole_table {
        return embed::embed(cfg, &Params { token_rows: None, ..params.clone() }, input, &mut Hooks::new(&mut rec));
    }
    embed::embed(cfg, params, input, &mut Hooks::new(&mut rec))
}
