//! Two forward passes in lockstep (`attn-trace compare`): both models' embeddings, then layer
//! 0 of each, layer 1 of each, …, then both heads, with `between` called after each part so
//! that the caller compares what the part recorded on both sides and drops it before the next
//! part runs. The arithmetic is [`super::forward`]'s (the same `embed`, `layer` and `unembed`
//! functions), so each side's steps are the steps its own trace has.
//!
//! Memory: a checkpoint read a layer at a time (`Layers::Lazy`) has one layer read ahead while
//! another runs, in the order A0, B0, A1, B1, …: while A's layer i runs B's is read, while
//! B's runs A's next. Two layers' parameters exist at once, as in one model's pass.

use super::{embed, head, layer, unembed};
use crate::config::ModelConfig;
use crate::hook::Hooks;
use crate::params::{Input, LayerParams, Layers, Params};
use anyhow::Result;
use candle_core::Tensor;
use std::borrow::Cow;
use std::thread::{Scope, ScopedJoinHandle};

/// One side of a lockstep run: what [`super::forward`] takes.
pub struct Side<'a> {
    pub cfg: &'a ModelConfig,
    pub params: &'a Params,
    pub input: &'a Input,
}

/// The part of the pass both sides have just finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The embeddings; the tensors are the first layer's input.
    Embed,
    /// Layer i; the tensors are its output (the residual stream after it).
    Layer(usize),
    /// The final norm and the head; the tensors are the last hidden state (`output`).
    Unembed,
}

/// A layer's parameters as they become available: made already, or being read.
enum Pending<'s, 'a> {
    Ready(Box<Cow<'a, LayerParams>>),
    Reading(ScopedJoinHandle<'s, Result<LayerParams>>),
}

impl<'a> Pending<'_, 'a> {
    fn wait(self, i: usize) -> Result<Cow<'a, LayerParams>> {
        match self {
            Pending::Ready(p) => Ok(*p),
            Pending::Reading(h) => match h.join() {
                Ok(layer) => Ok(Cow::Owned(layer?)),
                Err(_) => anyhow::bail!("internal: reading layer {i} failed"),
            },
        }
    }
}

/// Starts making layer `i` of `layers` available: borrowed when made already; the layer the
/// source read to check the checkpoint (layer 0, the first time); else read on a thread.
fn start<'s, 'a>(s: &'s Scope<'s, '_>, layers: &'a Layers, i: usize) -> Result<Pending<'s, 'a>> {
    match layers {
        Layers::Ready(v) => {
            let p = v.get(i).ok_or_else(|| anyhow::anyhow!("internal: no layer {i}"))?;
            Ok(Pending::Ready(Box::new(Cow::Borrowed(p))))
        }
        Layers::Lazy { load, first, .. } => {
            if i == 0 {
                if let Some(p) = first.lock().ok().and_then(|mut f| f.take()) {
                    return Ok(Pending::Ready(Box::new(Cow::Owned(p))));
                }
            }
            let load = load.clone();
            Ok(Pending::Reading(s.spawn(move || load(i))))
        }
    }
}

/// Runs `a` and `b` part by part, each through its own hook port; `between(part,
/// [a's, b's])` sees the tensors each side handed to the next part. Both sides must have
/// the same number of layers. Returns each side's last hidden state.
pub fn lockstep(
    [a, b]: [Side<'_>; 2],
    [hooks_a, hooks_b]: [&mut Hooks; 2],
    mut between: impl FnMut(Part, [&Tensor; 2]) -> Result<()>,
) -> Result<[Tensor; 2]> {
    let count = a.params.layers.len();
    anyhow::ensure!(count == b.params.layers.len(), "internal: the two models' layer counts differ");
    let heads = [head::Unembed::of(a.cfg, a.params), head::Unembed::of(b.cfg, b.params)];
    let mut x = [embed::embed(a.cfg, a.params, a.input, hooks_a)?, embed::embed(b.cfg, b.params, b.input, hooks_b)?];
    between(Part::Embed, [&x[0], &x[1]])?;
    let sides = [&a, &b];
    std::thread::scope(|s| -> Result<()> {
        // The order the layers run in: A0, B0, A1, B1, …; the next one is read while one runs.
        let order: Vec<(usize, usize)> = (0..count).flat_map(|i| [(0, i), (1, i)]).collect();
        let mut next = match order.first() {
            Some(&(side, i)) => Some(start(s, &sides[side].params.layers, i)?),
            None => None,
        };
        for (k, &(side, i)) in order.iter().enumerate() {
            // As stack.rs asks before each layer: a cancelled comparison (Ctrl-C in Python)
            // stops here; the layer being read ahead is joined by the scope.
            super::cancel::check()?;
            let this = next.take().ok_or_else(|| anyhow::anyhow!("internal: layer {i} was not started"))?;
            let p = this.wait(i)?;
            next = match order.get(k + 1) {
                Some(&(side, i)) => Some(start(s, &sides[side].params.layers, i)?),
                None => None,
            };
            let hooks = if side == 0 { &mut *hooks_a } else { &mut *hooks_b };
            let cfg = sides[side].cfg;
            // Unpatched passes: a patch is one run of a patching sweep's state, not a model's.
            x[side] = layer::layer(cfg, &p, &x[side], i, &mut super::pass::Pass::default(), hooks)?; // [pos, d_model]
            drop(p);
            if side == 1 {
                between(Part::Layer(i), [&x[0], &x[1]])?;
            }
        }
        Ok(())
    })?;
    let [xa, xb] = x;
    let out = [
        unembed::unembed(a.cfg, a.params, heads[0].as_ref(), xa, hooks_a)?,
        unembed::unembed(b.cfg, b.params, heads[1].as_ref(), xb, hooks_b)?,
    ];
    between(Part::Unembed, [&out[0], &out[1]])?;
    Ok(out)
}
