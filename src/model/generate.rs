//! Generation traced token by token (`--generate N`), through a key/value cache as an engine
//! computes it: step 0 is the prompt's forward pass, which fills the cache; its last
//! position's logits choose generated token 1. Decode step t runs the model on generated
//! token t alone, at position n + t − 1 (n the prompt's length), its queries reading every
//! cached key and value and its own appended to them; its logits choose token t + 1. N new
//! tokens take N − 1 decode steps (the last token chosen is never run), as transformers'
//! `generate` returns N attention tuples. docs/TRACE.md, "Generation".

use super::head::{self, Unembed};
use super::pass::{KvCache, Pass};
use super::sample::Sampler;
use crate::config::{Generate, ModelConfig};
use crate::hook::Hooks;
use crate::params::{Input, Params};
use crate::trace::{steps::Stack, Recorder, Trace};
use anyhow::{Context, Result};
use candle_core::Tensor;

/// One generated token as the step that chose it saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Chosen {
    pub id: u32,
    /// softmax(logits) at `id`, before any temperature, top-k or top-p.
    pub prob: f32,
    /// The step's most probable tokens (the recorder's top-k), most probable first.
    pub candidates: Vec<(u32, f32)>,
    /// The probability this step gave the token a comparison run chose here, if any.
    pub watched: Option<f32>,
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// It chose as many tokens as it was asked for.
    Length,
    /// It chose an end-of-sequence token (kept as the last token).
    Eos,
    /// The next decode step would stand past the model's last position.
    Positions,
}

/// A generation: the tokens it chose, why it stopped, and each decode step's trace.
pub struct Generated {
    pub chosen: Vec<Chosen>,
    pub stop: Stop,
    /// Decode step t's trace at index t − 1, with the usual step ids (`layers.0.attn.q`).
    pub steps: Vec<Trace>,
    /// The prompt's last hidden state, `[pos, d_model]` (what `forward` returns).
    pub output: Tensor,
}

/// Generates from `input` as `how` says, recording the prompt's pass into `rec` and decode
/// step t's into `step_rec(t, token)`'s recorder; `watch[i]`, where given, is a token whose
/// probability the step choosing token i + 1 reports (`--baseline`'s comparison).
/// An encoder–decoder (`seq2seq.rs`) runs its encoder once, into `rec`, and generates with its
/// decoder from the decoder's input (its start token, and `--target`'s tokens as a prefix),
/// every pass's cross-attention reading the encoder's output.
pub fn generate(
    cfg: &ModelConfig,
    params: &Params,
    (input, how): (&Input, &Generate),
    (hooks, step_rec): (&mut Hooks, &mut dyn FnMut(usize, u32) -> Recorder),
    watch: &[u32],
) -> Result<Generated> {
    if cfg.parts.seq2seq.is_none() {
        return decode(cfg, params, (input, how), (hooks, step_rec), (watch, None));
    }
    let (s, dec) = super::seq2seq::parts(cfg, params)?;
    let memory = super::seq2seq::encode(cfg, params, input, hooks)?; // [enc_pos, d_model]
    hooks.rec.to_decoder(s.decoder_tokens.clone(), s.decoder_texts.clone(), s.decoder_ids.clone());
    hooks.rec.set_stack(Stack::Decoder);
    let ids = Input::Ids { ids: s.decoder_ids.clone(), type_ids: None };
    let mut step_rec = |t: usize, id: u32| {
        let mut r = step_rec(t, id);
        r.set_stack(Stack::Decoder);
        r
    };
    let done = decode(&s.decoder, dec, (&ids, how), (hooks, &mut step_rec), (watch, Some(&memory)));
    hooks.rec.set_stack(Stack::Only);
    done
}

/// [`generate`] with one stack; `memory` is an encoder–decoder's encoder output.
fn decode(
    cfg: &ModelConfig,
    params: &Params,
    (input, how): (&Input, &Generate),
    (hooks, step_rec): (&mut Hooks, &mut dyn FnMut(usize, u32) -> Recorder),
    (watch, memory): (&[u32], Option<&Tensor>),
) -> Result<Generated> {
    let head = Unembed::of(cfg, params).map(Unembed::dense).transpose()?;
    let head = head.as_ref();
    let mut cache = KvCache::new(params.layers.len());
    let mut sampler = Sampler::new(how.strategy);
    let k = hooks.rec.top_k();
    let mut pass = Pass { memory, ..Pass::cached(&mut cache) };
    let (output, logits) = super::forward::forward_pass(cfg, params, head, (input, &mut pass), hooks, true)?;
    let n = output.dim(0)?;
    cache.advance(n);
    let logits = logits.context("internal: a generation needs the model's logits")?; // [pos, vocab]
    let mut chosen = vec![choose(&logits.narrow(0, n - 1, 1)?, &mut sampler, k, watch.first())?];
    let (mut steps, mut stop) = (Vec::new(), Stop::Length);
    let mut step_cfg = cfg.clone();
    for t in 1..how.max_new {
        let last = chosen[t - 1].id;
        if how.stop_ids.contains(&last) {
            stop = Stop::Eos;
            break;
        }
        let position = n + t - 1;
        if position >= cfg.max_len {
            stop = Stop::Positions;
            break;
        }
        // LongRoPE's factors follow the length so far, as transformers picks them per step.
        if let Some(rope) = step_cfg.parts.rope.as_mut() {
            rope.fit_length(position + 1);
        }
        let mut rec_t = step_rec(t, last);
        let one = Input::Ids { ids: vec![last], type_ids: None };
        let mut pass = Pass { memory, ..Pass::cached(&mut cache) };
        let mut hooks_t = hooks.to(&mut rec_t);
        let (_, logits) = super::forward::forward_pass(&step_cfg, params, head, (&one, &mut pass), &mut hooks_t, true)?;
        drop(hooks_t);
        cache.advance(1);
        let logits = logits.context("internal: a decode step needs the model's logits")?; // [1, vocab]
        chosen.push(choose(&logits, &mut sampler, k, watch.get(t))?);
        steps.push(rec_t.finish().0);
    }
    if stop == Stop::Length && chosen.last().is_some_and(|c| how.stop_ids.contains(&c.id)) {
        stop = Stop::Eos;
    }
    Ok(Generated { chosen, stop, steps, output })
}

/// The next token from one position's logits `[1, vocab]`, with its probability, the `k`
/// most probable tokens and the probability of `watch`.
fn choose(logits: &Tensor, sampler: &mut Sampler, k: usize, watch: Option<&u32>) -> Result<Chosen> {
    let row = logits.flatten_all()?.to_vec1::<f32>()?; // [vocab]
    let id = sampler.choose(&row);
    let probs = super::kernels::softmax::softmax_last_dim(logits)?.flatten_all()?.to_vec1::<f32>()?; // [vocab]
    let candidates = head::top_k(logits, k)?.pop().unwrap_or_default();
    let at = |i: u32| probs.get(i as usize).copied().unwrap_or(0.0);
    Ok(Chosen { id, prob: at(id), candidates, watched: watch.map(|&w| at(w)) })
}
