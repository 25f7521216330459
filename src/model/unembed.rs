//! The end of the forward pass: the final norm, the last hidden state (`output`), and the
//! logits of whichever head the model has, with the predictions they give. The logit lens
//! (`analysis/lens.rs`) and a patching sweep's metric read hidden states through the same two
//! functions.

use super::kernels::linear::linear;
use super::{ffn, head::Unembed, norm};
use crate::config::ModelConfig;
use crate::hook::Hooks;
use crate::params::Params;
use crate::trace::Recorder;
use anyhow::Result;
use candle_core::Tensor;

/// The final norm of `x` [pos, d_model], or `x` when the model has none.
pub fn final_norm(cfg: &ModelConfig, params: &Params, x: &Tensor) -> Result<Tensor> {
    match &params.final_norm {
        Some(p) => norm::norm(x, p, cfg),
        None => Ok(x.clone()),
    }
}

/// The logits of final-normed hidden states [pos, d_model]: BertForMaskedLM's head when the
/// checkpoint has one, else the language-model head, soft-capped where the model caps them
/// (Gemma 2); `None` for a model without either.
pub fn logits(cfg: &ModelConfig, params: &Params, head: Option<&Unembed>, x: &Tensor) -> Result<Option<Tensor>> {
    uncapped_logits(cfg, params, head, x)?.map(|l| capped(cfg, l)).transpose() // [pos, vocab]
}

/// The head's output before any soft-cap.
pub(crate) fn uncapped_logits(
    cfg: &ModelConfig,
    params: &Params,
    head: Option<&Unembed>,
    x: &Tensor,
) -> Result<Option<Tensor>> {
    if let Some(mlm) = &params.mlm {
        let h = linear(x, &mlm.dense)?; // [pos, d_model]
        let h = norm::layer_norm(&ffn::activation(cfg.activation, &h)?, &mlm.norm, cfg.eps)?; // [pos, d_model]
        return Ok(Some(linear(&h, &mlm.decoder)?)); // [pos, vocab]
    }
    let Some(head) = head else { return Ok(None) };
    Ok(Some(match cfg.parts.head_scale {
        // T5 with a tied head scales the final norm's output by d_model^−0.5 first.
        Some(s) => head.logits(&x.affine(s, 0.0)?)?, // [pos, vocab]
        None => head.logits(x)?,                     // [pos, vocab]
    }))
}

/// Logits as the model returns them: `cap · tanh(logits / cap)` where it caps them (Gemma 2).
pub fn capped(cfg: &ModelConfig, logits: Tensor) -> Result<Tensor> {
    match cfg.parts.final_softcap {
        Some(cap) => super::kernels::softcap::softcap(&logits, cap), // [pos, vocab]
        None => Ok(logits),
    }
}

/// Records `final_norm.out`, `output` (the last hidden state as Hugging Face defines it:
/// after the final norm if there is one), `logits` (with `logits_uncapped` before a
/// soft-cap) and the predictions; returns `output`.
/// A language-model head's logits are computed only when asked for (they are the largest
/// tensor of a trace); a masked-LM head's always, as before.
pub fn unembed(
    cfg: &ModelConfig,
    params: &Params,
    head: Option<&Unembed>,
    x: Tensor,
    hooks: &mut Hooks,
) -> Result<Tensor> {
    Ok(unembed_with_logits(cfg, params, head, x, hooks, false)?.0)
}

/// [`unembed`], returning the logits too (as the model returns them: after any soft-cap),
/// computed when `logits` is set (a generation chooses its next token from them) or when
/// they are recorded.
pub fn unembed_with_logits(
    cfg: &ModelConfig,
    params: &Params,
    head: Option<&Unembed>,
    x: Tensor,
    hooks: &mut Hooks,
    logits: bool,
) -> Result<(Tensor, Option<Tensor>)> {
    let x = final_norm(cfg, params, &x)?; // [pos, d_model]
    let x = match params.final_norm.is_some() {
        true => hooks.at("final_norm.out", cfg, x)?, // [pos, d_model]
        false => x,
    };
    let x = hooks.at("output", cfg, x)?;
    let wanted = logits || logits_wanted(params, hooks.rec);
    if wanted && !logits && predictions_only(params, hooks) {
        if let Some(top) = predictions(cfg, params, head, &x, hooks.rec.top_k())? {
            hooks.rec.set_predictions(top);
        }
        return Ok((x, None));
    }
    let raw = if wanted { uncapped_logits(cfg, params, head, &x)? } else { None }; // [pos, vocab]
    let mut returned = None;
    if let Some(raw) = &raw {
        hooks.observe("logits_uncapped", cfg, raw)?; // what --attribute's sum check reads
        let logits = match cfg.parts.final_softcap {
            Some(_) => {
                hooks.rec.tensor("logits_uncapped", cfg, raw)?; // [pos, vocab]
                capped(cfg, raw.clone())? // [pos, vocab]
            }
            None => raw.clone(),
        };
        let logits = hooks.at("logits", cfg, logits)?; // [pos, vocab]
        let k = hooks.rec.top_k();
        hooks.rec.set_predictions(super::head::top_k(&logits, k)?);
        returned = Some(logits);
    }
    Ok((x, returned))
}

/// Per position, the most probable next tokens as (id, probability).
type Top = Vec<Vec<(u32, f32)>>;

/// Whether a language model's logits are computed for its predictions alone: not recorded,
/// not returned, not read by a hook (`--attribute`'s sum check).
fn predictions_only(params: &Params, hooks: &Hooks) -> bool {
    params.mlm.is_none()
        && !hooks.rec.wants("logits")
        && !hooks.rec.wants("logits_uncapped")
        && !hooks.hooked("logits_uncapped")
}

/// The `k` most probable next tokens at each position (None without a head) of the final-normed `x` [pos,
/// d_model], from the logits of a few positions at a time (`ModelConfig::logit_rows`): a long
/// input's logits never exist whole (SmolLM2 at 8,192 tokens: 1.6 GB).
fn predictions(
    cfg: &ModelConfig,
    params: &Params,
    head: Option<&Unembed>,
    x: &Tensor,
    k: usize,
) -> Result<Option<Top>> {
    let n = x.dim(0)?;
    let rows = cfg.logit_rows();
    let mut top = Vec::with_capacity(n);
    for (first, len) in crate::config::tiles::even_tiles(n, rows) {
        let x = x.narrow(0, first, len)?; // [len, d_model]
        let Some(logits) = logits(cfg, params, head, &x)? else { return Ok(None) }; // [rows, vocab]
        top.extend(super::head::top_k(&logits, k)?);
    }
    Ok(Some(top))
}

/// Whether [`unembed`] computes logits: always for a masked-LM head, for a language-model
/// head only when the logits or the predictions are asked for.
pub fn logits_wanted(params: &Params, rec: &Recorder) -> bool {
    params.mlm.is_some() || rec.wants("logits") || rec.wants("logits_uncapped") || rec.top_k() > 0
}

/// How many times [`super::forward`] with `rec` applies the head: once for the final logits
/// when they are computed, and once per layer with the logit lens (`lens`, an analysis's hook
/// after each layer) (`config::Flops::with_heads`).
pub fn head_runs(cfg: &ModelConfig, params: &Params, rec: &Recorder, lens: bool) -> usize {
    let lm_head = Unembed::of(cfg, params).is_some();
    let last = usize::from(logits_wanted(params, rec) && (lm_head || params.mlm.is_some()));
    let lens = if lens && lm_head { cfg.layers } else { 0 };
    last + lens
}
