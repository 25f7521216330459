//! An encoder–decoder's `--ablate` items name their stack (`enc.L.H`, `dec.L.H`,
//! `cross.L.H`): the encoder's go into the model's own interventions (its configuration is
//! the encoder's), the decoder's and the cross-attention's into the decoder's configuration.
//! A one-stack model takes `L.H` only.

use super::analysis::{Analysis, StackHeads};
use crate::config::{Interventions, ModelConfig};
use crate::error::usage;
use anyhow::Result;

/// The items of `stack`, as (layer, head).
fn of(a: &Analysis, stack: StackHeads) -> Vec<(usize, usize)> {
    a.ablate_stacked.iter().filter(|(s, _, _)| *s == stack).map(|&(_, l, h)| (l, h)).collect()
}

/// The heads the model's own configuration ablates: a one-stack model's `L.H`, an
/// encoder–decoder's `enc.L.H`.
pub fn ablated(a: &Analysis, cfg: &ModelConfig) -> Result<Vec<(usize, usize)>> {
    match (&cfg.parts.seq2seq, a.ablate_stacked.is_empty(), a.ablate.is_empty()) {
        (None, false, _) => Err(usage(
            "--ablate",
            "enc., dec. and cross. name a stack of an encoder–decoder (T5, BART), and this model has one",
            "write --ablate L.H",
        )),
        (Some(_), _, false) => Err(usage(
            "--ablate",
            "an encoder–decoder has three attentions, and L.H names none of them",
            "write enc.L.H (the encoder's), dec.L.H (the decoder's) or cross.L.H (the cross-attention)",
        )),
        (Some(_), _, true) => Ok(of(a, StackHeads::Encoder)),
        (None, true, _) => Ok(a.ablate.clone()),
    }
}

/// Puts an encoder–decoder's `dec.L.H` and `cross.L.H` into its decoder's configuration,
/// each checked against the decoder's layers and heads.
pub fn apply_decoder(a: &Analysis, cfg: &mut ModelConfig) -> Result<()> {
    let Some(s) = cfg.parts.seq2seq.as_mut() else { return Ok(()) };
    let (own, cross) = (of(a, StackHeads::Decoder), of(a, StackHeads::Cross));
    let d = &mut s.decoder;
    for &(l, h) in own.iter().chain(&cross) {
        if l >= d.layers || h >= d.heads {
            let why =
                format!("the decoder has layers 0 to {} and heads 0 to {}, not {l}.{h}", d.layers - 1, d.heads - 1);
            return Err(usage("--ablate", why, "pick a layer and head in range"));
        }
    }
    let mode = (!own.is_empty() || !cross.is_empty()).then_some(a.ablate_mode);
    d.interventions = Interventions { ablate: own, ablate_cross: cross, ablate_mode: mode, ..Default::default() };
    Ok(())
}
