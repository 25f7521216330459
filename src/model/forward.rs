//! One stack's pass: embed (`embed.rs`) → the layers (`stack.rs`) → unembed (`unembed.rs`),
//! with the logit lens read out after each layer where asked. A decoder-only model's forward
//! pass is one of these; an encoder–decoder (`seq2seq.rs`) runs two.

use super::{attribute, embed, head, pass, relative, stack, unembed};
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
    attribute::readout::open(cfg, params, head, hooks)?;
    let x = embed::embed_at(cfg, params, input, pass.offset(), hooks)?; // [pos, d_model]
    pass.bias = relative::position_bias(cfg, params, (pass.offset(), x.dim(0)?), hooks)?; // [head, pos, key_pos]
    let x = stack::stack(cfg, &params.layers, (0, pass), x, hooks, |_, _, out, hooks| {
        if let (true, Some(head)) = (hooks.rec.lens(), head) {
            // The logit lens: this layer's residual stream read out as if it were the last.
            let normed = unembed::final_norm(cfg, params, out)?; // [pos, d_model]
            let logits = unembed::capped(cfg, head.logits(&normed)?)?; // [pos, vocab]
            let top = head::top_k(&logits, hooks.rec.top_k().max(1))?;
            hooks.rec.push_lens(top);
            if !hooks.rec.lens_track().is_empty() {
                // `--lens-track`: the chosen tokens' exact ranks, from the same logits.
                let ranks = head::ranks(&logits, &hooks.rec.lens_track())?; // [pos][tracked]
                hooks.rec.push_lens_ranks(ranks);
            }
        }
        Ok(())
    })?; // [pos, d_model]
    unembed::unembed_with_logits(cfg, params, head, x, hooks, logits)
}
