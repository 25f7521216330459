//! One stack's pass: embed (`embed.rs`) → the layers (`stack.rs`) → unembed (`unembed.rs`).
//! A decoder-only model's forward pass is one of these; an encoder–decoder (`seq2seq.rs`)
//! runs two.

use super::{embed, head, pass, relative, stack, unembed};
use crate::config::ModelConfig;
use crate::hook::Hooks;
use crate::params::{Input, Params};
use anyhow::Result;
use candle_core::Tensor;

/// [`super::forward`] with `head` (the model's, possibly made dense once for many passes) and
/// `pass` (a generation's cache: `input`'s tokens stand at the positions after the cached
/// ones); returns the last hidden state and, when `logits` is set or the recorder wants
/// them, the logits.
pub fn forward_pass(
    cfg: &ModelConfig,
    params: &Params,
    head: Option<&head::Unembed>,
    (input, pass): (&Input, &mut pass::Pass),
    hooks: &mut Hooks,
    logits: bool,
) -> Result<(Tensor, Option<Tensor>)> {
    hooks.start_pass(pass.offset());
    let x = embed::embed_at(cfg, params, input, pass.offset(), hooks)?; // [pos, d_model]
    pass.bias = relative::position_bias(cfg, params, (pass.offset(), x.dim(0)?), hooks)?; // [head, pos, key_pos]
    let x = stack::stack(cfg, &params.layers, (0, pass), x, hooks, |_, _, _, _| Ok(()))?; // [pos, d_model]
    unembed::unembed_with_logits(cfg, params, head, x, hooks, logits)
}
