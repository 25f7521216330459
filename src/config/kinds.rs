//! The named choices of a configuration: positions, norm, activation, how the parameters
//! were obtained, and what a real model adds.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Positions {
    /// A learned table of `max_len` rows (nn.Embedding), as in seed notebook 000.
    Learned,
    /// Fixed sin/cos encodings of Vaswani et al. (2017), section 3.5.
    Sinusoidal,
    None,
    /// Rotary position embedding (Su et al. 2021) applied to q and k in every layer (Llama
    /// family); the embeddings themselves carry no position. `ModelConfig::parts.rope` holds
    /// its frequencies.
    #[serde(rename = "rope")]
    Rotary,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Norm {
    /// LayerNorm after each residual sum (the original Transformer; the seed notebooks).
    Post,
    /// LayerNorm before each sublayer (nn.TransformerEncoderLayer(norm_first=True)).
    Pre,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    Relu,
    /// The exact, erf-based GELU (PyTorch's default `approximate='none'`).
    Gelu,
    /// GELU's tanh approximation (`gelu_new`, `gelu_pytorch_tanh` in Hugging Face configs).
    #[serde(rename = "gelu_tanh")]
    GeluTanh,
    /// SiLU (swish), x·σ(x): the gate of Llama's SwiGLU FFN.
    Silu,
}

impl Positions {
    /// The name the JSON document and the table header use.
    pub fn name(self) -> &'static str {
        match self {
            Positions::Learned => "learned",
            Positions::Sinusoidal => "sinusoidal",
            Positions::None => "none",
            Positions::Rotary => "rope",
        }
    }
}

impl Norm {
    pub fn name(self) -> &'static str {
        match self {
            Norm::Post => "post",
            Norm::Pre => "pre",
        }
    }
}

impl Activation {
    pub fn name(self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::Gelu => "gelu",
            Activation::GeluTanh => "gelu_tanh",
            Activation::Silu => "silu",
        }
    }
}

/// How the parameters were obtained.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum InitConfig {
    /// Drawn from PyTorch's CPU generator, as `torch.manual_seed(seed)` then module inits.
    Torch {
        seed: u64,
        /// `avx2` (x86-64 with AVX2, the usual tutorial machine) or `generic`.
        kernel: &'static str,
        reseed: Vec<&'static str>,
        linear: &'static str,
        rand_layout: &'static str,
        draw_order: Vec<&'static str>,
        /// Raw draws discarded before each point (omitted when none).
        #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        skip_draws: std::collections::BTreeMap<&'static str, u64>,
    },
    /// Loaded from a weights file.
    File {
        path: String,
        /// The toy weights file's stored type when it is not f32 (`f16`, `bf16`, `f64`): the
        /// arithmetic is f32 on the converted values. (A real model's is `model.stored_dtype`.)
        #[serde(skip_serializing_if = "Option::is_none")]
        stored_dtype: Option<String>,
    },
    /// Handed over in memory (the Python API's `weights=` dict).
    Given,
}

/// Tensor group → tensor type → count (ordered maps: the same bytes on every run).
pub type TensorTypes = std::collections::BTreeMap<String, std::collections::BTreeMap<String, usize>>;

/// What a real model adds to the configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RealModel {
    pub path: String,
    pub model_type: String,
    pub type_vocab_size: usize,
    /// Tokens dropped from the end by `--truncate` (0 when nothing was cut).
    pub truncated: usize,
    /// The checkpoint's stored dtype when it is not f32 (`f16`, `bf16`): the arithmetic is
    /// f32 on the stored values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_dtype: Option<String>,
    /// Whether the tokenizer added a beginning-of-sequence token (decoders).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bos_added: Option<bool>,
    /// A GGUF file's tensor types per group, with counts (`attn_v`: {`q5_0`: 15, `q8_0`: 15}).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor_types: Option<TensorTypes>,
}
