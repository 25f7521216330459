//! The hook port: the one place the forward pass hands on every named step. Where the model
//! has computed a step it calls `let t = hooks.at(id, cfg, t)?;`, and the port runs the hooks
//! registered at that step id, in the order they were registered (each may replace the
//! tensor, add to it, or keep a handle on it), then records what comes out: the recorded
//! step is what the pass goes on with. TransformerLens puts a `HookPoint` at every named
//! activation, and llama.cpp's graph calls `cb(cur, "attn_norm", il)`; attn-trace's names are
//! the step catalogue's (`trace/steps.rs`).
//!
//! Besides the recorded steps, the pass calls [`Hooks::through`] at a few sites the trace does
//! not record, where an analysis needs a handle:
//! - `layers.L.output`: layer L's output, `[pos, d_model]`, as the next layer reads it (after
//!   the layer's last recorded step; activation patching of the residual stream, attribution
//!   patching's taps);
//! - `layers.L.attn.q_heads`, `layers.L.attn.k_heads`, `layers.L.attn.v_heads`: the queries,
//!   keys and values as the scores read them, one row per query head, `[head, pos, d]` (after
//!   the rotation, the cache and grouped-query attention's repeat; path patching's receivers
//!   replace one query head's copy of a shared key or value there).
//! - `layers.L.attn.v_heads` is also where `--attribute` reads the values it splits heads by.
//! - [`Hooks::observe`] sites, where the step is recorded in another form or not at all (a
//!   hook sees the tensor but cannot change the pass): `embed.input` (an input matrix given in
//!   place of token ids, `[pos, d_model]`), `layers.L.ffn.router.chosen` (`[pos, rank]` u32),
//!   `layers.L.ffn.router.weights` (`[pos, rank]`), and `logits_uncapped` (the head's output
//!   before any soft-cap, `[pos, vocab]`; observed whenever the logits are computed, also in a
//!   model without a cap).
//!
//! Analyses live outside the model (`analysis/`): each registers its hooks by step id in a
//! [`Registry`] before the pass, and the model knows none of them.

use crate::config::{ModelConfig, RunConfig};
use crate::params::LayerParams;
use crate::trace::{split_id, Recorder};
use anyhow::Result;
use candle_core::Tensor;

/// Where a hook is called: the step as the trace names it and the pass's place.
pub struct Site<'s> {
    /// The step id with its stack's prefix (`layers.3.attn.scores`, `decoder.layers.0.attn.q`).
    pub id: &'s str,
    /// The step's layer, for a per-layer step.
    pub layer: Option<usize>,
    /// The step's name without layer and prefix (`attn.scores`).
    pub name: &'s str,
    /// The absolute position of the tensor's first position: a decode step's is how many
    /// positions the cache held before it, a whole pass's 0.
    pub offset: usize,
    /// The parameters of the layer the step is in, while `model/stack.rs` runs it (an
    /// analysis that reads weights, as `--attribute` reads W_O and the norms, need not read a
    /// lazily loaded layer again); None outside the layers.
    pub params: Option<&'s LayerParams>,
}

/// Something that reads or changes a step as the pass computes it. Hooks are shared between
/// the passes of a run (a generation's decode steps, a sweep's runs), so `at` takes `&self`:
/// a hook that keeps what it sees holds it in a cell.
pub trait Hook {
    /// `t` at `site`, as the pass goes on with it.
    fn at(&self, site: &Site, cfg: &ModelConfig, t: Tensor) -> Result<Tensor>;
}

/// What a run adds to the forward pass: its knobs ([`RunConfig`]: tiles, llama.cpp's
/// arithmetic details) and its hooks, each at a step id. Cheap to clone: it holds references.
#[derive(Clone, Default)]
pub struct Registry<'h> {
    points: Vec<(String, &'h dyn Hook)>,
    /// How this run computes (read by the pass through [`Hooks::run`]).
    pub run: RunConfig,
}

impl<'h> Registry<'h> {
    /// No hook yet, and `run`'s knobs.
    pub fn running(run: RunConfig) -> Self {
        Registry { points: Vec::new(), run }
    }

    /// Adds `hook` at the step `id` (with its stack's prefix), after the hooks already there.
    pub fn add(&mut self, id: impl Into<String>, hook: &'h dyn Hook) {
        self.points.push((id.into(), hook));
    }

    /// Adds `other`'s hooks after the hooks already here, in their order.
    pub fn extend(&mut self, other: &Registry<'h>) {
        self.points.extend(other.points.iter().map(|(id, h)| (id.clone(), *h)));
    }

    /// Whether a hook is registered at `id`.
    pub fn has(&self, id: &str) -> bool {
        self.points.iter().any(|(at, _)| at == id)
    }

    /// Whether no hook is registered.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    fn at<'s>(&'s self, id: &'s str) -> impl Iterator<Item = &'h dyn Hook> + 's {
        self.points.iter().filter(move |(at, _)| at == id).map(|(_, h)| *h)
    }
}

/// The port a pass calls at every step: the run's recorder and hooks.
pub struct Hooks<'a> {
    /// Where kept steps go (the model also asks it what is recorded and reads its requests).
    pub rec: &'a mut Recorder,
    registry: Registry<'a>,
    /// The position of this pass's first token (`Site::offset`).
    offset: usize,
    /// The layer being run and its parameters (`Site::params`), when a hook is registered.
    layer: Option<(usize, LayerParams)>,
}

impl<'a> Hooks<'a> {
    /// A port that only records.
    pub fn new(rec: &'a mut Recorder) -> Self {
        Hooks { rec, registry: Registry::default(), offset: 0, layer: None }
    }

    /// A port with no hooks for a run that computes as `run` says.
    pub fn running(rec: &'a mut Recorder, run: RunConfig) -> Self {
        Hooks::with(rec, Registry::running(run))
    }

    /// A port that runs `registry`'s hooks and records into `rec`.
    pub fn with(rec: &'a mut Recorder, registry: Registry<'a>) -> Self {
        Hooks { rec, registry, offset: 0, layer: None }
    }

    /// The same hooks recording into `rec`: another pass of the same run (a decode step, a
    /// sweep's run) that records elsewhere.
    pub fn to<'b>(&self, rec: &'b mut Recorder) -> Hooks<'b>
    where
        'a: 'b,
    {
        Hooks { rec, registry: self.registry.clone(), offset: 0, layer: None }
    }

    /// The run's hooks.
    pub fn registry(&self) -> &Registry<'a> {
        &self.registry
    }

    /// How this run computes.
    pub fn run(&self) -> &RunConfig {
        &self.registry.run
    }

    /// Starts a pass whose first position is `offset`.
    pub fn start_pass(&mut self, offset: usize) {
        self.offset = offset;
    }

    /// Layer `l` (parameters `p`) starts: its steps' sites carry `p` until [`Hooks::leave_layer`].
    /// A copy of handles (the tensors are shared), made only when a hook is registered.
    pub fn enter_layer(&mut self, l: usize, p: &LayerParams) {
        if !self.registry.is_empty() {
            self.layer = Some((l, p.clone()));
        }
    }

    /// The layer entered last is done (its parameters are not held past it).
    pub fn leave_layer(&mut self) {
        self.layer = None;
    }

    /// Whether a hook is registered at `id` (without its stack's prefix): such a step must be
    /// computed whole, never in tiles.
    pub fn hooked(&self, id: &str) -> bool {
        !self.registry.is_empty() && self.registry.has(&self.rec.full_id(id))
    }

    /// Step `id` (without its stack's prefix) computed as `t`: the registered hooks run in
    /// order, and the result is recorded if the selection keeps it and returned.
    pub fn at(&mut self, id: &str, cfg: &ModelConfig, t: Tensor) -> Result<Tensor> {
        let t = self.through(id, cfg, t)?;
        self.rec.tensor(id, cfg, &t)?;
        Ok(t)
    }

    /// A step the pass goes on with in another form than `t` (the router's choices and
    /// weights, the head's logits before a soft-cap, the values as each query head reads
    /// them): the hooks at `id` see `t` but cannot change the pass, and nothing is recorded
    /// (the caller records the step where it is one). Costs nothing when no hook is registered.
    pub fn observe(&mut self, id: &str, cfg: &ModelConfig, t: &Tensor) -> Result<()> {
        if !self.registry.is_empty() {
            self.through(id, cfg, t.clone())?;
        }
        Ok(())
    }

    /// [`Hooks::at`] for a place the trace does not record (the tensor is not a step of the
    /// catalogue, or is recorded elsewhere): only the hooks run.
    pub fn through(&mut self, id: &str, cfg: &ModelConfig, t: Tensor) -> Result<Tensor> {
        if self.registry.is_empty() {
            return Ok(t);
        }
        let full = self.rec.full_id(id).into_owned();
        let (layer, name) = split_id(&full);
        let params = self.layer.as_ref().filter(|(l, _)| Some(*l) == layer).map(|(_, p)| p);
        let site = Site { id: &full, layer, name, offset: self.offset, params };
        let mut t = t;
        for hook in self.registry.at(&full) {
            t = hook.at(&site, cfg, t)?;
        }
        Ok(t)
    }
}
