//! A run's interventions as hooks: what `config.interventions` lists (knockouts, ablated
//! heads and experts, steering vectors) made into the analyses of this wing, each registered
//! at its steps' ids. The trace's `config.interventions` is written back from them
//! ([`Interventions::describe`]), so what the JSON says is what the hooks did. An
//! encoder–decoder has one set per stack: the encoder's in the model's configuration, the
//! decoder's in its own.

use super::{
    ablate::{Heads, Steps},
    experts::Experts,
    knockout::Knockout,
    set::Set,
    steer::Steer,
};
use crate::config::{self, ModelConfig};
use crate::hook::Registry;
use crate::trace::steps::{stack_layer_id, Stack};
use std::collections::BTreeSet;

/// One stack's interventions as hooks.
struct Stacked {
    stack: Stack,
    /// The step that is a layer's output (where steering adds).
    output: &'static str,
    knockout: Knockout,
    ablate: Heads,
    cross: Heads,
    experts: Experts,
    steer: Steer,
    /// `--induction N` changes the input, not the pass: carried for the description only.
    induction: Option<usize>,
}

impl Stacked {
    fn of(stack: Stack, cfg: &ModelConfig) -> Stacked {
        let iv = &cfg.interventions;
        Stacked {
            stack,
            output: Steer::step(cfg),
            knockout: Knockout { edges: iv.knockout.clone() },
            ablate: Heads { heads: iv.ablate.clone(), mode: iv.ablate_mode },
            cross: Heads { heads: iv.ablate_cross.clone(), mode: iv.ablate_mode },
            experts: Experts { gone: iv.ablate_expert.clone() },
            steer: Steer { vectors: iv.steer.clone() },
            induction: iv.induction,
        }
    }

    fn register<'h>(&'h self, r: &mut Registry<'h>) {
        let layers = |pairs: &[(usize, usize)]| pairs.iter().map(|p| p.0).collect::<BTreeSet<_>>();
        let mut add = |ls: BTreeSet<usize>, step: &str, hook: &'h dyn crate::hook::Hook| {
            ls.into_iter().for_each(|l| r.add(stack_layer_id(self.stack, l, step), hook));
        };
        add(self.knockout.layers(), "attn.scores", &self.knockout);
        add(layers(&self.ablate.heads), "attn.context", &self.ablate);
        add(layers(&self.cross.heads), "cross_attn.context", &self.cross);
        add(layers(&self.experts.gone), "ffn.router.logits", &self.experts);
        add(self.steer.vectors.iter().map(|s| s.layer).collect(), self.output, &self.steer);
    }

    fn describe(&self) -> config::Interventions {
        config::Interventions {
            ablate: self.ablate.heads.clone(),
            ablate_cross: self.cross.heads.clone(),
            ablate_mode: self.ablate.mode,
            knockout: self.knockout.edges.clone(),
            ablate_expert: self.experts.gone.clone(),
            induction: self.induction,
            steer: self.steer.vectors.clone(),
            ..Default::default()
        }
    }
}

/// The interventions of a run, one set per stack, and the steps `--ablate STEP` ablates and
/// `--set` replaces (by their full ids, in either stack).
pub struct Interventions {
    stacks: Vec<Stacked>,
    steps: Steps,
    set: Vec<Set>,
}

impl Interventions {
    /// The interventions `cfg` (and an encoder–decoder's decoder's configuration) lists.
    pub fn of(cfg: &ModelConfig) -> Interventions {
        let stacks = match &cfg.parts.seq2seq {
            Some(s) => vec![Stacked::of(Stack::Encoder, cfg), Stacked::of(Stack::Decoder, &s.decoder)],
            None => vec![Stacked::of(Stack::Only, cfg)],
        };
        let set = cfg.interventions.set.iter().map(|s| Set { step: s.clone() }).collect();
        let iv = &cfg.interventions;
        let steps = Steps { steps: iv.ablate_steps.clone(), mode: iv.ablate_mode };
        Interventions { stacks, steps, set }
    }

    /// No intervention (`--steer-from`'s measuring pass, `--baseline`'s generation).
    pub fn none() -> Interventions {
        Interventions { stacks: Vec::new(), steps: Steps::default(), set: Vec::new() }
    }

    /// Registers the hooks in `r`, each at its steps, after those already there.
    pub fn register<'h>(&'h self, r: &mut Registry<'h>) {
        self.stacks.iter().for_each(|s| s.register(r));
        self.steps.steps.iter().for_each(|id| r.add(id.clone(), &self.steps));
        self.set.iter().for_each(|s| r.add(s.step.step.clone(), s));
    }

    /// Writes the interventions into `cfg` (its decoder's into the decoder's configuration):
    /// the `config.interventions` the trace records.
    pub fn describe(&self, cfg: &mut ModelConfig) {
        for s in &self.stacks {
            match (s.stack, cfg.parts.seq2seq.as_mut()) {
                (Stack::Decoder, Some(seq)) => seq.decoder.interventions = s.describe(),
                _ => cfg.interventions = s.describe(),
            }
        }
        cfg.interventions.ablate_steps = self.steps.steps.clone();
        cfg.interventions.set = self.set.iter().map(|s| s.step.clone()).collect();
    }

    /// The run's note when knockouts leave a query of `tokens` without any key.
    pub fn note(&self, cfg: &ModelConfig, tokens: &[String]) -> Option<String> {
        self.stacks.first()?.knockout.note(cfg, tokens)
    }
}
