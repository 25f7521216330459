//! GPT-2 (`gpt2`): pre-norm LayerNorm with biases, learned positions (`wpe`), GELU (tanh),
//! a tied head, and `Conv1D` weights stored `[in, out]` with q, k and v fused in one
//! `c_attn`. `GPT2LMHeadModel` names its tensors `transformer.…`, `GPT2Model` without it.

use super::blocks::norm;
use super::config::DecoderConfig;
use super::traits::{decoder_parts, Family};
use crate::config::{Parts, Positions};
use crate::params::{Block, Dense, Ffn, LayerNorm, LayerParams, Linear};
use crate::sources::store::TensorStore;
use anyhow::Result;
use candle_core::Tensor;

pub struct Gpt2;

/// `transformer.` when the checkpoint is a `GPT2LMHeadModel`'s.
fn prefix(store: &dyn TensorStore) -> &'static str {
    if store.has("transformer.wte.weight") {
        "transformer."
    } else {
        ""
    }
}

impl Family for Gpt2 {
    fn model_type(&self) -> &'static str {
        "gpt2"
    }
    fn eps(&self, c: &DecoderConfig) -> f64 {
        c.layer_norm_epsilon.unwrap_or(1e-5)
    }
    fn default_activation(&self) -> &'static str {
        "gelu_new"
    }
    fn tied(&self, _: &DecoderConfig) -> bool {
        true
    }
    fn check(&self, _: &DecoderConfig, _: &str) -> Result<()> {
        Ok(())
    }
    fn parts(&self, c: &DecoderConfig, _: &str) -> Result<Parts> {
        Ok(decoder_parts(c))
    }
    fn positions(&self) -> Positions {
        Positions::Learned
    }
    fn ffn_bias(&self, _: &DecoderConfig) -> bool {
        true
    }
    fn layer_prefixes(&self) -> &'static [&'static str] {
        &["h.", "transformer.h."]
    }
    fn token_table(&self, store: &dyn TensorStore) -> String {
        store.prefixed(&["transformer.", ""], "wte.weight")
    }
    fn qk_names(&self) -> Option<[&'static str; 2]> {
        None // fused in c_attn: its heads are checked through the token table's width
    }
    fn q_bias(&self, store: &dyn TensorStore) -> String {
        store.prefixed(&["transformer.", ""], "h.0.attn.c_attn.bias")
    }
    fn position_table(&self, c: &DecoderConfig, store: &dyn TensorStore) -> Result<Option<Tensor>> {
        let name = format!("{}wpe.weight", prefix(store));
        Ok(Some(store.get(&name, &[c.max_position_embeddings, c.hidden_size])?))
    }
    fn final_norm(&self, c: &DecoderConfig, store: &dyn TensorStore) -> Result<LayerNorm> {
        norm(store, &format!("{}ln_f", prefix(store)), c.hidden_size, true)
    }

    /// A GPT-2 block: `Conv1D` weights are `[in, out]`, and `c_attn` holds q, k and v side by
    /// side in its output columns. The weights stay in their stored layout: `Linear.weight` is
    /// a transposed view, which the matrix product reads through its strides, because copying
    /// them into `[out, in]` cost a fifth of a GPT-2 trace's time.
    fn layer(&self, c: &DecoderConfig, store: &dyn TensorStore, i: usize) -> Result<LayerParams> {
        let (d, ff) = (c.hidden_size, c.d_ff());
        let p = format!("{}h.{i}", prefix(store));
        let conv = |name: &str, d_in: usize, d_out: usize| -> Result<Linear> {
            let w = store.get(&format!("{p}.{name}.weight"), &[d_in, d_out])?;
            Ok(Linear { weight: w.t()?, bias: Some(store.get(&format!("{p}.{name}.bias"), &[d_out])?), ggml: None })
        };
        let fused = conv("attn.c_attn", d, 3 * d)?; // weight [3·d, d], bias [3·d]
        let third = |i: usize| -> Result<Linear> {
            Ok(Linear {
                weight: fused.weight.narrow(0, i * d, d)?,
                bias: fused.bias.as_ref().map(|b| b.narrow(0, i * d, d)).transpose()?,
                ggml: None,
            })
        };
        Ok(LayerParams {
            q_proj: third(0)?,
            k_proj: third(1)?,
            v_proj: third(2)?,
            out_proj: Some(conv("attn.c_proj", d, d)?),
            block: Some(Block {
                norm1: norm(store, &format!("{p}.ln_1"), d, true)?,
                ffn: Ffn::Dense(Dense {
                    linear1: conv("mlp.c_fc", d, ff)?,
                    linear2: conv("mlp.c_proj", ff, d)?,
                    gate: None,
                }),
                norm2: norm(store, &format!("{p}.ln_2"), d, true)?,
                post_attn_norm: None,
                post_ffn_norm: None,
            }),
            qk_norm: None,
            cross: None,
        })
    }
}
