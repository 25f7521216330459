//! An encoder–decoder (T5, BART) is one stack run twice: the encoder over the source
//! sentence, then the decoder over its own tokens with the encoder's output as the memory
//! its cross-attention reads (`cross.rs`). Each is the ordinary forward pass of its own
//! configuration and parameters, its steps recorded under its stack's prefix
//! (`encoder.layers.0.attn.weights`, `decoder.layers.0.cross_attn.weights`,
//! `decoder.logits`).

use super::{forward::forward_pass, head::Unembed, pass::Pass};
use crate::config::{ModelConfig, Seq2Seq};
use crate::hook::Hooks;
use crate::params::{Input, Params};
use crate::trace::steps::Stack;
use anyhow::{Context, Result};
use candle_core::Tensor;

/// The encoder over `input`, then the decoder over `s.decoder_ids` (teacher forcing: every
/// position at once, causally masked); returns the decoder's last hidden state.
pub fn forward(cfg: &ModelConfig, params: &Params, input: &Input, hooks: &mut Hooks) -> Result<Tensor> {
    let (s, dec) = parts(cfg, params)?;
    let memory = encode(cfg, params, input, hooks)?; // [enc_pos, d_model]
    hooks.rec.to_decoder(s.decoder_tokens.clone(), s.decoder_texts.clone(), s.decoder_ids.clone());
    let ids = Input::Ids { ids: s.decoder_ids.clone(), type_ids: None };
    let head = Unembed::of(&s.decoder, dec);
    let mut pass = Pass { memory: Some(&memory), ..Default::default() };
    hooks.rec.set_stack(Stack::Decoder);
    let (out, _) = forward_pass(&s.decoder, dec, head.as_ref(), (&ids, &mut pass), hooks, false)?; // [pos, d_model]
    hooks.rec.set_stack(Stack::Only);
    Ok(out)
}

/// The encoder's output, `[enc_pos, d_model]` (after its final norm, if any), its steps
/// recorded as `encoder.…`.
pub fn encode(cfg: &ModelConfig, params: &Params, input: &Input, hooks: &mut Hooks) -> Result<Tensor> {
    hooks.rec.set_stack(Stack::Encoder);
    let (memory, _) = forward_pass(cfg, params, None, (input, &mut Pass::default()), hooks, false)?;
    hooks.rec.set_stack(Stack::Only);
    Ok(memory)
}

/// The decoder's configuration and parameters.
pub fn parts<'a>(cfg: &'a ModelConfig, params: &'a Params) -> Result<(&'a Seq2Seq, &'a Params)> {
    let s = cfg.parts.seq2seq.as_ref().context("internal: not an encoder–decoder")?;
    Ok((s, params.decoder.as_deref().context("internal: the decoder's parameters are missing")?))
}
