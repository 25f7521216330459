//! Phi-3 (`phi3`: Phi-3, Phi-3.5, Phi-4-mini): the Llama block (pre-norm RMSNorm, a gated SiLU
//! FFN, grouped-query attention, Mistral's sliding window when `sliding_window` is set) with
//! two fused projections, split here on load so the trace shows the standard layout:
//! `self_attn.qkv_proj` rows `[q (heads·d_head) | k (kv_heads·d_head) | v (kv_heads·d_head)]`
//! and `mlp.gate_up_proj` rows `[gate | up]` (transformers' `chunk(2)`). Rotary positions may
//! turn only part of each head (`partial_rotary_factor`, transformers ≥ 4.49; Phi-4-mini) and
//! may be LongRoPE-scaled (`rope_scaling` type `longrope`, or its older names `su` and `yarn`,
//! which transformers reads as `longrope`): `rope.rs`'s [`longrope`](super::rope::longrope).
//! No biases; the head is untied unless `tie_word_embeddings` says so.

use super::blocks::norm;
use super::config::DecoderConfig;
use super::traits::{decoder_parts, Family};
use crate::config::{Parts, Positions};
use crate::error::usage;
use crate::params::{Block, Dense, Ffn, LayerNorm, LayerParams, Linear};
use crate::sources::store::TensorStore;
use anyhow::Result;
use candle_core::Tensor;

pub struct Phi3;

impl Phi3 {
    /// The rotary width: int(d_head · partial_rotary_factor).
    fn rotary_dims(c: &DecoderConfig) -> usize {
        c.rotary_dims(c.partial_rotary_factor.unwrap_or(1.0))
    }

    /// The `rope_scaling` type, if any: transformers' Phi3Config reads `type`, and renames `su`
    /// and `yarn` to `longrope`, the one it defines.
    fn scaling(c: &DecoderConfig, what: &str) -> Result<Option<&'static str>> {
        let Some(s) = c.rope_scaling.as_ref().filter(|v| !v.is_null()) else { return Ok(None) };
        match s["type"].as_str().or(s["rope_type"].as_str()) {
            Some("longrope" | "su" | "yarn") => Ok(Some("longrope")),
            Some(other) => {
                let why = format!(
                    "config.json: rope_scaling type {other:?} is not defined for phi3 (it defines longrope, \
                     also named su or yarn)"
                );
                Err(usage(what, why, "restore the model's config.json"))
            }
            None => {
                let why = "config.json: rope_scaling has no type (phi3 defines longrope)";
                Err(usage(what, why, "restore the model's config.json"))
            }
        }
    }
}

impl Family for Phi3 {
    fn model_type(&self) -> &'static str {
        "phi3"
    }
    /// llama.cpp's converter keeps rotate_half's layout (its NEOX rotary): no Q/K permutation.
    fn gguf_arch(&self) -> Option<&'static str> {
        Some("phi3")
    }
    fn partial_rotary(&self) -> bool {
        true
    }
    fn eps(&self, c: &DecoderConfig) -> f64 {
        c.rms_norm_eps.unwrap_or(1e-5)
    }
    fn default_activation(&self) -> &'static str {
        "silu"
    }
    /// Phi3Config's default is untied.
    fn tied(&self, c: &DecoderConfig) -> bool {
        c.tie_word_embeddings.unwrap_or(false)
    }

    /// The rotary width (even, within the head), the window, the scaling type and its factors.
    fn check(&self, c: &DecoderConfig, what: &str) -> Result<()> {
        if let Some(p) = c.partial_rotary_factor.filter(|p| !(p.is_finite() && *p > 0.0 && *p <= 1.0)) {
            let why = format!("config.json: partial_rotary_factor is {p}; expected a fraction above 0, at most 1");
            return Err(usage(what, why, "restore the model's config.json"));
        }
        let (r, dh) = (Self::rotary_dims(c), c.d_head());
        if r == 0 || !r.is_multiple_of(2) || r > dh {
            let why = format!("config.json: rotary positions would turn {r} of the {dh} dimensions of each head; they turn pairs (expected an even number from 2 to {dh})");
            return Err(usage(what, why, "restore the model's config.json"));
        }
        if c.sliding_window == Some(0) {
            let why = "config.json: sliding_window is 0; expected a window of at least 1 token (or null for none)";
            return Err(usage(what, why, "restore the model's config.json"));
        }
        // The factors' count and values are checked where they are read.
        self.parts(c, what).map(|_| ())
    }

    fn parts(&self, c: &DecoderConfig, what: &str) -> Result<Parts> {
        let rotary = (c.rope_theta.unwrap_or(10000.0), Self::rotary_dims(c));
        let rope = match Self::scaling(c, what)? {
            Some(_) => super::rope::longrope(c, rotary, what)?,
            None => super::rope::rotary(c, rotary, what)?,
        };
        Ok(Parts { rms_norm: true, rope: Some(rope), gated_ffn: true, window: c.sliding_window, ..decoder_parts(c) })
    }
    fn positions(&self) -> Positions {
        Positions::Rotary
    }
    fn ffn_bias(&self, _: &DecoderConfig) -> bool {
        false
    }
    fn layer_prefixes(&self) -> &'static [&'static str] {
        &["model.layers."]
    }
    fn token_table(&self, _: &dyn TensorStore) -> String {
        "model.embed_tokens.weight".into()
    }
    fn qk_names(&self) -> Option<[&'static str; 2]> {
        None // fused in qkv_proj: its heads are checked through the token table's width
    }
    fn q_bias(&self, _: &dyn TensorStore) -> String {
        "model.layers.0.self_attn.qkv_proj.bias".into()
    }
    fn position_table(&self, _: &DecoderConfig, _: &dyn TensorStore) -> Result<Option<Tensor>> {
        Ok(None)
    }
    fn final_norm(&self, c: &DecoderConfig, store: &dyn TensorStore) -> Result<LayerNorm> {
        norm(store, "model.norm", c.hidden_size, false)
    }

    /// A Phi-3 block, its fused projections split by rows into the standard ones.
    fn layer(&self, c: &DecoderConfig, store: &dyn TensorStore, i: usize) -> Result<LayerParams> {
        let (d, ff, dh) = (c.hidden_size, c.d_ff(), c.d_head());
        let (qw, kvw) = (c.num_attention_heads * dh, c.kv_heads() * dh);
        let p = format!("model.layers.{i}");
        let get = |name: &str, shape: &[usize]| -> Result<Linear> {
            let name = format!("{p}.{name}.weight");
            let ggml = store.ggml_input(&name)?.map(std::sync::Arc::new);
            Ok(Linear { weight: store.get(&name, shape)?, bias: None, ggml })
        };
        // A fused projection's rows, with the same rows of its blocks under `--arithmetic ggml`.
        let rows = |w: &Linear, start: usize, len: usize| -> Result<Linear> {
            let ggml = w.ggml.as_ref().map(|g| g.rows(start, len)).transpose()?.map(std::sync::Arc::new);
            Ok(Linear { weight: w.weight.narrow(0, start, len)?, bias: None, ggml })
        };
        let qkv = get("self_attn.qkv_proj", &[qw + 2 * kvw, d])?;
        let gate_up = get("mlp.gate_up_proj", &[2 * ff, d])?;
        Ok(LayerParams {
            q_proj: rows(&qkv, 0, qw)?,
            k_proj: rows(&qkv, qw, kvw)?,
            v_proj: rows(&qkv, qw + kvw, kvw)?,
            out_proj: Some(get("self_attn.o_proj", &[d, qw])?),
            block: Some(Block {
                norm1: norm(store, &format!("{p}.input_layernorm"), d, false)?,
                ffn: Ffn::Dense(Dense {
                    linear1: rows(&gate_up, ff, ff)?,
                    linear2: get("mlp.down_proj", &[d, ff])?,
                    gate: Some(rows(&gate_up, 0, ff)?),
                }),
                norm2: norm(store, &format!("{p}.post_attention_layernorm"), d, false)?,
                post_attn_norm: None,
                post_ffn_norm: None,
            }),
            qk_norm: None,
            cross: None,
        })
    }
}
