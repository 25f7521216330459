//! The encoder's forward pass, recorded step by step into a [`Trace`].
//!
//! Each function reads top to bottom as a column of named `let`s, one per traced step, with
//! the tensor's shape in a comment. Model code records; it never prints.

pub mod attention;
pub mod embed;
pub mod ffn;
pub mod head;
pub mod intervene;
pub mod layer;
pub mod norm;
pub mod patch;
pub mod rope;

use crate::config::ModelConfig;
use crate::sources::params::{Linear, Params};
use crate::sources::Input;
use crate::trace::Recorder;
use anyhow::Result;
use candle_core::Tensor;

/// Runs the whole encoder, recording every step into `trace`; returns the final output.
pub fn forward(cfg: &ModelConfig, params: &Params, input: &Input, rec: &mut Recorder) -> Result<Tensor> {
    // A tied head reuses the token table (the toy model keeps no second copy).
    let tied = match (&params.lm_head, &cfg.parts.lm_head, &params.token) {
        (None, Some(h), Some(token)) if h.tied => Some(Linear { weight: token.clone(), bias: None }),
        _ => None,
    };
    let head = params.lm_head.as_ref().or(tied.as_ref());
    let mut x = embed::embed(cfg, params, input, rec)?; // [pos, d_model]

    // A lazily read checkpoint's next layer is read while this one runs.
    params.layers.each(|i, layer_params| {
        x = layer::layer(cfg, layer_params, &x, i, rec)?; // [pos, d_model]
        x = intervene::patch_resid(cfg, i, x.clone())?; // [pos, d_model]
        if let (true, Some(head)) = (rec.lens(), head) {
            // The logit lens: this layer's residual stream read out as if it were the last.
            let normed = match &params.final_norm {
                Some(p) => norm::norm(&x, p, cfg)?,
                None => x.clone(),
            }; // [pos, d_model]
            let top = head::top_k(&linear(&normed, head)?, rec.top_k().max(1))?;
            rec.push_lens(top);
        }
        Ok(())
    })?;
    if let Some(p) = &params.final_norm {
        x = norm::norm(&x, p, cfg)?; // [pos, d_model]
        rec.tensor("final_norm.out", cfg, &x)?;
    }
    // The last hidden state as Hugging Face defines it: after the final norm if there is one.
    rec.tensor("output", cfg, &x)?;
    if let Some(mlm) = &params.mlm {
        // BertForMaskedLM's head on the last hidden state.
        let h = linear(&x, &mlm.dense)?; // [pos, d_model]
        let h = norm::layer_norm(&ffn::activation(cfg.activation, &h)?, &mlm.norm, cfg.eps)?; // [pos, d_model]
        let logits = linear(&h, &mlm.decoder)?; // [pos, vocab]
        rec.tensor("logits", cfg, &logits)?;
        let k = rec.top_k();
        rec.set_predictions(head::top_k(&logits, k)?);
    }
    if let Some(head) = head {
        if rec.wants("logits") || rec.top_k() > 0 {
            let logits = linear(&x, head)?; // [pos, vocab]
            rec.tensor("logits", cfg, &logits)?;
            let k = rec.top_k();
            rec.set_predictions(head::top_k(&logits, k)?);
        }
    }
    Ok(x)
}

/// `x·Wᵀ + b` for `x` of shape [pos, in], PyTorch's `nn.Linear`.
pub fn linear(x: &Tensor, lin: &Linear) -> Result<Tensor> {
    let y = x.matmul(&lin.weight.t()?)?;
    Ok(match &lin.bias {
        Some(b) => y.broadcast_add(b)?,
        None => y,
    })
}
