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

use crate::config::Activation;
use crate::config::ModelConfig;
use crate::error::usage;
use crate::params::Input;
use crate::sources::family::bert::{activation, BertConfig};
use anyhow::{anyhow, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, HiddenAct, PositionEmbeddingType};
use serde_json::json;

/// What candle's BERT does differently, stated in every report.
const LAYER_NORM: &str = "candle_nn fused LayerNorm (one pass: variance as E[x²] − mean², f32)";

/// The comparison of attn-trace's output with candle-transformers' BertModel.
#[derive(Debug, Clone)]
pub struct Check {
    pub max_abs: f64,
    /// Where the largest difference is: [pos, d_model].
    pub at: Vec<usize>,
    pub shape: Vec<usize>,
    pub tol: f64,
    pub activation: &'static str,
}

impl Check {
    pub fn ok(&self) -> bool {
        self.max_abs <= self.tol
    }

    /// The `check` object of the JSON document.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "reference": "candle-transformers 0.11 models::bert::BertModel::forward",
            "compared": "output",
            "max_abs_diff": if self.max_abs.is_finite() { json!(self.max_abs) } else { json!("nan") },
            "at": self.at,
            "shape": self.shape,
            "tolerance": self.tol,
            "ok": self.ok(),
            "reference_layer_norm": LAYER_NORM,
            "reference_activation": self.activation,
        })
    }

    /// The one stderr line: a note when it passes, the error's text when it fails.
    pub fn line(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        format!(
            "check: {}: max |attn-trace output − candle-transformers BertModel| = {:.3e} {} --check-tol {} \
             at {:?} of {} values (candle: {LAYER_NORM}; {})",
            if self.ok() { "ok" } else { "failed" },
            self.max_abs,
            if self.ok() { "≤" } else { ">" },
            if self.tol == 0.0 { "0".to_string() } else { format!("{:e}", self.tol) },
            self.at,
            dims.join("×"),
            self.activation,
        )
    }
}

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
    let what = format!("--check ({})", path.display());
    let failed = |e: candle_core::Error| {
        let why = e.to_string().lines().next().unwrap_or("").to_string();
        usage(&what, format!("candle-transformers' BertModel cannot load the checkpoint: {why}"), "drop --check")
    };
    // SAFETY: the checkpoint is mapped read-only, as the trace itself maps it; it must not be
    // truncated while we run.
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&path], DType::F32, &Device::Cpu) }.map_err(failed)?;
    // sentence-transformers checkpoints drop the `bert.` prefix that transformers writes.
    let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") { vb.pp("bert") } else { vb };
    let bert = BertModel::load(vb, &config).map_err(failed)?;
    let n = ids.len();
    let input_ids = Tensor::from_vec(ids.clone(), (1, n), &Device::Cpu)?;
    let types = type_ids.clone().unwrap_or_else(|| vec![0; n]);
    let token_types = Tensor::from_vec(types, (1, n), &Device::Cpu)?;
    let theirs = bert.forward(&input_ids, &token_types, None)?.squeeze(0)?; // [pos, d_model]
    let (a, b) = (output.flatten_all()?.to_vec1::<f32>()?, theirs.flatten_all()?.to_vec1::<f32>()?);
    if a.len() != b.len() {
        return Err(anyhow!("--check: candle's output has {} values, attn-trace's {}", b.len(), a.len()));
    }
    let (mut max_abs, mut at) = (0.0f64, 0usize);
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let d = (*x as f64 - *y as f64).abs();
        // A NaN difference counts as the largest, so it can never pass.
        if d.is_nan() || d > max_abs {
            max_abs = if d.is_nan() { f64::INFINITY } else { d };
            at = i;
        }
    }
    let shape = output.dims().to_vec();
    let d = shape.last().copied().unwrap_or(1).max(1);
    Ok(Check { max_abs, at: vec![at / d, at % d], shape, tol, activation })
}

/// The error a failed check ends the run with (exit 1, after the output is written).
pub fn failure(check: &Check) -> anyhow::Error {
    anyhow!("{}", check.line())
}
