//! `--check`: recomputes a real model's final hidden state with candle-transformers' own
//! `BertModel::forward` and compares it with attn-trace's `output`.
//!
//! attn-trace's encoder is its own code (it has to be, to record every step); candle's BERT
//! is an independent implementation of the same checkpoint, so agreement says both read the
//! weights and do the arithmetic alike. They are not bit-identical: candle's BERT normalises
//! with candle_nn's fused one-pass LayerNorm (variance as E[x²] − mean², in f32), where
//! attn-trace centres first and then takes the variance, as PyTorch does; and its GELU is
//! candle's `gelu_erf` (`gelu`) or tanh `gelu` (`gelu_new`). The report names both, and
//! the largest absolute difference decides against `--check-tol` (exit 1 above it).

use super::report::{Check, Diff};
use crate::config::Activation;
use crate::config::ModelConfig;
use crate::params::Input;
use crate::sources::family::bert::{activation, BertConfig};
use anyhow::{anyhow, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, HiddenAct, PositionEmbeddingType};

/// The reference, named in the report.
const REFERENCE: &str = "candle-transformers 0.11 models::bert::BertModel::forward";

/// What candle's BERT does differently, stated in every report.
const LAYER_NORM: &str = "candle_nn fused LayerNorm (one pass: variance as E[x²] − mean², f32)";

/// Runs candle's BertModel on the same ids and compares it with `output` ([pos, d_model]).
pub fn run(cfg: &ModelConfig, hf: &BertConfig, input: &Input, output: &Tensor, tol: f64) -> Result<Check> {
    let model = cfg.model.as_ref().ok_or_else(|| anyhow!("internal: --check without a real model"))?;
    let path = std::path::Path::new(&model.path).join("model.safetensors");
    let Input::Ids { ids, type_ids } = input else {
        return Err(anyhow!("internal: a real model takes token ids"));
    };
    // The same map as the trace's (settings refused any other hidden_act before this).
    let (hidden_act, activation) = match activation(&hf.hidden_act) {
        Some(Activation::Gelu) => (HiddenAct::Gelu, "GELU: candle gelu_erf"),
        Some(Activation::Relu) => (HiddenAct::Relu, "ReLU"),
        Some(Activation::GeluTanh) => (HiddenAct::GeluApproximate, "GELU: candle tanh gelu"),
        Some(Activation::Silu) | None => {
            return Err(anyhow!("internal: hidden_act {:?} reached --check", hf.hidden_act))
        }
    };
    let config = Config {
        vocab_size: hf.vocab_size,
        hidden_size: hf.hidden_size,
        num_hidden_layers: hf.num_hidden_layers,
        num_attention_heads: hf.num_attention_heads,
        intermediate_size: hf.intermediate_size,
        hidden_act,
        hidden_dropout_prob: 0.0,
        max_position_embeddings: hf.max_position_embeddings,
        type_vocab_size: hf.type_vocab_size,
        initializer_range: 0.02,
        // attn-trace's effective epsilon (the model's own unless --eps), so both sides agree.
        layer_norm_eps: cfg.eps,
        pad_token_id: 0,
        position_embedding_type: PositionEmbeddingType::Absolute,
        use_cache: false,
        classifier_dropout: None,
        model_type: Some(model.model_type.clone()),
    };
    let what = path.display().to_string();
    let failed = super::shared::cannot_load(&what, "candle-transformers' BertModel");
    // SAFETY: the checkpoint is mapped read-only, as the trace itself maps it; it must not be
    // truncated while we run.
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&path], DType::F32, &Device::Cpu) }.map_err(&failed)?;
    // sentence-transformers checkpoints drop the `bert.` prefix that transformers writes.
    let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") { vb.pp("bert") } else { vb };
    let bert = BertModel::load(vb, &config).map_err(&failed)?;
    let n = ids.len();
    let input_ids = Tensor::from_vec(ids.clone(), (1, n), &Device::Cpu)?;
    let types = type_ids.clone().unwrap_or_else(|| vec![0; n]);
    let token_types = Tensor::from_vec(types, (1, n), &Device::Cpu)?;
    let theirs = bert.forward(&input_ids, &token_types, None)?.squeeze(0)?; // [pos, d_model]
    let diff = Diff::between("output", output, &theirs)?;
    let notes = vec![
        ("reference_layer_norm", format!("candle: {LAYER_NORM}")),
        ("reference_activation", activation.to_string()),
    ];
    Ok(Check { reference: REFERENCE.to_string(), diffs: vec![diff], tol, notes })
}
