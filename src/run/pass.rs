//! Every call into the model's passes, and nothing else: the forward pass, a generation,
//! `--steer-from`'s measuring pass and `compare`'s two passes in lockstep, each given a
//! [`Recorder`] and the run's [`Registry`] (its knobs and hooks), put together here into the
//! pass's hook port (with `patch.rs`'s sweep, the only calls into `model` that run a pass),
//! so that what the model is handed changes here alone. Also the recorder every run starts
//! from.

use crate::analysis::interventions::Interventions;
use crate::config::{Generate, ModelConfig};
use crate::hook::{Hooks, Registry};
use crate::model::{self, generate::Generated, lockstep::Part};
use crate::params::{Input, Params};
use crate::settings::Settings;
use crate::sources::{self, Loaded};
use crate::trace::{Recorder, Selection};
use anyhow::Result;
use candle_core::Tensor;

/// A recorder for `loaded`'s run that keeps what `selection` wants and asks a language model
/// for its `top_k` next-token predictions.
pub(crate) fn recorder(loaded: &Loaded, selection: Selection, settings: &Settings) -> Recorder {
    let mut rec = Recorder::new(loaded.tokens.clone(), loaded.cfg.clone(), selection).with_top_k(settings.output.top_k);
    let (ids, type_ids) = match &loaded.input {
        Input::Ids { ids, type_ids } => (Some(ids.clone()), type_ids.clone()),
        Input::Matrix(_) => (None, None),
    };
    rec.set_input(loaded.sentence.clone(), ids, type_ids);
    rec.set_texts(loaded.texts());
    rec.set_chat(loaded.chat.clone());
    rec
}

/// The hooks of `loaded`'s run: its knobs ([`crate::config::RunConfig`]) and `iv`'s
/// interventions (`Interventions::of(&loaded.cfg)`, or none).
pub(crate) fn hooks<'h>(loaded: &Loaded, iv: &'h Interventions) -> Registry<'h> {
    let mut r = Registry::running(loaded.run.clone());
    iv.register(&mut r);
    r
}

/// One forward pass of `cfg` over `input` into `rec`, with `hooks`; returns the last hidden
/// state.
pub(super) fn forward(
    cfg: &ModelConfig,
    params: &Params,
    input: &Input,
    (rec, hooks): (&mut Recorder, &Registry),
) -> Result<Tensor> {
    model::forward(cfg, params, input, &mut Hooks::with(rec, hooks.clone()))
}

/// The floating-point operations of the forward pass `rec` is about to record, for
/// `--timings`: every position against every key (`config::flops`), the head as many times as
/// the pass applies it (once more per layer with `lens`).
pub(super) fn forward_flops(loaded: &Loaded, params: &Params, rec: &Recorder, lens: bool) -> u64 {
    let (cfg, n) = (&loaded.cfg, loaded.tokens.len());
    crate::config::forward_flops(cfg, n, n).with_heads(model::unembed::head_runs(cfg, params, rec, lens))
}

/// The analyses that read the run's pass (`--attribute`, `--lens`), as the settings ask.
pub(super) fn reading<'p>(
    settings: &Settings,
    (loaded, params, attribution): (&Loaded, &'p Params, Option<crate::trace::attribute::Request>),
) -> Result<crate::analysis::Reading<'p>> {
    let lens = settings.analysis.lens.then(|| crate::analysis::LensAsk {
        k: settings.output.top_k,
        track: sources::tracked::lens_track(settings, loaded).unwrap_or_default(),
    });
    crate::analysis::Reading::new(&loaded.cfg, params, loaded.tokens.len(), (attribution, lens))
}

/// A generation (`model::generate`): the prompt's pass into `rec`, each decode step into the
/// recorder `step_rec` makes.
pub(super) fn generation(
    cfg: &ModelConfig,
    params: &Params,
    (input, how): (&Input, &Generate),
    (rec, step_rec, hooks): (&mut Recorder, &mut dyn FnMut(usize, u32) -> Recorder, &Registry),
    watch: &[u32],
) -> Result<Generated> {
    let mut hooks = Hooks::with(rec, hooks.clone());
    model::generate::generate(cfg, params, (input, how), (&mut hooks, step_rec), watch)
}

/// `--steer-from`'s measuring pass: the residual stream after `layer`.
pub(super) fn resid_after(cfg: &ModelConfig, params: &Params, input: &Input, layer: usize) -> Result<Vec<f32>> {
    model::steer::resid_after(cfg, params, input, layer)
}

/// `compare`'s two passes in lockstep (`model::lockstep`), `between` called after each part.
pub(crate) fn lockstep(
    runs: [model::lockstep::Side<'_>; 2],
    [(rec_a, hooks_a), (rec_b, hooks_b)]: [(&mut Recorder, &Registry); 2],
    between: impl FnMut(Part, [&Tensor; 2]) -> Result<()>,
) -> Result<[Tensor; 2]> {
    let (mut a, mut b) = (Hooks::with(rec_a, hooks_a.clone()), Hooks::with(rec_b, hooks_b.clone()));
    model::lockstep::lockstep(runs, [&mut a, &mut b], between)
}
