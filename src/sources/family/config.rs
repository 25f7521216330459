//! A decoder's `config.json` as read (`decoder.rs` reads and checks it; every family file
//! maps it): plain data, a leaf of the family folder, so that the families, the trait and the
//! registry can all name it without importing one another.

use serde::Deserialize;

/// `config.json` of a decoder, with GPT-2's names as aliases.
#[derive(Debug, Clone, Deserialize)]
pub struct DecoderConfig {
    pub model_type: String,
    pub vocab_size: usize,
    #[serde(alias = "n_embd")]
    pub hidden_size: usize,
    #[serde(alias = "n_layer")]
    pub num_hidden_layers: usize,
    #[serde(alias = "n_head")]
    pub num_attention_heads: usize,
    pub num_key_value_heads: Option<usize>,
    pub head_dim: Option<usize>,
    /// GPT-2's `n_inner` may be null: 4 × hidden.
    #[serde(alias = "n_inner")]
    pub intermediate_size: Option<usize>,
    #[serde(alias = "n_positions")]
    pub max_position_embeddings: usize,
    #[serde(alias = "activation_function")]
    pub hidden_act: Option<String>,
    pub rms_norm_eps: Option<f64>,
    pub layer_norm_epsilon: Option<f64>,
    pub rope_theta: Option<f64>,
    pub rope_scaling: Option<serde_json::Value>,
    pub attention_bias: Option<bool>,
    pub mlp_bias: Option<bool>,
    pub tie_word_embeddings: Option<bool>,
    pub sliding_window: Option<usize>,
    pub use_sliding_window: Option<bool>,
    /// Gemma's keys (`gemma.rs`): the FFN's activation (Gemma reads it, not `hidden_act`),
    /// the scores' scale `query_pre_attn_scalar^-½`, the soft-caps, which layers slide
    /// (`sliding_window_pattern`, or `layer_types` in later configs) and Gemma 3's local base.
    pub hidden_activation: Option<String>,
    pub query_pre_attn_scalar: Option<f64>,
    pub attn_logit_softcapping: Option<f64>,
    pub final_logit_softcapping: Option<f64>,
    pub sliding_window_pattern: Option<usize>,
    pub layer_types: Option<Vec<String>>,
    pub rope_local_base_freq: Option<f64>,
    pub scale_attn_by_inverse_layer_idx: Option<bool>,
    /// The pad token (`--pad-to`); without one, the end-of-sequence token pads, as
    /// `tokenizer.pad_token = tokenizer.eos_token` does for GPT-2 and Llama.
    pub pad_token_id: Option<u32>,
    /// One id, or a list (Llama 3): the first pads when there is no `pad_token_id`.
    pub eos_token_id: Option<serde_json::Value>,
    pub reorder_and_upcast_attn: Option<bool>,
    /// GPT-NeoX's norm epsilon.
    pub layer_norm_eps: Option<f64>,
    /// GPT-NeoX: the fraction of each head that turns, and the rotary base (transformers
    /// reads these two, not `partial_rotary_factor` and `rope_theta`, which it overwrites).
    pub rotary_pct: Option<f64>,
    pub rotary_emb_base: Option<f64>,
    /// GPT-NeoX: attention and FFN side by side (the default) or one after the other.
    pub use_parallel_residual: Option<bool>,
    /// Phi-3 (transformers ≥ 4.49): the fraction of each head that turns.
    pub partial_rotary_factor: Option<f64>,
    /// Phi-3: the context LongRoPE's short factors were trained for.
    pub original_max_position_embeddings: Option<usize>,
    /// The rotary width a GGUF file states (`rope.dimension_count`), where it is not the
    /// head's: exact, where a fraction of the head's width might round one dimension away.
    #[serde(skip)]
    pub rope_dims: Option<usize>,
    /// Mixtures of experts (`family/moe.rs`): Mixtral's expert count, Qwen's.
    pub num_local_experts: Option<usize>,
    pub num_experts: Option<usize>,
    pub num_experts_per_tok: Option<usize>,
    pub norm_topk_prob: Option<bool>,
    pub moe_intermediate_size: Option<usize>,
    pub shared_expert_intermediate_size: Option<usize>,
    pub decoder_sparse_step: Option<usize>,
    pub mlp_only_layers: Option<Vec<usize>>,
}
