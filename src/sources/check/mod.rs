//! `--check`: recomputes a real model with an independent implementation and compares it
//! with attn-trace's trace. The reference is candle-transformers' own model code, loaded by
//! its own loaders from the same files (its serde `Config` from config.json, its
//! `VarBuilder` over the safetensors or `.bin`, its GGUF reader): agreement says both read
//! the checkpoint and do the arithmetic alike. Where candle-transformers has no model for
//! the family (a toy model, GPT-2, GPT-NeoX, BART, a Gemma 2 or GPT-NeoX GGUF, …) `--check`
//! refuses before anything is computed: it never ends a run as if it had compared.
//!
//! What is compared: a decoder's logits at the last position (every candle causal LM returns
//! them), and its final hidden states where the implementation exposes them (Qwen2, Qwen3);
//! an encoder's final hidden states. The largest absolute difference of each decides against
//! the tolerance (exit 1 above it, after the output is written).

pub mod bert;
mod decoder;
mod gguf;
mod report;
mod shared;

pub use report::{Check, Diff};
use shared::{on_thread, Theirs};

use crate::config::{Arithmetic, ModelConfig};
use crate::error::usage;
use crate::params::Input;
use anyhow::{anyhow, Result};
use candle_core::Tensor;

/// The implementation that recomputes a model, chosen before the trace is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// candle-transformers' `BertModel` (a BERT-family folder).
    Bert,
    /// A Hugging Face decoder folder: candle-transformers' model of that `model_type`.
    Decoder(decoder::Kind),
    /// A GGUF file: candle-transformers' quantized model of that architecture.
    Gguf(gguf::Kind),
}

/// What attn-trace computed, to be compared.
pub struct Ours<'a> {
    /// The final hidden states, `[pos, d_model]` (after the final norm).
    pub output: &'a Tensor,
    /// A language model's logits at the last position, `[vocab]` (after any soft-cap).
    pub logits: Option<&'a Tensor>,
}

/// Which reference recomputes `cfg`'s model, or the one-line refusal (exit 2) that says why
/// none can: called when the model is open, before any tensor is computed.
pub fn reference(cfg: &ModelConfig, bert: bool, n: usize) -> Result<Reference> {
    let refuse =
        |why: String| usage("--check", why, "drop --check; attn-trace diff compares any model with a trusted trace");
    let Some(model) = cfg.model.as_ref() else {
        return Err(refuse(
            "it recomputes a real model with an independent implementation, and a toy model has none".into(),
        ));
    };
    if cfg.parts.seq2seq.is_some() {
        return Err(refuse(format!(
            "candle-transformers has no encoder–decoder here that --check can compare ({} is traced, not rechecked)",
            model.model_type
        )));
    }
    if bert {
        return Ok(Reference::Bert);
    }
    if cfg.parts.arithmetic == Arithmetic::Ggml {
        return Err(refuse(
            "candle-transformers' quantized kernels round differently from llama.cpp's (SmolLM2 Q4_1's logits differ by up to 0.95), \
             so no reference can judge --arithmetic ggml; the default f32 arithmetic is checked to 1e-4"
                .into(),
        ));
    }
    if gguf::is_gguf(&model.path) {
        let arch = gguf::architecture(&model.path)?;
        return match gguf::Kind::of(&arch) {
            Some(gguf::Kind::Gemma3) => Err(refuse(
                "candle-transformers' quantized_gemma3 disagrees with transformers on Gemma 3 files \
                 (Gemma 3 270M Q4_K_M: logits 7.9 apart; attn-trace's Gemma 3 is tested against transformers)"
                    .into(),
            )),
            Some(kind) => Ok(Reference::Gguf(kind)),
            None => Err(refuse(format!(
                "candle-transformers has no quantized model for GGUF architecture {arch:?} (it has {})",
                gguf::Kind::NAMES.join(", ")
            ))),
        };
    }
    match decoder::Kind::of(&model.model_type) {
        Some(kind) => {
            let config = decoder::read_config(std::path::Path::new(&model.path))?;
            match kind.unsupported(&config, n) {
                Some(why) => Err(refuse(why)),
                None => Ok(Reference::Decoder(kind)),
            }
        }
        None => Err(refuse(format!(
            "candle-transformers has no model for model_type {:?} (it has {})",
            model.model_type,
            decoder::Kind::NAMES.join(", ")
        ))),
    }
}

/// Runs the reference on the same token ids and compares it with `ours`.
pub fn run(
    reference: Reference,
    cfg: &ModelConfig,
    hf: Option<&crate::sources::family::bert::BertConfig>,
    input: &Input,
    ours: &Ours,
    tol: f64,
) -> Result<Check> {
    let Input::Ids { ids, .. } = input else {
        return Err(anyhow!("internal: a real model takes token ids"));
    };
    let model = cfg.model.as_ref().ok_or_else(|| anyhow!("internal: --check without a real model"))?;
    match reference {
        Reference::Bert => {
            let hf = hf.ok_or_else(|| anyhow!("internal: --check on BERT without its config"))?;
            bert::run(cfg, hf, input, ours.output, tol)
        }
        Reference::Decoder(kind) => {
            let dir = std::path::Path::new(&model.path);
            let theirs = on_thread(&format!("candle-transformers' {kind:?}"), || decoder::run(kind, dir, ids))?;
            compare_decoder(theirs, ours, tol)
        }
        Reference::Gguf(kind) => {
            let ggml = cfg.parts.arithmetic == Arithmetic::Ggml;
            let theirs = gguf::run(kind, std::path::Path::new(&model.path), ids, ggml)?;
            compare_decoder(theirs, ours, tol)
        }
    }
}

fn compare_decoder(theirs: Theirs, ours: &Ours, tol: f64) -> Result<Check> {
    let logits = ours.logits.ok_or_else(|| anyhow!("internal: --check on a decoder without its logits"))?;
    let mut diffs = vec![Diff::between("logits", logits, &theirs.logits)?];
    if let Some(hidden) = &theirs.hidden {
        diffs.push(Diff::between("output", ours.output, hidden)?);
    }
    Ok(Check { reference: theirs.name, diffs, tol, notes: theirs.notes })
}
