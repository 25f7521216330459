//! config.json's fields checked by key before serde reads them (issue 27): serde's own
//! message for `"vocab_size": -1` is "invalid value: integer `-1`, expected usize", which
//! names no key. Each field here is named, with what it holds and what is expected.

use crate::error::usage;
use anyhow::Result;
use serde_json::Value;

/// What a field must hold.
#[derive(Clone, Copy)]
pub enum Kind {
    /// A size or count: an integer ≥ 0.
    Count,
    /// A token id: an integer from 0 to 2^32 − 1.
    Id,
    Float,
    Flag,
    Text,
    /// A list of strings (Gemma's `layer_types`).
    Texts,
}

use Kind::*;

/// A decoder's fields (with GPT-2's names).
pub const DECODER: &[(&str, Kind)] = &[
    ("model_type", Text),
    ("vocab_size", Count),
    ("hidden_size", Count),
    ("n_embd", Count),
    ("num_hidden_layers", Count),
    ("n_layer", Count),
    ("num_attention_heads", Count),
    ("n_head", Count),
    ("num_key_value_heads", Count),
    ("head_dim", Count),
    ("intermediate_size", Count),
    ("n_inner", Count),
    ("max_position_embeddings", Count),
    ("n_positions", Count),
    ("hidden_act", Text),
    ("activation_function", Text),
    ("rms_norm_eps", Float),
    ("layer_norm_epsilon", Float),
    ("rope_theta", Float),
    ("attention_bias", Flag),
    ("mlp_bias", Flag),
    ("tie_word_embeddings", Flag),
    ("sliding_window", Count),
    ("use_sliding_window", Flag),
    ("hidden_activation", Text),
    ("query_pre_attn_scalar", Float),
    ("attn_logit_softcapping", Float),
    ("final_logit_softcapping", Float),
    ("sliding_window_pattern", Count),
    ("layer_types", Texts),
    ("rope_local_base_freq", Float),
    ("scale_attn_by_inverse_layer_idx", Flag),
    ("reorder_and_upcast_attn", Flag),
    ("pad_token_id", Id),
    ("layer_norm_eps", Float),
    ("rotary_pct", Float),
    ("rotary_emb_base", Float),
    ("use_parallel_residual", Flag),
    ("partial_rotary_factor", Float),
    ("original_max_position_embeddings", Count),
    ("num_local_experts", Count),
    ("num_experts", Count),
    ("num_experts_per_tok", Count),
    ("norm_topk_prob", Flag),
    ("moe_intermediate_size", Count),
    ("shared_expert_intermediate_size", Count),
    ("decoder_sparse_step", Count),
];

/// BERT's fields.
pub const BERT: &[(&str, Kind)] = &[
    ("model_type", Text),
    ("vocab_size", Count),
    ("hidden_size", Count),
    ("num_hidden_layers", Count),
    ("num_attention_heads", Count),
    ("intermediate_size", Count),
    ("hidden_act", Text),
    ("layer_norm_eps", Float),
    ("max_position_embeddings", Count),
    ("type_vocab_size", Count),
    ("position_embedding_type", Text),
    ("pad_token_id", Id),
    ("is_decoder", Flag),
];

/// A JSON value as a message shows it: its type and a short quote.
fn shown(v: &Value) -> String {
    let quote = crate::error::quote(&v.to_string());
    match v {
        Value::String(s) => format!("the string {}", crate::error::quote(s)),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Array(_) => format!("an array {quote}"),
        Value::Object(_) => format!("an object {quote}"),
        Value::Null => "null".into(),
    }
}

/// Refuses the first field of `fields` in `raw` that does not hold what it must; a field that
/// is absent or null is left to the reader's default.
pub fn check(raw: &Value, fields: &[(&str, Kind)], what: &str) -> Result<()> {
    for &(key, kind) in fields {
        let Some(v) = raw.get(key).filter(|v| !v.is_null()) else { continue };
        let (ok, expected) = match kind {
            Count => (v.as_u64().is_some(), "an integer ≥ 0"),
            Id => (v.as_u64().is_some_and(|i| i <= u64::from(u32::MAX)), "a token id (an integer ≥ 0)"),
            Float => (v.is_number(), "a number"),
            Flag => (v.is_boolean(), "true or false"),
            Text => (v.is_string(), "a string"),
            Texts => (v.as_array().is_some_and(|a| a.iter().all(Value::is_string)), "a list of strings"),
        };
        if !ok {
            return Err(usage(
                what,
                format!("config.json: {key} is {}; expected {expected}", shown(v)),
                "restore the model's config.json",
            ));
        }
    }
    Ok(())
}
