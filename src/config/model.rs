//! The configuration itself ([`ModelConfig`]) with the two parts that hold configurations in
//! turn: the block's options ([`Parts`]) and an encoder–decoder's decoder ([`Seq2Seq`]), which
//! is a `ModelConfig` again. The three refer to each other, so they live in one file.

use super::{Activation, InitConfig, Interventions, Norm, Positions, RealModel};
use super::{Arithmetic, LmHead, Padding, Rope};
use serde::Serialize;

fn is_false(b: &bool) -> bool {
    !*b
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

/// The block's parts beyond the original encoder's, as TransformerLens configures one block
/// for many families: each is off by default and omitted from the JSON when off.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Parts {
    /// RMSNorm (Zhang & Sennrich 2019) instead of LayerNorm: no centring, no bias.
    #[serde(skip_serializing_if = "is_false")]
    pub rms_norm: bool,
    /// Key/value heads when fewer than the query heads (grouped-query attention, Ainslie et
    /// al. 2023): query head h reads key/value head h / (heads / kv_heads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_heads: Option<usize>,
    /// With grouped-query attention: the key/value head each query head reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_head_of_query_head: Option<Vec<usize>>,
    /// Rotary positions: the frequencies and how they were derived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rope: Option<Rope>,
    /// A gated FFN (SwiGLU, Shazeer 2020): act(x·W_gate) ⊙ (x·W_up), then ·W_down.
    #[serde(skip_serializing_if = "is_false")]
    pub gated_ffn: bool,
    /// A sliding-window mask: query i sees keys i − window + 1 ..= i (Mistral), in every
    /// layer unless `local_layers` names the layers it applies to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<usize>,
    /// Layers whose attention differs, as TransformerLens's `attn_types` says "local" or
    /// "global": layer l is local where `local_layers[l]` (its queries see `window` keys, its
    /// positions turn by `rope_local` if given) and global elsewhere (every earlier key, `rope`).
    /// `None`: every layer is alike. Gemma 2 alternates; Gemma 3 has five local to one global.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_layers: Option<Vec<bool>>,
    /// The local layers' rotary frequencies when they differ from `rope`'s (Gemma 3's
    /// `rope_local_base_freq`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rope_local: Option<Rope>,
    /// q and k each pass an RMSNorm over each head's width before the rotation (Qwen3,
    /// Gemma 3): `attn.q_norm`, `attn.k_norm`.
    #[serde(skip_serializing_if = "is_false")]
    pub qk_norm: bool,
    /// Sandwich norms (Gemma 2, 3): each sublayer's output is normed before its residual sum
    /// (`norm1_post.out`, `norm2_post.out`; the parameters are `Block.post_attn_norm` and
    /// `post_ffn_norm`).
    #[serde(skip_serializing_if = "is_false")]
    pub sandwich_norms: bool,
    /// Attention logit soft-capping (Gemma 2): after the scale and before the mask, each score
    /// becomes `cap · tanh(score / cap)` (`attn.scores`; `attn.scores_uncapped` is before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attn_softcap: Option<f64>,
    /// Final logit soft-capping (Gemma 2): `logits = cap · tanh(logits_uncapped / cap)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_softcap: Option<f64>,
    /// The token rows are multiplied by this before the first layer (Gemma: √d_model, rounded
    /// to f32 as transformers rounds it): `embed.out = embed.token × embed_scale`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embed_scale: Option<f64>,
    /// Whether the output projection has a bias when the q/k/v projections' differs (Qwen2:
    /// q, k, v biased, o not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attn_out_bias: Option<bool>,
    /// Attention and FFN side by side (GPT-NeoX's `use_parallel_residual`, as TransformerLens's
    /// `parallel_attn_mlp`): both read the layer input, each through its own norm, and the
    /// layer adds both to it, `x + attn(norm1(x)) + ffn(norm2(x))`; no `add_norm1.sum`.
    #[serde(skip_serializing_if = "is_false")]
    pub parallel: bool,
    /// A norm after the last layer (GPT-2 `ln_f`, Llama `norm`, `nn.TransformerEncoder`'s
    /// `norm=`): `final_norm.out`.
    #[serde(skip_serializing_if = "is_false")]
    pub final_norm: bool,
    /// Self-attention alone, as textbooks write `MultiHeadAttention(d_in, d_out, …)`: each
    /// layer ends at `attn.out`, with no residual sum, norm or FFN.
    #[serde(skip_serializing_if = "is_false")]
    pub attention_only: bool,
    /// No output projection: `attn.out` is the heads' concatenation (the tutorials'
    /// `MultiHeadAttentionWrapper`). Attention-only blocks only.
    #[serde(skip_serializing_if = "is_false")]
    pub no_out_proj: bool,
    /// The width of `attn.out` when it is not d_model (an attention-only block's d_out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub d_out: Option<usize>,
    /// The heads were built as separate single-head modules (each with its own q, k, v
    /// `nn.Linear`, constructed head by head) and concatenated, rather than as fused
    /// projections split into heads. The arithmetic is the same; seeded weights are drawn
    /// head by head in construction order.
    #[serde(skip_serializing_if = "is_false")]
    pub separate_heads: bool,
    /// A language-model head: `logits` and the next-token predictions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lm_head: Option<LmHead>,
    /// BERT's masked-LM head (`cls.predictions`): predictions at `[MASK]` positions.
    #[serde(skip_serializing_if = "is_false")]
    pub masked_lm: bool,
    /// `--pad-to`: the input was padded as transformers pads a batch, and padded keys are
    /// hidden from every query (transformers' `attention_mask`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub padding: Option<Padding>,
    /// `--arithmetic ggml`: the products computed as llama.cpp's CPU backend computes them
    /// (`model/ggml.rs`); absent for f32, the default.
    #[serde(skip_serializing_if = "Arithmetic::is_f32")]
    pub arithmetic: Arithmetic,
    /// A mixture of experts in every layer's FFN (`config/moe.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experts: Option<super::Experts>,
    /// T5's relative position bias, added to every layer's scores (`position_bias`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relative_bias: Option<super::RelBias>,
    /// The final norm's output is multiplied by this before the head (T5 with a tied head:
    /// d_model^−0.5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head_scale: Option<f64>,
    /// Every layer has a cross-attention sublayer after its self-attention (an
    /// encoder–decoder's decoder): `cross_attn.*`, reading the encoder's output.
    #[serde(skip_serializing_if = "is_false")]
    pub cross_attention: bool,
    /// An encoder–decoder: this configuration is the encoder's, and this the decoder's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq2seq: Option<super::Seq2Seq>,
}

/// The decoder stack of an encoder–decoder, with its input.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Seq2Seq {
    /// The decoder's block: its layers, causal self-attention, a cross-attention sublayer in
    /// every layer (queries of the decoder's tokens, keys and values of the encoder's output).
    pub decoder: Box<ModelConfig>,
    /// The token the decoder starts from (`decoder_start_token_id`).
    pub decoder_start: u32,
    /// The decoder's input ids: the start token, then `--target`'s tokens shifted right
    /// (teacher forcing, as transformers' `_shift_right` makes them from labels).
    pub decoder_ids: Vec<u32>,
    /// `--target`, as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The decoder's tokens as the vocabulary spells them, and what each spells as text.
    #[serde(skip)]
    pub decoder_tokens: Vec<String>,
    #[serde(skip)]
    pub decoder_texts: Option<Vec<String>>,
}

impl Parts {
    /// Whether layer `l` is a local (sliding-window) layer.
    fn local(&self, l: usize) -> bool {
        self.local_layers.as_ref().is_none_or(|ls| ls.get(l).copied().unwrap_or(false))
    }

    /// Layer `l`'s sliding window, if its queries have one.
    pub fn window_at(&self, l: usize) -> Option<usize> {
        self.window.filter(|_| self.local(l))
    }

    /// Layer `l`'s rotary frequencies, if its positions rotate.
    pub fn rope_at(&self, l: usize) -> Option<&Rope> {
        match (&self.rope_local, self.local_layers.is_some() && self.local(l)) {
            (Some(local), true) => Some(local),
            _ => self.rope.as_ref(),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Gemma 3's pattern, five local layers to one global: the window and the local base
    /// apply to the local layers only; without `local_layers` every layer is alike.
    #[test]
    fn per_layer_window_and_rope_follow_the_local_layers() {
        let (global, local) = (Rope::plain(1_000_000.0, 4), Rope::plain(10_000.0, 4));
        let mut p = Parts { window: Some(3), rope: Some(global.clone()), ..Default::default() };
        assert_eq!((p.window_at(0), p.window_at(7)), (Some(3), Some(3)));
        assert_eq!(p.rope_at(5), Some(&global));
        p.local_layers = Some((0..12).map(|l| (l + 1) % 6 != 0).collect());
        p.rope_local = Some(local.clone());
        let windows: Vec<Option<usize>> = (0..6).map(|l| p.window_at(l)).collect();
        assert_eq!(windows, [Some(3), Some(3), Some(3), Some(3), Some(3), None]);
        assert_eq!((p.rope_at(4), p.rope_at(5), p.rope_at(11)), (Some(&local), Some(&global), Some(&global)));
        assert_eq!(p.window_at(99), None, "a layer past the list is global");
    }
}
