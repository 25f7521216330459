//! The block's options ([`Parts`]): what one configurable block does beyond the original
//! encoder's, as TransformerLens configures one block for many families. A family file
//! (`sources/family/`) fills them; `model/` branches on each in one place.

use serde::Serialize;

fn is_false(b: &bool) -> bool {
    !*b
}

/// The arithmetic of the matrix products (`--arithmetic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Arithmetic {
    /// f32 on the weights as stored (GGUF blocks dequantized), as transformers computes.
    #[default]
    F32,
    /// llama.cpp's: inputs quantized for each weight's type, f16 keys, values and weights.
    Ggml,
}

impl Arithmetic {
    pub fn is_f32(&self) -> bool {
        *self == Arithmetic::F32
    }

    pub fn name(self) -> &'static str {
        match self {
            Arithmetic::F32 => "f32",
            Arithmetic::Ggml => "ggml",
        }
    }
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

/// Rotary position embedding as Hugging Face computes it: each pair (i, i + d/2) of a head's
/// first d dimensions (d = `dims`, else the head's width) rotates by position × `inv_freq[i]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rope {
    pub theta: f64,
    /// The config's `rope_scaling` type (`linear`, `llama3`, `longrope`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaling: Option<String>,
    /// The frequencies used for this input, after any scaling: `dims` / 2 of them (d_head / 2
    /// when every dimension turns).
    pub inv_freq: Vec<f64>,
    /// Partial rotary (GPT-NeoX's `rotary_pct`, `partial_rotary_factor`): only the first `dims`
    /// dimensions of each head turn, pairing i with i + dims/2; the rest pass unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dims: Option<usize>,
    /// cos and sin are multiplied by this (LongRoPE's attention scaling,
    /// √(1 + ln(max_position_embeddings / original) / ln(original))).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention_scaling: Option<f64>,
    /// LongRoPE (Phi-3): which factors `inv_freq` holds, chosen by the input's length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longrope: Option<LongRope>,
}

/// LongRoPE's two sets of frequencies, short and long, of which an input uses one: the long
/// ones when its length (the largest position + 1) exceeds `original_max_position_embeddings`,
/// decided once for all positions, as transformers decides per forward pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LongRope {
    pub original_max_position_embeddings: usize,
    /// `short` or `long`: the factors of this input's `inv_freq`.
    pub factors: &'static str,
    /// 1 / (short_factor[i] · θ^(2i/dims)), in f32 as transformers computes them.
    #[serde(skip)]
    pub short: Vec<f64>,
    /// 1 / (long_factor[i] · θ^(2i/dims)).
    #[serde(skip)]
    pub long: Vec<f64>,
}

impl Rope {
    /// Rotary positions without scaling: θ_i = 1 / θ^(2i/d) for i < d/2, computed in f32 as
    /// transformers computes `inv_freq`.
    pub fn plain(theta: f64, d: usize) -> Rope {
        let inv_freq = (0..d / 2).map(|i| (1.0 / (theta as f32).powf((2 * i) as f32 / d as f32)) as f64).collect();
        Rope { theta, scaling: None, inv_freq, dims: None, attention_scaling: None, longrope: None }
    }

    /// The frequencies an input of `n` positions uses: LongRoPE's long ones past its original
    /// length, else its short ones; any other rotary is the same at every length.
    pub fn fit_length(&mut self, n: usize) {
        if let Some(lr) = self.longrope.as_mut() {
            let long = n > lr.original_max_position_embeddings;
            lr.factors = if long { "long" } else { "short" };
            self.inv_freq = if long { lr.long.clone() } else { lr.short.clone() };
        }
    }
}

/// How the input was padded (`config.padding`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Padding {
    /// `left` or `right`: where the pad tokens went.
    pub side: &'static str,
    /// The padded length (`--pad-to`).
    pub length: usize,
    /// The id of the pad token (the config's `pad_token_id`, else its `eos_token_id`; for the
    /// toy model `<pad>`'s id in a `--vocab` file, else the first id past the vocabulary).
    pub pad_id: u32,
    /// transformers' `attention_mask`: 1 for the sentence's tokens, 0 for pads.
    pub attention_mask: Vec<u8>,
}

/// The unembedding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LmHead {
    /// The token-embedding table is reused (transposed) as the head.
    pub tied: bool,
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

    /// LongRoPE's long frequencies from one position past the original length on.
    #[test]
    fn longrope_takes_the_long_factors_past_the_original_length() {
        let lr = LongRope { original_max_position_embeddings: 8, factors: "short", short: vec![1.0], long: vec![0.5] };
        let mut r = Rope { longrope: Some(lr), ..Rope::plain(10_000.0, 2) };
        r.fit_length(8);
        assert_eq!((r.inv_freq.clone(), r.longrope.as_ref().unwrap().factors), (vec![1.0], "short"));
        r.fit_length(9);
        assert_eq!((r.inv_freq.clone(), r.longrope.as_ref().unwrap().factors), (vec![0.5], "long"));
    }
}
