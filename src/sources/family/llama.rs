//! The Llama family: Llama (`llama`), Qwen2 (`qwen2`: q, k and v biased, the output
//! projection not), Mistral (`mistral`: a sliding window) and Qwen3 (`qwen3`: q and k each
//! RMS-normed per head before the rotation, `self_attn.{q,k}_norm`). Pre-norm RMSNorm, rotary
//! positions (`rope.rs`), a gated SiLU FFN, grouped-query attention; names
//! `model.layers.{i}.self_attn.{q,k,v,o}_proj`, `mlp.{gate,up,down}_proj`, `input_layernorm`,
//! `post_attention_layernorm`, with biases where the checkpoint has them. The three differ
//! only in the facts of [`Llama`]: a new variant is one more value. Mixtral, Qwen2-MoE and
//! Qwen3-MoE are Mistral, Qwen2 and Qwen3 with a mixture of experts for an FFN, read by
//! `moe.rs` (`Llama::moe`).

use super::blocks::norm;
use super::config::DecoderConfig;
use super::moe::{self, Moe};
use super::traits::{decoder_parts, Family};
use crate::config::{Parts, Positions};
use crate::error::usage;
use crate::params::{Block, Dense, Ffn, LayerNorm, LayerParams, QkNorm};
use crate::sources::store::TensorStore;
use anyhow::Result;
use candle_core::Tensor;

/// A variant of the Llama family.
pub struct Llama {
    model_type: &'static str,
    /// llama.cpp's architecture name.
    gguf: Option<&'static str>,
    /// `sliding_window` is honoured (Mistral); Qwen2's needs `use_sliding_window`, refused.
    window: bool,
    /// The output projection has no bias even when q, k and v have (Qwen2).
    unbiased_out: bool,
    /// `use_sliding_window: true` is refused: transformers 4.46 applies Qwen2's window only
    /// outside eager attention, so no oracle says what it computes (Qwen3 likewise).
    refuses_use_sliding_window: bool,
    /// q and k each pass an RMSNorm per head before the rotation (Qwen3).
    qk_norm: bool,
    /// The FFN is a mixture of experts, named and configured as this says.
    moe: Option<&'static Moe>,
}

const BASE: Llama = Llama {
    model_type: "llama",
    gguf: Some("llama"),
    window: false,
    unbiased_out: false,
    refuses_use_sliding_window: false,
    qk_norm: false,
    moe: None,
};

pub static LLAMA: Llama = BASE;
pub static QWEN2: Llama =
    Llama { model_type: "qwen2", gguf: Some("qwen2"), unbiased_out: true, refuses_use_sliding_window: true, ..BASE };
pub static MISTRAL: Llama = Llama { model_type: "mistral", gguf: None, window: true, ..BASE };
/// GGUF `qwen3` files name the head width `attention.key_length` (128 where hidden / heads is
/// 64): read once a converted fixture proves the mapping (issue 30).
pub static QWEN3: Llama =
    Llama { model_type: "qwen3", gguf: None, refuses_use_sliding_window: true, qk_norm: true, ..BASE };
/// transformers' Mixtral masks by `sliding_window` as Mistral does; llama.cpp writes it as
/// `llama` (Q and K rows permuted) with an `expert_count`.
pub static MIXTRAL: Llama = Llama { model_type: "mixtral", gguf: Some("llama"), moe: Some(&moe::MIXTRAL), ..MISTRAL };
pub static QWEN2_MOE: Llama =
    Llama { model_type: "qwen2_moe", gguf: Some("qwen2moe"), moe: Some(&moe::QWEN2_MOE), ..QWEN2 };
/// GGUF `qwen3moe` is not read: as `qwen3`'s, its head width (`attention.key_length`) and its
/// renormalisation (llama.cpp's rule, not in the metadata) await a converted fixture.
pub static QWEN3_MOE: Llama = Llama { model_type: "qwen3_moe", moe: Some(&moe::QWEN3_MOE), ..QWEN3 };

impl Family for Llama {
    fn model_type(&self) -> &'static str {
        self.model_type
    }
    fn gguf_arch(&self) -> Option<&'static str> {
        self.gguf
    }
    /// llama.cpp's converter permutes the `llama` architecture's Q and K rows only.
    fn gguf_permutes_qk(&self) -> bool {
        self.gguf == Some("llama")
    }
    fn experts(&self) -> bool {
        self.moe.is_some()
    }
    fn eps(&self, c: &DecoderConfig) -> f64 {
        c.rms_norm_eps.unwrap_or(1e-6)
    }
    fn default_activation(&self) -> &'static str {
        "silu"
    }
    /// As the config says; transformers' default is tied.
    fn tied(&self, c: &DecoderConfig) -> bool {
        c.tie_word_embeddings.unwrap_or(true)
    }

    /// The head width rotary positions turn in pairs, Mistral's window, Qwen2's
    /// `use_sliding_window` (transformers 4.46 applies it only outside eager attention).
    fn check(&self, c: &DecoderConfig, what: &str) -> Result<()> {
        if !c.d_head().is_multiple_of(2) {
            let why = format!("the heads are {} wide, an odd width; rotary positions turn pairs", c.d_head());
            return Err(usage(what, why, "restore head_dim, or hidden_size / num_attention_heads, to an even width"));
        }
        if self.window && c.sliding_window == Some(0) {
            let why = "config.json: sliding_window is 0; expected a window of at least 1 token (or null for none)";
            return Err(usage(what, why, "restore the model's config.json"));
        }
        if self.refuses_use_sliding_window && c.use_sliding_window == Some(true) {
            return Err(usage(what, "use_sliding_window is not supported", "use a model without it"));
        }
        self.moe.map(|m| m.spec(c, what)).transpose()?;
        Ok(())
    }

    fn parts(&self, c: &DecoderConfig, what: &str) -> Result<Parts> {
        Ok(Parts {
            rms_norm: true,
            rope: Some(super::rope::rope(c, what)?),
            gated_ffn: true,
            window: c.sliding_window.filter(|_| self.window),
            attn_out_bias: self.unbiased_out.then_some(false),
            qk_norm: self.qk_norm,
            experts: self.moe.map(|m| m.spec(c, what)).transpose()?,
            ..decoder_parts(c)
        })
    }
    fn positions(&self) -> Positions {
        Positions::Rotary
    }
    fn ffn_bias(&self, c: &DecoderConfig) -> bool {
        c.mlp_bias.unwrap_or(false)
    }
    fn layer_prefixes(&self) -> &'static [&'static str] {
        &["model.layers."]
    }
    fn token_table(&self, _: &dyn TensorStore) -> String {
        "model.embed_tokens.weight".into()
    }
    fn qk_names(&self) -> Option<[&'static str; 2]> {
        Some(["model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight"])
    }
    fn q_bias(&self, _: &dyn TensorStore) -> String {
        "model.layers.0.self_attn.q_proj.bias".into()
    }
    fn position_table(&self, _: &DecoderConfig, _: &dyn TensorStore) -> Result<Option<Tensor>> {
        Ok(None)
    }
    fn final_norm(&self, c: &DecoderConfig, store: &dyn TensorStore) -> Result<LayerNorm> {
        norm(store, "model.norm", c.hidden_size, false)
    }

    fn layer(&self, c: &DecoderConfig, store: &dyn TensorStore, i: usize) -> Result<LayerParams> {
        let (d, ff, dh) = (c.hidden_size, c.d_ff(), c.d_head());
        let (qw, kvw) = (c.num_attention_heads * dh, c.kv_heads() * dh);
        let p = format!("model.layers.{i}");
        let lin =
            |name: &str, d_in: usize, d_out: usize| super::blocks::linear(store, &format!("{p}.{name}"), (d_in, d_out));
        Ok(LayerParams {
            q_proj: lin("self_attn.q_proj", d, qw)?,
            k_proj: lin("self_attn.k_proj", d, kvw)?,
            v_proj: lin("self_attn.v_proj", d, kvw)?,
            out_proj: Some(lin("self_attn.o_proj", qw, d)?),
            block: Some(Block {
                norm1: norm(store, &format!("{p}.input_layernorm"), d, false)?,
                ffn: match self.moe {
                    None => Ffn::Dense(Dense {
                        linear1: lin("mlp.up_proj", d, ff)?,
                        linear2: lin("mlp.down_proj", ff, d)?,
                        gate: Some(lin("mlp.gate_proj", d, ff)?),
                    }),
                    Some(m) => Ffn::Experts(Box::new(m.read(c, store, &p)?)),
                },
                norm2: norm(store, &format!("{p}.post_attention_layernorm"), d, false)?,
                post_attn_norm: None,
                post_ffn_norm: None,
            }),
            qk_norm: if self.qk_norm {
                let (q, k) = (format!("{p}.self_attn.q_norm"), format!("{p}.self_attn.k_norm"));
                Some(QkNorm { q: norm(store, &q, dh, false)?, k: norm(store, &k, dh, false)? })
            } else {
                None
            },
            cross: None,
        })
    }
}
