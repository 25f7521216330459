//! The logit lens (`--lens`, `--lens-track`): each layer's residual stream read out through the
//! final norm and the head as if it were the last layer (nostalgebraist 2020), as a hook at
//! every layer's output (`layers.{l}.output`, an unrecorded site of `model/stack.rs`). Per layer
//! it keeps each position's most probable tokens and, with `--lens-track`, the followed
//! tokens' exact ranks from the same logits; the run puts them in the trace ([`Found`]). Only the pass that starts at position 0 is read: a generation's decode
//! steps would cost a head per layer per token.

use crate::config::ModelConfig;
use crate::hook::{Hook, Registry, Site};
use crate::model::head::{self, Unembed};
use crate::model::unembed;
use crate::params::Params;
use crate::trace::{Prediction, Trace, Tracked};
use anyhow::Result;
use candle_core::Tensor;
use std::cell::RefCell;

/// Per position, the most probable tokens (id, probability).
type Top = Vec<Vec<(u32, f32)>>;

/// What the lens read, layer by layer.
#[derive(Default)]
struct Read {
    top: Vec<Top>,
    /// Per layer, per position, per followed token: (rank, probability).
    ranks: Vec<Vec<Vec<(usize, f32)>>>,
}

/// The logit lens over `params`' head, keeping `k` tokens per position (at least 1) and
/// following `track`'s ids.
pub struct Lens<'p> {
    params: &'p Params,
    head: Option<Unembed<'p>>,
    k: usize,
    track: Vec<u32>,
    read: RefCell<Read>,
}

impl<'p> Lens<'p> {
    pub fn new(cfg: &ModelConfig, params: &'p Params, k: usize, track: Vec<u32>) -> Lens<'p> {
        let head = Unembed::of(cfg, params);
        Lens { params, head, k: k.max(1), track, read: RefCell::new(Read::default()) }
    }

    /// Registers the lens after each of `cfg.layers` layers.
    pub fn register<'h>(&'h self, cfg: &ModelConfig, registry: &mut Registry<'h>) {
        for l in 0..cfg.layers {
            registry.add(format!("layers.{l}.output"), self);
        }
    }

    /// What the lens read, for the trace.
    pub fn finish(self) -> Found {
        let Read { top, ranks } = self.read.into_inner();
        let prediction = |(id, prob)| Prediction { id, token: None, text: None, prob };
        let layers = top.into_iter().map(|rows| rows.into_iter().map(|r| r.into_iter().map(prediction).collect()));
        let layers: Vec<Vec<Vec<Prediction>>> = layers.map(|rows| rows.collect()).collect();
        let follow = |(i, &id)| {
            let layers = ranks.iter().map(|by_pos| by_pos.iter().map(|row: &Vec<(usize, f32)>| row[i]).collect());
            Tracked { id, token: None, text: None, layers: layers.collect() }
        };
        Found {
            lens: (!layers.is_empty()).then_some(layers),
            lens_track: (!self.track.is_empty()).then(|| self.track.iter().enumerate().map(follow).collect()),
        }
    }
}

/// The trace's `lens` (when a layer was read) and `lens_track` (when tokens were followed).
pub struct Found {
    pub lens: Option<Vec<Vec<Vec<Prediction>>>>,
    pub lens_track: Option<Vec<Tracked>>,
}

impl Found {
    pub fn fill(self, trace: &mut Trace) {
        trace.lens = self.lens;
        trace.lens_track = self.lens_track;
    }
}

impl Hook for Lens<'_> {
    fn at(&self, site: &Site, cfg: &ModelConfig, t: Tensor) -> Result<Tensor> {
        let Some(head) = &self.head else { return Ok(t) };
        let mut read = self.read.borrow_mut();
        // The first pass only (a decode step's offset is past it), each layer once.
        if site.offset != 0 || site.layer != Some(read.top.len()) {
            return Ok(t);
        }
        let normed = unembed::final_norm(cfg, self.params, &t)?; // [pos, d_model]
        let logits = unembed::capped(cfg, head.logits(&normed)?)?; // [pos, vocab]
        read.top.push(head::top_k(&logits, self.k)?);
        if !self.track.is_empty() {
            // `--lens-track`: the chosen tokens' exact ranks, from the same logits.
            read.ranks.push(head::ranks(&logits, &self.track)?); // [pos][tracked]
        }
        Ok(t)
    }
}
