//! One layer's parameters, module by module (a linear, a norm, the attention's projections,
//! the FFN), named as the checkpoint names them.

use super::GgmlInput;
use candle_core::Tensor;

/// `y = x·Wᵀ + b`, PyTorch's `nn.Linear` layout.
#[derive(Debug, Clone)]
pub struct Linear {
    /// [out, in]
    pub weight: Tensor,
    /// [out]
    pub bias: Option<Tensor>,
    /// `--arithmetic ggml`: how llama.cpp takes this product with the stored weight
    /// (`model/ggml.rs`); `None`: in f32 on the input as it is.
    pub ggml: Option<std::sync::Arc<GgmlInput>>,
}

/// A norm's affine parameters: LayerNorm's weight and bias (PyTorch initialises them to
/// ones and zeros), or RMSNorm's weight alone.
#[derive(Debug, Clone)]
pub struct LayerNorm {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
}

#[derive(Debug, Clone)]
pub struct LayerParams {
    pub q_proj: Linear,
    pub k_proj: Linear,
    pub v_proj: Linear,
    /// `None`: `attn.out` is the concatenated heads (`--no-out-proj`).
    pub out_proj: Option<Linear>,
    /// The norms and FFN around the attention; `None` in an attention-only layer.
    pub block: Option<Block>,
    /// Per-head RMSNorms of q and k before the rotation (Qwen3, Gemma 3), each [d_k].
    pub qk_norm: Option<QkNorm>,
    /// An encoder–decoder's decoder layer: its cross-attention sublayer.
    pub cross: Option<Box<Cross>>,
}

/// A cross-attention sublayer: queries from the decoder, keys and values from the encoder's
/// output, and its norm (before it in a pre-norm block, after its sum in a post-norm one).
#[derive(Debug, Clone)]
pub struct Cross {
    pub q_proj: Linear,
    pub k_proj: Linear,
    pub v_proj: Linear,
    pub out_proj: Linear,
    pub norm: LayerNorm,
}

/// The q and k norms of one layer.
#[derive(Debug, Clone)]
pub struct QkNorm {
    pub q: LayerNorm,
    pub k: LayerNorm,
}

/// A layer's parts after its attention: two norms and the FFN.
#[derive(Debug, Clone)]
pub struct Block {
    pub norm1: LayerNorm,
    pub ffn: Ffn,
    pub norm2: LayerNorm,
    /// Gemma's sandwich norms: the norm of the attention's output before its residual sum
    /// (step `norm1_post.out`) and of the FFN's (`norm2_post.out`).
    pub post_attn_norm: Option<LayerNorm>,
    pub post_ffn_norm: Option<LayerNorm>,
}

/// A layer's FFN: one dense FFN, or a mixture of experts (`config.experts`).
#[derive(Debug, Clone)]
pub enum Ffn {
    Dense(Dense),
    Experts(Box<Experts>),
}

/// A position-wise FFN.
#[derive(Debug, Clone)]
pub struct Dense {
    /// The FFN's first linear (the up projection of a gated FFN).
    pub linear1: Linear,
    /// The FFN's second linear (the down projection of a gated FFN).
    pub linear2: Linear,
    /// A gated FFN's gate projection (SwiGLU).
    pub gate: Option<Linear>,
}

/// A mixture of experts: the router, every expert (each a gated FFN), and Qwen2-MoE's
/// shared expert with its gate.
#[derive(Debug, Clone)]
pub struct Experts {
    /// [experts, d_model], no bias.
    pub router: Linear,
    pub experts: Vec<Dense>,
    /// The shared expert and its gate ([1, d_model]).
    pub shared: Option<(Dense, Linear)>,
}
