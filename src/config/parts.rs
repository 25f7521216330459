//! What the block's options ([`super::Parts`], in `config/model.rs`) are made of: the
//! arithmetic, rotary positions, padding and the head. The options are what one configurable
//! block does beyond the original encoder's, as TransformerLens configures one block for many
//! families. A family file (`sources/family/`) fills them; `model/` branches on each in one
//! place.

use serde::Serialize;

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

#[cfg(test)]
mod tests {
    use super::*;

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
