//! GPT-NeoX (`gpt_neox`: Pythia, GPT-NeoX-20B): pre-norm LayerNorm with biases, attention
//! and FFN side by side when `use_parallel_residual` (the default; one after the other
//! otherwise), rotary positions on the first `rotary_pct` of each head's dimensions (base
//! `rotary_emb_base`), exact GELU, biases on every linear (q/k/v and the output projection as
//! `attention_bias` says), an untied head `embed_out`. q, k and v are fused in
//! `attention.query_key_value`, interleaved per head: transformers views its output as
//! `[pos, heads, 3·d_head]`, head h = `[q_h | k_h | v_h]`; it is split here on load, so the
//! trace shows the standard q, k and v. Names `gpt_neox.embed_in`,
//! `gpt_neox.layers.{i}.{input_layernorm, attention.{query_key_value, dense},
//! post_attention_layernorm, mlp.{dense_h_to_4h, dense_4h_to_h}}`, `gpt_neox.final_layer_norm`.

use super::blocks::norm;
use super::config::DecoderConfig;
use super::traits::{decoder_parts, Family};
use crate::config::{Parts, Positions};
use crate::error::usage;
use crate::params::{Block, Dense, Ffn, LayerNorm, LayerParams, Linear};
use crate::sources::store::TensorStore;
use anyhow::Result;
use candle_core::Tensor;

pub struct GptNeoX;

/// GPTNeoXConfig's defaults, which config.json leaves out when equal.
const ROTARY_PCT: f64 = 0.25;
const ROTARY_BASE: f64 = 10000.0;

impl GptNeoX {
    /// The rotary width: int(d_head · rotary_pct), as transformers computes `rotary_ndims`.
    fn rotary_dims(c: &DecoderConfig) -> usize {
        c.rotary_dims(c.rotary_pct.unwrap_or(ROTARY_PCT))
    }
}

impl Family for GptNeoX {
    fn model_type(&self) -> &'static str {
        "gpt_neox"
    }
    /// llama.cpp's converter keeps rotate_half's layout (its NEOX rotary): no Q/K permutation.
    fn gguf_arch(&self) -> Option<&'static str> {
        Some("gptneox")
    }
    fn partial_rotary(&self) -> bool {
        true
    }
    fn eps(&self, c: &DecoderConfig) -> f64 {
        c.layer_norm_eps.unwrap_or(1e-5)
    }
    fn default_activation(&self) -> &'static str {
        "gelu"
    }
    fn tied(&self, c: &DecoderConfig) -> bool {
        c.tie_word_embeddings.unwrap_or(false)
    }

    /// The rotary width must be an even number of dimensions within the head; the FFN's
    /// width must be stated (GPTNeoXConfig's default, 24576, is GPT-NeoX-20B's).
    fn check(&self, c: &DecoderConfig, what: &str) -> Result<()> {
        if c.intermediate_size.is_none() {
            let why = "config.json has no intermediate_size (GPT-NeoX's default, 24576, is the 20B model's)";
            return Err(usage(what, why, "restore the model's config.json"));
        }
        if let Some(p) = c.rotary_pct.filter(|p| !(p.is_finite() && *p > 0.0 && *p <= 1.0)) {
            let why = format!("config.json: rotary_pct is {p}; expected a fraction above 0, at most 1");
            return Err(usage(what, why, "restore the model's config.json"));
        }
        let (r, dh) = (Self::rotary_dims(c), c.d_head());
        if r == 0 || !r.is_multiple_of(2) || r > dh {
            let why = format!("config.json: rotary_pct turns {r} of the {dh} dimensions of each head; rotary positions turn pairs (expected an even number from 2 to {dh})");
            return Err(usage(what, why, "restore the model's config.json"));
        }
        Ok(())
    }

    fn parts(&self, c: &DecoderConfig, what: &str) -> Result<Parts> {
        let theta = c.rotary_emb_base.unwrap_or(ROTARY_BASE);
        Ok(Parts {
            rope: Some(super::rope::rotary(c, (theta, Self::rotary_dims(c)), what)?),
            parallel: c.use_parallel_residual.unwrap_or(true),
            ..decoder_parts(c)
        })
    }
    fn positions(&self) -> Positions {
        Positions::Rotary
    }
    fn ffn_bias(&self, _: &DecoderConfig) -> bool {
        true
    }
    fn layer_prefixes(&self) -> &'static [&'static str] {
        &["gpt_neox.layers."]
    }
    fn token_table(&self, _: &dyn TensorStore) -> String {
        "gpt_neox.embed_in.weight".into()
    }
    fn qk_names(&self) -> Option<[&'static str; 2]> {
        None // fused in query_key_value: its heads are checked through the token table's width
    }
    fn q_bias(&self, _: &dyn TensorStore) -> String {
        "gpt_neox.layers.0.attention.query_key_value.bias".into()
    }
    fn position_table(&self, _: &DecoderConfig, _: &dyn TensorStore) -> Result<Option<Tensor>> {
        Ok(None)
    }
    fn head_name(&self) -> &'static str {
        "embed_out.weight"
    }
    fn final_norm(&self, c: &DecoderConfig, store: &dyn TensorStore) -> Result<LayerNorm> {
        norm(store, "gpt_neox.final_layer_norm", c.hidden_size, true)
    }

    /// A GPT-NeoX block, its fused q/k/v split per head into the standard projections.
    fn layer(&self, c: &DecoderConfig, store: &dyn TensorStore, i: usize) -> Result<LayerParams> {
        let (d, ff, h, dh) = (c.hidden_size, c.d_ff(), c.num_attention_heads, c.d_head());
        let p = format!("gpt_neox.layers.{i}");
        // Every linear is biased but q/k/v and the output projection, as `attention_bias` says.
        let lin = |name: &str, (d_in, d_out): (usize, usize), biased: bool| -> Result<Linear> {
            let weight = store.get(&format!("{p}.{name}.weight"), &[d_out, d_in])?;
            let bias = if biased { Some(store.get(&format!("{p}.{name}.bias"), &[d_out])?) } else { None };
            Ok(Linear { weight, bias, ggml: store.ggml_input(&format!("{p}.{name}.weight"))?.map(std::sync::Arc::new) })
        };
        let attn_bias = c.attention_bias.unwrap_or(true);
        let fused = lin("attention.query_key_value", (d, 3 * h * dh), attn_bias)?; // weight [3·d, d]
                                                                                   // Rows viewed [head, (q, k, v), d_head]: part j of every head, heads in order.
        let part = |j: usize| -> Result<Linear> {
            let w = fused.weight.reshape((h, 3, dh, d))?.narrow(1, j, 1)?.contiguous()?.reshape((h * dh, d))?;
            let b = fused.bias.as_ref().map(|b| b.reshape((h, 3, dh))?.narrow(1, j, 1)?.contiguous()?.reshape(h * dh));
            // `--arithmetic ggml`: the input's form, and the same rows of Q4_1's block offsets
            // (the blocks themselves are not split: these products take the rounded input).
            let ggml = match &fused.ggml {
                Some(g) => {
                    let rows = |m: &Tensor| -> Result<Tensor> {
                        let nb = m.dim(1)?;
                        Ok(m.reshape((h, 3, dh, nb))?.narrow(1, j, 1)?.contiguous()?.reshape((h * dh, nb))?)
                    };
                    let mins = g.mins.as_ref().map(rows).transpose()?;
                    Some(std::sync::Arc::new(crate::params::GgmlInput {
                        form: g.form,
                        mins,
                        blocks: None,
                        kblocks: None,
                    }))
                }
                None => None,
            };
            Ok(Linear { weight: w, bias: b.transpose()?, ggml })
        };
        Ok(LayerParams {
            q_proj: part(0)?,
            k_proj: part(1)?,
            v_proj: part(2)?,
            out_proj: Some(lin("attention.dense", (h * dh, d), attn_bias)?),
            block: Some(Block {
                norm1: norm(store, &format!("{p}.input_layernorm"), d, true)?,
                ffn: Ffn::Dense(Dense {
                    linear1: lin("mlp.dense_h_to_4h", (d, ff), true)?,
                    linear2: lin("mlp.dense_4h_to_h", (ff, d), true)?,
                    gate: None,
                }),
                norm2: norm(store, &format!("{p}.post_attention_layernorm"), d, true)?,
                post_attn_norm: None,
                post_ffn_norm: None,
            }),
            qk_norm: None,
            cross: None,
        })
    }
}
