//! BERT (`bert`): its `config.json`, with the field names of transformers' `BertConfig`. Its
//! checkpoint names are `bert_weights.rs`; the block is post-norm with learned positions
//! and token types.

use crate::error::usage;
use anyhow::Result;
use serde::Deserialize;
use std::path::Path;

/// The activation a config's `hidden_act` names, if supported.
pub fn activation(hidden_act: &str) -> Option<crate::config::Activation> {
    use crate::config::Activation;
    match hidden_act {
        "gelu" => Some(Activation::Gelu),
        "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Some(Activation::GeluTanh),
        "relu" => Some(Activation::Relu),
        _ => None,
    }
}

/// Model families whose checkpoints have BERT's layout and arithmetic (the registry's list).
pub use super::registry::BERT as SUPPORTED;

fn default_eps() -> f64 {
    1e-12
}
fn default_act() -> String {
    "gelu".into()
}
fn default_type_vocab() -> usize {
    2
}

#[derive(Debug, Clone, Deserialize)]
pub struct BertConfig {
    pub model_type: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    /// The pad token (`--pad-to`).
    #[serde(default)]
    pub pad_token_id: Option<u32>,
    /// transformers' BertModel masks later tokens when this is set (`get_extended_attention_mask`).
    #[serde(default)]
    pub is_decoder: bool,
}

impl BertConfig {
    pub fn read(path: &Path) -> Result<BertConfig> {
        let what = format!("--model: {}", path.display());
        let fix = "pass a Hugging Face model folder with a config.json";
        let text = crate::sources::input_file::text(&what, path, fix, crate::sources::input_file::CONFIG)?;
        // Strict: a key given twice is refused, not read as its last value.
        let raw: serde_json::Value = crate::strict_json::parse(text.as_bytes())
            .map_err(|e| usage(&what, format!("not valid JSON: {e}"), "restore the model's config.json"))?;
        let model_type = raw["model_type"].as_str().unwrap_or("(none)").to_string();
        if !SUPPORTED.contains(&model_type.as_str()) {
            let dir = path.parent().unwrap_or(path).display().to_string();
            let all = super::registry::model_types();
            return Err(crate::sources::common::unsupported_architecture(
                &dir,
                &model_type,
                "config.json's model_type",
                &all,
            ));
        }
        crate::sources::hf::fields::check(&raw, crate::sources::hf::fields::BERT, &what)?;
        let cfg: BertConfig = serde_json::from_value(raw).map_err(|e| {
            usage(&what, format!("a BERT config field is missing or wrong: {e}"), "restore the model's config.json")
        })?;
        if let Some(p) = cfg.position_embedding_type.as_deref() {
            if p != "absolute" {
                return Err(usage(
                    &what,
                    format!("position_embedding_type {p:?} is not supported"),
                    "use a model with absolute positions",
                ));
            }
        }
        if !cfg.layer_norm_eps.is_finite() || cfg.layer_norm_eps < 0.0 {
            return Err(usage(
                &what,
                format!("layer_norm_eps {} is not a finite, non-negative number", cfg.layer_norm_eps),
                "restore the model's config.json",
            ));
        }
        let zero = [
            ("hidden_size", cfg.hidden_size),
            ("num_hidden_layers", cfg.num_hidden_layers),
            ("num_attention_heads", cfg.num_attention_heads),
            ("intermediate_size", cfg.intermediate_size),
            ("vocab_size", cfg.vocab_size),
            ("max_position_embeddings", cfg.max_position_embeddings),
        ];
        if let Some((k, _)) = zero.iter().find(|(_, v)| *v == 0) {
            return Err(usage(&what, format!("{k} is 0"), "restore the model's config.json"));
        }
        if !cfg.hidden_size.is_multiple_of(cfg.num_attention_heads) {
            return Err(usage(
                &what,
                format!("hidden_size {} is not divisible by {} heads", cfg.hidden_size, cfg.num_attention_heads),
                "restore the model's config.json",
            ));
        }
        Ok(cfg)
    }
}
