//! `--attribute [ANSWER [FOIL]]` and `--at POS|WORD|last|gen:K` checked against the model and
//! what its tokenizer made of the answers (the run tokenizes them, as `--metric`'s, and hands
//! the split over: this stays pure). The result is an [`Asked`]: the model's [`Request`] when
//! the position and the answer are known before the run, else what the run must find out
//! (`run/explain.rs`: the generated tokens, the model's own choice and its runner-up).

use super::answer::{one_token, Tokenized};
use super::Settings;
use crate::config::ModelConfig;
use crate::error::{quote, usage};
use crate::trace::attribute::Request;
use anyhow::Result;

/// The answers as the model's tokenizer split them, without special tokens.
pub struct AnswerTexts {
    pub answer: Tokenized,
    pub foil: Option<Tokenized>,
}

/// Where `--at` points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// A position of the input.
    Position(usize),
    /// `gen:K`: where the K-th generated token (from 0) was chosen.
    Generated(usize),
    /// `last` with `--generate`: where the last generated token was chosen.
    LastGenerated,
}

/// What `--attribute` asks, checked: where, and the answer and foil when they were named
/// (`None`: the token the model chose there, against its runner-up).
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub at: At,
    pub answer: Option<u32>,
    pub foil: Option<u32>,
}

impl Asked {
    /// The model's request, when the position and the answer are known before the run.
    pub fn now(&self) -> Option<Request> {
        match (self.at, self.answer) {
            (At::Position(position), Some(answer)) => Some(Request { position, answer, foil: self.foil }),
            _ => None,
        }
    }
}

/// `--at gen:K` and `--at last` with `--generate`; `None` for a position or a word.
fn generated_at(settings: &Settings, at: &str) -> Result<Option<At>> {
    let flag = format!("--at {}", quote(at));
    let max_new = settings.generate.as_ref().map(|g| g.max_new);
    if at == "last" {
        return Ok(max_new.map(|_| At::LastGenerated));
    }
    let Some(k) = at.strip_prefix("gen:") else { return Ok(None) };
    let k: usize =
        k.trim().parse().map_err(|_| usage(&flag, "K is not a number", "write gen:0 for the first generated token"))?;
    match max_new {
        None => Err(usage(&flag, "it names a generated token, and nothing is generated", "add --generate N")),
        Some(n) if k >= n => Err(usage(
            &flag,
            format!("--generate {n} writes at most {n} tokens, numbered from 0"),
            format!("pass gen:0 to gen:{}, or generate more", n.saturating_sub(1)),
        )),
        Some(_) => Ok(Some(At::Generated(k))),
    }
}

/// The attribution `--attribute` asks for, or `None` without it. `texts` are the tokens'
/// decoded texts (for `--at WORD`); `split` is `None` without a model's tokenizer.
pub fn request(
    settings: &Settings,
    cfg: &ModelConfig,
    (tokens, texts): (&[String], Option<&[String]>),
    split: Option<AnswerTexts>,
) -> Result<Option<Asked>> {
    let Some((answer, foil)) = &settings.analysis.attribute else { return Ok(None) };
    let flag = "--attribute";
    if cfg.parts.attention_only || cfg.parts.no_out_proj {
        let why = "an attention module traced alone has no residual stream or head to attribute";
        return Err(usage(flag, why, "trace a language model with --model"));
    }
    if !cfg.parts.arithmetic.is_f32() {
        let why = "llama.cpp's arithmetic quantizes each product's input, so the logit is not the sum of its parts";
        return Err(usage(flag, why, "drop --arithmetic ggml: the f32 arithmetic decomposes exactly"));
    }
    let later = settings.analysis.at.as_deref().map(|w| generated_at(settings, w)).transpose()?.flatten();
    let at = match (later, settings.analysis.at.as_deref()) {
        (None, Some("last")) => Some(last_real(cfg, tokens.len())),
        (None, Some(w)) => Some(super::views::resolve_for("--at", w, tokens, texts)?),
        _ => None,
    };
    let mask = tokens.iter().position(|t| t == "[MASK]");
    let position = match (cfg.parts.lm_head.is_some(), cfg.parts.masked_lm, at, mask) {
        (true, _, Some(p), _) | (false, true, Some(p), _) | (false, true, None, Some(p)) => p,
        (true, _, None, _) => last_real(cfg, tokens.len()),
        (false, true, None, None) => {
            return Err(usage(
                flag,
                "a masked LM's answer fills a [MASK], and the sentence has none",
                "put [MASK] in the sentence, or pass --at POS",
            ))
        }
        (false, false, _, _) => {
            return Err(usage(
                flag,
                "it splits a head's logit, and this encoder has no language-model or masked-LM head",
                "use a decoder, or a BertForMaskedLM checkpoint",
            ))
        }
    };
    let at = later.unwrap_or(At::Position(position));
    let Some(answer) = answer else { return Ok(Some(Asked { at, answer: None, foil: None })) };
    let split = split.ok_or_else(|| usage(flag, "it reads its answers with a model's tokenizer", "use --model"))?;
    let example = "pass answers that are one token each, e.g. --attribute \" Paris\" \" London\"";
    let a = one_token(flag, answer, &split.answer, example)?;
    let f = match (foil, &split.foil) {
        (Some(word), Some(s)) => Some(one_token(flag, word, s, example)?),
        _ => None,
    };
    if f == Some(a) {
        let why = format!(
            "the foil {} is the answer's token ({a}), so the difference is 0",
            quote(foil.as_deref().unwrap_or(""))
        );
        return Err(usage(flag, why, "pass another foil, or the answer alone for its own logit"));
    }
    Ok(Some(Asked { at, answer: Some(a), foil: f }))
}

/// The last position that is not a pad (`--pad-to` on the right), else the last.
fn last_real(cfg: &ModelConfig, n: usize) -> usize {
    match &cfg.parts.padding {
        Some(p) => p.attention_mask.iter().rposition(|&m| m == 1).unwrap_or(n - 1),
        None => n - 1,
    }
}
