//! `--attribute ANSWER [FOIL]` and `--at POS|WORD` checked against the model and what its
//! tokenizer made of the answers (the run tokenizes them, as `--metric`'s, and hands the split
//! over: this stays pure). The result is the model's [`Request`].

use super::answer::{one_token, Tokenized};
use super::Settings;
use crate::config::ModelConfig;
use crate::error::{quote, usage};
use crate::trace::attribution::Request;
use anyhow::Result;

/// The answers as the model's tokenizer split them, without special tokens.
pub struct AnswerTexts {
    pub answer: Tokenized,
    pub foil: Option<Tokenized>,
}

/// The attribution `--attribute` asks for, or `None` without it. `texts` are the tokens'
/// decoded texts (for `--at WORD`); `split` is `None` without a model's tokenizer.
pub fn request(
    settings: &Settings,
    cfg: &ModelConfig,
    (tokens, texts): (&[String], Option<&[String]>),
    split: Option<AnswerTexts>,
) -> Result<Option<Request>> {
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
    let at =
        settings.analysis.at.as_deref().map(|w| super::views::resolve_for("--at", w, tokens, texts)).transpose()?;
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
    Ok(Some(Request { position, answer: a, foil: f }))
}

/// The last position that is not a pad (`--pad-to` on the right), else the last.
fn last_real(cfg: &ModelConfig, n: usize) -> usize {
    match &cfg.parts.padding {
        Some(p) => p.attention_mask.iter().rposition(|&m| m == 1).unwrap_or(n - 1),
        None => n - 1,
    }
}
