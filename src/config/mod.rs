//! The model configuration: every setting that shapes the numbers.
//!
//! It is written into the JSON document's `config` object, so its field names are API, and
//! it is what the PyTorch oracle (fixtures/oracle) reads back to recompute a trace.

use serde::Serialize;

pub mod flops;
mod generate;
mod moe;
mod parts;
mod run;
mod seq2seq;
pub mod tiles;
pub use flops::{forward_flops, Flops};
pub use generate::{Generate, Strategy};
pub use moe::Experts;
pub use parts::{Arithmetic, LmHead, LongRope, Padding, Parts, Rope};
pub use run::RunConfig;
pub use seq2seq::{RelBias, Seq2Seq};

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
    /// What was changed in the forward pass (absent when nothing was), so that a modified
    /// trace is never mistaken for an unmodified one.
    #[serde(skip_serializing_if = "Interventions::is_empty")]
    pub interventions: Interventions,
    /// The parts of modern decoder blocks (all absent for the encoders: the JSON of an
    /// encoder trace is unchanged).
    #[serde(flatten)]
    pub parts: Parts,
}

/// Changes to the forward pass (issue: interventions).
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Interventions {
    /// Ablated heads as (layer, head): their context is zero, or its mean over positions,
    /// before the output projection.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ablate: Vec<(usize, usize)>,
    /// An encoder–decoder's decoder: ablated cross-attention heads as (layer, head)
    /// (`--ablate cross.L.H`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ablate_cross: Vec<(usize, usize)>,
    /// `zero` or `mean` (with `ablate` or `ablate_cross`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ablate_mode: Option<AblateMode>,
    /// Hidden query→key edges: their score is −inf before the softmax.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub knockout: Vec<Knockout>,
    /// `--ablate-expert`: experts removed from routing, as (layer, expert): their router
    /// logit is −inf, so the softmax gives them nothing and top-k never picks them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ablate_expert: Vec<(usize, usize)>,
    /// `--induction N`: the input is N random tokens repeated twice (not the sentence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub induction: Option<usize>,
    /// `--steer`, `--steer-from`: vectors added to the residual stream after a layer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steer: Vec<Steer>,
}

/// One steering vector (activation addition, Turner et al. 2023): `alpha × vector` is added
/// to layer `layer`'s output at every absolute position from `from` on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Steer {
    pub layer: usize,
    pub alpha: f32,
    pub from: usize,
    /// Where the vector came from: a file (`v.npy`, `t.json#layers.3.add_norm2.sum[5]`) or
    /// `"Love" - "Hate" after layer L` for `--steer-from`.
    pub source: String,
    /// The vector itself, d_model values (before `alpha`).
    pub vector: Vec<f32>,
}

/// What an ablated head's context becomes (`--ablate-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AblateMode {
    /// Zero, as transformers' `head_mask`.
    #[default]
    Zero,
    /// Its mean over positions.
    Mean,
}

impl AblateMode {
    /// The name the JSON document and the table header use.
    pub fn name(self) -> &'static str {
        match self {
            AblateMode::Zero => "zero",
            AblateMode::Mean => "mean",
        }
    }
}

/// One knocked-out edge; `head` None is every head of the layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Knockout {
    pub layer: usize,
    pub head: Option<usize>,
    pub query: usize,
    pub key: usize,
}

impl Interventions {
    pub fn is_empty(&self) -> bool {
        self.ablate.is_empty()
            && self.ablate_cross.is_empty()
            && self.knockout.is_empty()
            && self.induction.is_none()
            && self.ablate_expert.is_empty()
            && self.steer.is_empty()
    }
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
            init: InitConfig::File { path: String::new(), stored_dtype: None },
            interventions: Interventions::default(),
            parts: Parts::default(),
        }
    }

    /// Key/value heads: fewer than `heads` with grouped-query attention.
    pub fn kv_heads(&self) -> usize {
        self.parts.kv_heads.unwrap_or(self.heads)
    }

    /// Width of the fused query and key projections.
    pub fn qk_width(&self) -> usize {
        self.heads * self.d_k
    }

    /// Width of the fused value projection and of the concatenated heads.
    pub fn v_width(&self) -> usize {
        self.heads * self.d_v
    }

    /// Width of the key projection: fewer heads with grouped-query attention.
    pub fn k_width(&self) -> usize {
        self.kv_heads() * self.d_k
    }

    /// Width of the value projection: fewer heads with grouped-query attention.
    pub fn kv_v_width(&self) -> usize {
        self.kv_heads() * self.d_v
    }

    /// Width of `attn.out`: d_model, an attention-only block's d_out, or the concatenated
    /// heads without an output projection.
    pub fn out_width(&self) -> usize {
        match (self.parts.no_out_proj, self.parts.d_out) {
            (true, _) => self.v_width(),
            (false, Some(d)) => d,
            (false, None) => self.d_model,
        }
    }

    /// Whether the output projection has a bias: as the q/k/v projections unless said.
    pub fn out_bias(&self) -> bool {
        self.parts.attn_out_bias.unwrap_or(self.attn_bias)
    }
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig::toy()
    }
}
