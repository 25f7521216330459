//! What a decoder family is (`Family`): the trait each family file implements, the GGUF
//! metadata it reads (`GgufKey`), and the options every decoder shares (`decoder_parts`).

use super::config::DecoderConfig;
use crate::config::{Parts, Positions};
use crate::params::{LayerNorm, LayerParams};
use crate::sources::store::TensorStore;
use anyhow::Result;
use candle_core::Tensor;

/// What a decoder family knows that its `config.json` does not say.
pub trait Family: Send + Sync {
    /// `config.json`'s `model_type`.
    fn model_type(&self) -> &'static str;
    /// llama.cpp's `general.architecture` for this family, if it reads GGUF files.
    fn gguf_arch(&self) -> Option<&'static str> {
        None
    }
    /// Whether llama.cpp's converter permuted this architecture's Q and K rows.
    fn gguf_permutes_qk(&self) -> bool {
        false
    }
    /// Whether the FFN is a mixture of experts (a GGUF `llama` file with `expert_count` is
    /// Mixtral).
    fn experts(&self) -> bool {
        false
    }
    /// config.json keys the family needs and does not guess: their transformers defaults
    /// differ from a real model's (a missing one is refused by name, a null one is "none").
    fn required(&self) -> &'static [&'static str] {
        &[]
    }
    /// The scores' scale when it is not 1/√d_head (Gemma's `query_pre_attn_scalar`).
    fn attn_scale(&self, _c: &DecoderConfig) -> Option<f64> {
        None
    }
    /// Rows of `gguf_names.rs` that this architecture reads before the common ones.
    fn gguf_layer_names(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
    /// GGUF metadata keys beyond the common ones (`{arch}.…`), each read by type into the
    /// config.json key it stands for; a required one that is missing is refused by name.
    fn gguf_keys(&self) -> &'static [GgufKey] {
        &[]
    }
    /// Whether llama.cpp's `linear` rope scaling is read (as config.json's `rope_scaling`).
    fn gguf_rope_scaling(&self) -> bool {
        false
    }
    /// config.json keys that llama.cpp fixes in its code for this architecture instead of
    /// storing them, given the config read from the metadata so far (Gemma 3's local base).
    fn gguf_fixed(&self, _raw: &serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }
    /// The norm's epsilon when the config gives none, and which key gives it.
    fn eps(&self, c: &DecoderConfig) -> f64;
    /// The activation when the config names none.
    fn default_activation(&self) -> &'static str;
    /// Whether the head reuses the token table.
    fn tied(&self, c: &DecoderConfig) -> bool;
    /// The family's own refusals of a config (`what` names the model).
    fn check(&self, c: &DecoderConfig, what: &str) -> Result<()>;
    /// The block's options.
    fn parts(&self, c: &DecoderConfig, what: &str) -> Result<Parts>;
    /// Positions: learned (GPT-2) or rotary.
    fn positions(&self) -> Positions;
    /// Whether the FFN's linears have biases.
    fn ffn_bias(&self, c: &DecoderConfig) -> bool;
    /// The prefixes of layer `N`'s tensors (`model.layers.`), for counting the layers held.
    fn layer_prefixes(&self) -> &'static [&'static str];
    /// The token table's name in `store`.
    fn token_table(&self, store: &dyn TensorStore) -> String;
    /// Layer 0's query and key weights, when stored apart (checked against the config's sizes).
    fn qk_names(&self) -> Option<[&'static str; 2]>;
    /// Layer 0's query bias, whose presence says whether q/k/v are biased.
    fn q_bias(&self, store: &dyn TensorStore) -> String;
    /// The learned position table, if the family has one.
    fn position_table(&self, c: &DecoderConfig, store: &dyn TensorStore) -> Result<Option<Tensor>>;
    /// The untied head's name in the checkpoint.
    fn head_name(&self) -> &'static str {
        "lm_head.weight"
    }
    /// Whether the family turns only part of each head (so a GGUF file's
    /// `rope.dimension_count` below the head width is read, not refused).
    fn partial_rotary(&self) -> bool {
        false
    }
    /// The norm after the last layer.
    fn final_norm(&self, c: &DecoderConfig, store: &dyn TensorStore) -> Result<LayerNorm>;
    /// Layer `i`'s parameters, converted to the standard layout.
    fn layer(&self, c: &DecoderConfig, store: &dyn TensorStore, i: usize) -> Result<LayerParams>;
}

/// A GGUF metadata key a family reads: `{arch}.{key}`, of `kind`, becomes config.json's
/// `field`; `required` ones are refused by name when missing.
pub struct GgufKey {
    pub key: &'static str,
    pub field: &'static str,
    pub kind: GgufKind,
    pub required: bool,
}

/// What a [`GgufKey`] holds.
#[derive(Clone, Copy)]
pub enum GgufKind {
    /// An unsigned integer of any width.
    Count,
    /// An f32 or f64 that is finite and above 0.
    Positive,
}

/// The options every decoder shares (pre-norm, causal, a final norm and an LM head),
/// before its family sets its own.
pub(super) fn decoder_parts(c: &DecoderConfig) -> Parts {
    let (h, kv) = (c.num_attention_heads, c.kv_heads());
    Parts {
        kv_heads: (kv != h).then_some(kv),
        kv_head_of_query_head: (kv != h).then(|| (0..h).map(|q| q / (h / kv)).collect()),
        final_norm: true,
        lm_head: Some(crate::config::LmHead { tied: c.tied() }),
        padding: None,
        masked_lm: false,
        ..Default::default()
    }
}
