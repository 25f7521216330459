//! Encoder–decoder families (`t5.rs`, `bart.rs`): what each says about its two stacks. An
//! encoder–decoder is one configurable block run twice (`model/seq2seq.rs`), so a family
//! here gives, per stack, the block's configuration (a `ModelConfig`, as a decoder family's
//! `parts` does) and its parameters by the checkpoint's names (the decoder's layers with a
//! cross-attention sublayer each).

use super::super::store::TensorStore;
use crate::config::ModelConfig;
use crate::params::{Cross, LayerNorm, LayerParams, Linear, Params};
use crate::trace::steps::Stack;
use anyhow::Result;
use candle_core::Tensor;
use serde::Deserialize;

/// `config.json` of an encoder–decoder, with T5's and BART's names.
#[derive(Debug, Clone, Deserialize)]
pub struct Seq2SeqConfig {
    pub model_type: String,
    pub vocab_size: usize,
    pub d_model: usize,
    // T5.
    pub d_kv: Option<usize>,
    pub d_ff: Option<usize>,
    pub num_layers: Option<usize>,
    pub num_decoder_layers: Option<usize>,
    pub num_heads: Option<usize>,
    pub relative_attention_num_buckets: Option<usize>,
    pub relative_attention_max_distance: Option<usize>,
    pub layer_norm_epsilon: Option<f64>,
    pub feed_forward_proj: Option<String>,
    pub n_positions: Option<usize>,
    // BART.
    pub encoder_layers: Option<usize>,
    pub decoder_layers: Option<usize>,
    pub encoder_attention_heads: Option<usize>,
    pub decoder_attention_heads: Option<usize>,
    pub encoder_ffn_dim: Option<usize>,
    pub decoder_ffn_dim: Option<usize>,
    pub activation_function: Option<String>,
    pub max_position_embeddings: Option<usize>,
    pub scale_embedding: Option<bool>,
    pub normalize_before: Option<bool>,
    pub add_final_layer_norm: Option<bool>,
    pub normalize_embedding: Option<bool>,
    // Both.
    pub tie_word_embeddings: Option<bool>,
    pub decoder_start_token_id: Option<u32>,
    pub eos_token_id: Option<serde_json::Value>,
    pub pad_token_id: Option<u32>,
}

/// What an encoder–decoder family knows that its `config.json` does not say.
pub trait EncoderDecoder: Send + Sync {
    /// `config.json`'s `model_type`.
    fn model_type(&self) -> &'static str;
    /// The stack's block, sizes and options (`model`, `init` and `interventions` are filled
    /// in by the reader); refuses what the family's config leaves unsaid or out of reach.
    fn block(&self, c: &Seq2SeqConfig, stack: Stack, what: &str) -> Result<ModelConfig>;
    /// The token table both stacks share, [vocab, d_model].
    fn token_table(&self, cfg: &ModelConfig, store: &dyn TensorStore) -> Result<Tensor>;
    /// The stack's parameters but its layers (`Layers::Ready` of none: the reader fills them
    /// in, read one at a time), with the shared `token` table (the decoder's with its head).
    fn params(
        &self,
        c: &Seq2SeqConfig,
        cfg: &ModelConfig,
        store: &dyn TensorStore,
        at: (Stack, &Tensor),
    ) -> Result<Params>;
    /// Layer `i` of `stack`, by the checkpoint's names.
    fn layer(&self, cfg: &ModelConfig, store: &dyn TensorStore, at: (Stack, usize)) -> Result<LayerParams>;
    /// The start token when config.json names none: the tokenizer's token of this name.
    fn start_token(&self) -> &'static str;
}

/// The linear `{prefix}.weight` ([d_out, d_in]) with its bias if the store holds one.
pub fn linear(store: &dyn TensorStore, prefix: &str, (d_in, d_out): (usize, usize)) -> Result<Linear> {
    super::blocks::linear(store, prefix, (d_in, d_out))
}

/// A norm under `prefix`, `d` wide, with its bias when `bias`.
pub fn norm(store: &dyn TensorStore, prefix: &str, d: usize, bias: bool) -> Result<LayerNorm> {
    super::blocks::norm(store, prefix, d, bias)
}

/// q, k, v and the output projection under `prefix` (`{prefix}.{q}`…), as [`Cross`] holds
/// them, with `norm`.
pub fn cross(
    store: &dyn TensorStore,
    cfg: &ModelConfig,
    (prefix, names): (&str, [&str; 4]),
    norm: LayerNorm,
) -> Result<Cross> {
    let (d, w) = (cfg.d_model, cfg.heads * cfg.d_k);
    let lin = |n: &str, dims| linear(store, &format!("{prefix}.{n}"), dims);
    Ok(Cross {
        q_proj: lin(names[0], (d, w))?,
        k_proj: lin(names[1], (d, w))?,
        v_proj: lin(names[2], (d, w))?,
        out_proj: lin(names[3], (w, d))?,
        norm,
    })
}

/// A size config.json must give, refused by name when it does not.
pub fn required(v: Option<usize>, key: &str, what: &str) -> Result<usize> {
    match v {
        Some(n) if n > 0 => Ok(n),
        Some(_) => {
            Err(crate::error::usage(what, format!("config.json: {key} is 0"), "restore the model's config.json"))
        }
        None => Err(crate::error::usage(
            what,
            format!("config.json has no {key}"),
            "restore the model's config.json (transformers' config for this family has it)",
        )),
    }
}
