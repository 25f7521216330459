//! `--generate`: the pipeline's forward pass replaced by a generation (`model::generate`),
//! its decode steps recorded as the prompt's pass is (the plan's selection, the recorder's
//! top-k), their steps renamed `gen.{t}.…`, and its tokens named by the model's tokenizer.
//! With `--baseline` the same generation runs first without the interventions, quietly, and
//! the intervened one reports the probability it gave each of the baseline's tokens.

use super::pass;
use crate::analysis::interventions::Interventions;
use crate::config::{Generate, ModelConfig};
use crate::error::usage;
use crate::model::generate::{Chosen, Generated, Stop};
use crate::params::{Input, Params};
use crate::settings::{self, plan::Plan, Settings};
use crate::sources::namer::Namer;
use crate::sources::Loaded;
use crate::trace::generate::{prefix, Baseline, DecodeStep, GenToken, Generation};
use crate::trace::{Recorder, Selection};
use anyhow::{Context, Result};

/// Generates from the loaded prompt, recording its pass into `rec`; returns the prompt's
/// last hidden state and the generation's record.
pub(crate) fn run(
    settings: &Settings,
    (loaded, params, plan): (&Loaded, &Params, &Plan),
    (rec, hooks): (&mut Recorder, &crate::hook::Registry),
    asked: &settings::generate::Generation,
) -> Result<(candle_core::Tensor, Generation)> {
    check_model(loaded, params)?;
    let how = Generate {
        max_new: asked.max_new,
        stop_ids: if asked.ignore_eos { Vec::new() } else { loaded.stop_ids.clone() },
        strategy: asked.strategy,
    };
    let name = Namer::new(loaded, crate::sources::naming::own_vocab(settings));
    let baseline = match asked.baseline {
        true => Some(quiet_baseline(loaded, params, &how)?),
        false => None,
    };
    let watch: Vec<u32> = baseline.iter().flat_map(|b| b.chosen.iter().map(|c| c.id)).collect();
    let cfg = &loaded.cfg;
    let made;
    // Each decode step runs every layer: read and convert them once, not once per token, when
    // the whole model fits --max-memory (else a 7 B model still generates in 3 GiB, slowly).
    let n = positions(settings, loaded)?;
    let params = match settings::limits::whole_model_fits(
        (&loaded.cfg, &loaded.run),
        n,
        (&plan.record, plan.streamed),
        settings,
    )
    .is_some()
    {
        true => {
            made = params.made()?;
            &made
        }
        false => params,
    };
    let mut step_rec = |_t: usize, id: u32| {
        let (token, text) = name.name(id);
        let mut r = Recorder::new(vec![token.unwrap_or_else(|| format!("#{id}"))], cfg.clone(), plan.record.clone())
            // The lens reads the prompt's layers; per decode step it would cost a head per layer.
            .with_top_k(settings.output.top_k);
        r.set_input(None, Some(vec![id]), None);
        r.set_texts(text.map(|t| vec![t]));
        r
    };
    let done = pass::generation(cfg, params, (&loaded.input, &how), (rec, &mut step_rec, hooks), &watch)
        .context("generating")?;
    let n = prompt_len(loaded);
    let record = assemble(&done, (n, &how), &name);
    let baseline = baseline.map(|b| compare(&b, &done, &name));
    Ok((done.output, Generation { baseline, ..record }))
}

/// The positions of the prompt a generation continues: an encoder–decoder's decoder input
/// (its start token, and `--target`'s tokens), else the tokens.
fn prompt_len(loaded: &Loaded) -> usize {
    loaded.cfg.parts.seq2seq.as_ref().map_or(loaded.tokens.len(), |s| s.decoder_ids.len())
}

/// The positions of the stack that generates: an encoder–decoder's decoder's, else the model's.
fn max_len(loaded: &Loaded) -> usize {
    loaded.cfg.parts.seq2seq.as_ref().map_or(loaded.cfg.max_len, |s| s.decoder.max_len)
}

/// The positions the memory estimate sizes for `settings`' run: the tokens, and as many new
/// ones as the generation can write (`settings::generate::new_tokens`, which refuses more
/// than the context window holds).
pub(crate) fn positions(settings: &Settings, loaded: &Loaded) -> Result<usize> {
    let Some(asked) = &settings.generate else { return Ok(loaded.tokens.len()) };
    let new = settings::generate::new_tokens(asked, prompt_len(loaded), max_len(loaded))?;
    Ok(loaded.tokens.len() + new)
}

/// The notes a finished generation gives: that it stopped at the model's last position, or
/// that a real model's generation ran to its count because the model names no
/// end-of-sequence token it can write (none, or none in its vocabulary: a toy model has none).
pub(crate) fn notes(loaded: &Loaded, asked: Option<&settings::generate::Generation>, g: &Generation) -> Vec<String> {
    let mut notes = Vec::new();
    let vocab = loaded.cfg.vocab_size;
    let writable = loaded.stop_ids.iter().any(|&id| (id as usize) < vocab);
    let real = loaded.tokenizer.is_some();
    if g.stop == "length" && real && !writable && asked.is_some_and(|a| !a.ignore_eos) {
        let eos = match loaded.stop_ids.as_slice() {
            [] => "none".to_string(),
            ids => format!("{ids:?}, outside its {vocab} tokens"),
        };
        notes.push(format!(
            "--generate ran to its {} tokens: the model names no end-of-sequence token it can write (eos_token_id: \
             {eos})",
            g.tokens.len()
        ));
    }
    if g.stop == "positions" {
        let n = g.tokens.len();
        notes.push(format!(
            "--generate stopped after {n} token{}: the next would stand past the model's last position ({})",
            if n == 1 { "" } else { "s" },
            max_len(loaded)
        ));
    }
    notes
}

/// Refuses a model that cannot generate: one without a language-model head (an encoder, or
/// BERT's masked-LM head, which fills in a `[MASK]` rather than continuing), or an input
/// matrix instead of token ids.
fn check_model(loaded: &Loaded, params: &Params) -> Result<()> {
    let lm = (loaded.cfg.causal && loaded.cfg.parts.lm_head.is_some() && params.mlm.is_none())
        || loaded.cfg.parts.seq2seq.is_some();
    if !lm {
        return Err(usage(
            "--generate",
            "the model is not a language model: an encoder sees every token at once and has no next token to write",
            "use a decoder (--model with a GPT-2, Llama, … folder or GGUF file, or a toy --causal --lm-head); for \
             BERT, put [MASK] in the sentence to see its predictions",
        ));
    }
    if !matches!(loaded.input, Input::Ids { .. }) {
        return Err(usage("--generate", "the input is a matrix, not tokens", "pass a sentence instead of --input"));
    }
    Ok(())
}

/// The generation without the interventions, recording nothing.
fn quiet_baseline(loaded: &Loaded, params: &Params, how: &Generate) -> Result<Generated> {
    let cfg = ModelConfig { interventions: Default::default(), ..loaded.cfg.clone() };
    let nothing = Selection { steps: Some(Default::default()), ..Default::default() };
    let mut rec = Recorder::new(loaded.tokens.clone(), cfg.clone(), nothing.clone());
    let mut step_rec = |_: usize, _: u32| Recorder::new(vec![String::new()], cfg.clone(), nothing.clone());
    pass::generation(
        &cfg,
        params,
        (&loaded.input, how),
        (&mut rec, &mut step_rec, &pass::hooks(loaded, &Interventions::none())),
        &[],
    )
    .context("generating the baseline without the interventions")
}

/// The record of a generation: its tokens named, its decode steps' steps renamed.
fn assemble(done: &Generated, (n, how): (usize, &Generate), name: &Namer) -> Generation {
    let tokens = done
        .chosen
        .iter()
        .enumerate()
        .map(|(i, c)| GenToken {
            position: n + i,
            chosen: name.prediction(c.id, c.prob),
            candidates: c.candidates.iter().map(|&(id, p)| name.prediction(id, p)).collect(),
        })
        .collect();
    let steps = done
        .steps
        .iter()
        .enumerate()
        .map(|(i, trace)| {
            let t = i + 1;
            // Every recorded step: the views read the weights, and `views::derive` keeps the
            // shown ones, as it does the prompt's.
            let steps =
                trace.steps.iter().map(|s| crate::trace::Step { id: format!("{}{}", prefix(t), s.id), ..s.clone() });
            DecodeStep { step: t, position: n + t - 1, steps: steps.collect() }
        })
        .collect();
    Generation {
        prompt_tokens: n,
        stop: match done.stop {
            Stop::Length => "length",
            Stop::Eos => "eos",
            Stop::Positions => "positions",
        },
        strategy: how.strategy,
        text: name.decode(&ids(&done.chosen)),
        tokens,
        steps,
        baseline: None,
    }
}

/// The baseline's record: its text and tokens, the first index where it and the intervened
/// generation differ, and the probability the intervened run gave the baseline's token there.
fn compare(base: &Generated, done: &Generated, name: &Namer) -> Baseline {
    let parted_at = base.chosen.iter().zip(&done.chosen).position(|(a, b)| a.id != b.id);
    Baseline {
        text: name.decode(&ids(&base.chosen)),
        tokens: base.chosen.iter().map(|c| name.prediction(c.id, c.prob)).collect(),
        parted_at,
        prob_there: parted_at.and_then(|i| done.chosen[i].watched),
    }
}

fn ids(chosen: &[Chosen]) -> Vec<u32> {
    chosen.iter().map(|c| c.id).collect()
}

/// The floating-point operations of a generation, for `--timings`: the prompt's pass with the
/// head over every position, then each decode step's one position against every key so far
/// with the head once.
pub(crate) fn flops(loaded: &Loaded, g: &Generation) -> u64 {
    let n = loaded.tokens.len();
    let prompt = crate::config::forward_flops(&loaded.cfg, n, n).with_heads(1);
    let steps = (1..=g.steps.len()).map(|t| crate::config::forward_flops(&loaded.cfg, 1, n + t).with_heads(1));
    prompt + steps.sum::<u64>()
}
