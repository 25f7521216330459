//! The model configuration: every setting that shapes the numbers.
//!
//! It is written into the JSON document's `config` object, so its field names are API, and
//! it is what the PyTorch oracle (fixtures/oracle) reads back to recompute a trace.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Positions {
    /// A learned table of `max_len` rows (nn.Embedding), as in seed notebook 000.
    Learned,
    /// Fixed sin/cos encodings of Vaswani et al. (2017), section 3.5.
    Sinusoidal,
    None,
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
}

impl Positions {
    /// The name the JSON document and the table header use.
    pub fn name(self) -> &'static str {
        match self {
            Positions::Learned => "learned",
            Positions::Sinusoidal => "sinusoidal",
            Positions::None => "none",
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
    File { path: String },
}

/// What a real model adds to the configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RealModel {
    pub path: String,
    pub model_type: String,
    pub type_vocab_size: usize,
    /// Tokens dropped from the end by `--truncate` (0 when nothing was cut).
    pub truncated: usize,
}

/// The encoder's shape and arithmetic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelConfig {
    pub d_model: usize,
    pub heads: usize,
    pub d_k: usize,
    pub d_v: usize,
    pub d_ff: usize,
    pub layers: usize,
    pub vocab_size: usize,
    pub max_len: usize,
    pub positions: Positions,
    pub causal: bool,
    /// The factor that multiplies q·kᵀ (1/√d_k unless set).
    pub scale: f64,
    pub norm: Norm,
    pub activation: Activation,
    pub attn_bias: bool,
    pub ffn_bias: bool,
    pub eps: f64,
    /// Whether the input rows came from a raw `--input` matrix instead of embeddings.
    pub raw_input: bool,
    /// A real model: its folder, family and BERT-only settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<RealModel>,
    pub init: InitConfig,
}

impl ModelConfig {
    /// The default toy encoder (seed notebook 000's shape): d_model 4, one head, d_ff 8, one
    /// post-norm ReLU layer, learned positions for 10 tokens, torch init with seed 123.
    pub fn toy() -> ModelConfig {
        ModelConfig {
            d_model: 4,
            heads: 1,
            d_k: 4,
            d_v: 4,
            d_ff: 8,
            layers: 1,
            vocab_size: 0,
            max_len: 10,
            positions: Positions::Learned,
            causal: false,
            scale: 0.5,
            norm: Norm::Post,
            activation: Activation::Relu,
            attn_bias: false,
            ffn_bias: true,
            eps: 1e-5,
            raw_input: false,
            model: None,
            init: InitConfig::File { path: String::new() },
        }
    }

    /// Width of the fused query and key projections.
    pub fn qk_width(&self) -> usize {
        self.heads * self.d_k
    }

    /// Width of the fused value projection and of the concatenated heads.
    pub fn v_width(&self) -> usize {
        self.heads * self.d_v
    }
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig::toy()
    }
}
