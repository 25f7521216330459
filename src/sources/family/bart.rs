//! BART (Lewis et al. 2020): the original Transformer's post-norm block with biases
//! everywhere, GELU, learned positions whose table starts 2 rows in (BART's offset: row
//! p + 2 is position p), the token rows scaled by √d_model before the positions are added
//! when `scale_embedding`, a LayerNorm of the embedding sum (`layernorm_embedding`), no final
//! norm, and a head tied to the token table plus `final_logits_bias`. Names:
//! `model.shared`, `model.{encoder,decoder}.…` (`model.` absent in a bare `BartModel`),
//! `final_logits_bias`, `lm_head`.

use super::seq2seq::{cross, linear, norm, required, EncoderDecoder, Seq2SeqConfig};
use crate::config::{InitConfig, LmHead, ModelConfig, Norm, Parts, Positions};
use crate::error::usage;
use crate::params::{Block, Dense, Ffn, LayerParams, Layers, Linear, Params};
use crate::sources::store::TensorStore;
use crate::trace::steps::Stack;
use anyhow::Result;
use candle_core::Tensor;

pub struct Bart;

/// BART's learned positions start this many rows into the table (`BartLearnedPositionalEmbedding`).
const OFFSET: usize = 2;

impl EncoderDecoder for Bart {
    fn model_type(&self) -> &'static str {
        "bart"
    }

    fn start_token(&self) -> &'static str {
        "</s>"
    }

    fn block(&self, c: &Seq2SeqConfig, stack: Stack, what: &str) -> Result<ModelConfig> {
        if c.normalize_before == Some(true) || c.add_final_layer_norm == Some(true) {
            let why = "config.json: normalize_before/add_final_layer_norm make it an mBART-style pre-norm model";
            return Err(usage(what, why, "use a BART checkpoint (model_type bart, post-norm)"));
        }
        let decoder = stack == Stack::Decoder;
        let (layers, heads, d_ff) = if decoder {
            ("decoder_layers", c.decoder_attention_heads, c.decoder_ffn_dim)
        } else {
            ("encoder_layers", c.encoder_attention_heads, c.encoder_ffn_dim)
        };
        let layers = required(if decoder { c.decoder_layers } else { c.encoder_layers }, layers, what)?;
        let heads = required(heads, if decoder { "decoder_attention_heads" } else { "encoder_attention_heads" }, what)?;
        let d_ff = required(d_ff, if decoder { "decoder_ffn_dim" } else { "encoder_ffn_dim" }, what)?;
        if !c.d_model.is_multiple_of(heads) {
            let why = format!("config.json: d_model {} is not a multiple of {heads} heads", c.d_model);
            return Err(usage(what, why, "restore the model's config.json"));
        }
        let name = c.activation_function.as_deref().unwrap_or("gelu");
        let activation = super::blocks::activation_named(name).ok_or_else(|| {
            let why = format!("config.json: activation_function {name:?} is not one attn-trace computes");
            usage(what, why, "use gelu, relu, gelu_new or silu")
        })?;
        let max_len = required(c.max_position_embeddings, "max_position_embeddings", what)?;
        let parts = Parts {
            embed_scale: (c.scale_embedding == Some(true)).then(|| (c.d_model as f64).sqrt()),
            cross_attention: decoder,
            lm_head: decoder.then_some(LmHead { tied: c.tie_word_embeddings.unwrap_or(true) }),
            ..Default::default()
        };
        let d_head = c.d_model / heads;
        Ok(ModelConfig {
            d_model: c.d_model,
            heads,
            d_k: d_head,
            d_v: d_head,
            d_ff,
            layers,
            vocab_size: c.vocab_size,
            max_len,
            positions: Positions::Learned,
            causal: decoder,
            scale: (d_head as f64).powf(-0.5),
            norm: Norm::Post,
            activation,
            attn_bias: true,
            ffn_bias: true,
            eps: 1e-5,
            raw_input: false,
            model: None,
            init: InitConfig::Given,
            interventions: Default::default(),
            parts,
        })
    }

    fn token_table(&self, cfg: &ModelConfig, store: &dyn TensorStore) -> Result<Tensor> {
        store.get(&format!("{}shared.weight", prefix(store)), &[cfg.vocab_size, cfg.d_model])
    }

    fn layer(&self, cfg: &ModelConfig, store: &dyn TensorStore, (stack, i): (Stack, usize)) -> Result<LayerParams> {
        let s = if stack == Stack::Decoder { "decoder" } else { "encoder" };
        layer(cfg, store, &format!("{}{s}.layers.{i}", prefix(store)))
    }

    fn params(
        &self,
        _c: &Seq2SeqConfig,
        cfg: &ModelConfig,
        store: &dyn TensorStore,
        (stack, token): (Stack, &Tensor),
    ) -> Result<Params> {
        let (d, v) = (cfg.d_model, cfg.vocab_size);
        let s = if stack == Stack::Decoder { "decoder" } else { "encoder" };
        let m = prefix(store);
        let name = |n: &str| format!("{m}{n}");
        let token = token.clone();
        let table = store.get(&name(&format!("{s}.embed_positions.weight")), &[cfg.max_len + OFFSET, d])?;
        let lm_head = match (stack, cfg.parts.lm_head.as_ref().is_some_and(|h| h.tied)) {
            (Stack::Decoder, tied) => {
                let weight = if tied { token.clone() } else { store.get("lm_head.weight", &[v, d])? };
                let bias = if store.has("final_logits_bias") {
                    Some(store.get("final_logits_bias", &[1, v])?.reshape(v)?)
                } else {
                    None
                };
                Some(Linear { weight, bias, ggml: None })
            }
            _ => None,
        };
        Ok(Params {
            token: Some(token),
            token_rows: None,
            position: Some(table.narrow(0, OFFSET, cfg.max_len)?),
            token_type: None,
            embed_norm: Some(norm(store, &name(&format!("{s}.layernorm_embedding")), d, true)?),
            layers: Layers::Ready(Vec::new()),
            final_norm: None,
            lm_head,
            mlm: None,
            stored: None,
            relative_bias: None,
            decoder: None,
        })
    }
}

/// A BartForConditionalGeneration's names start `model.`; a bare BartModel's do not.
fn prefix(store: &dyn TensorStore) -> &'static str {
    if store.has("model.shared.weight") {
        "model."
    } else {
        ""
    }
}

/// Layer `p` (`model.encoder.layers.3`).
fn layer(cfg: &ModelConfig, store: &dyn TensorStore, p: &str) -> Result<LayerParams> {
    let (d, f) = (cfg.d_model, cfg.d_ff);
    let lin = |n: &str, dims| linear(store, &format!("{p}.{n}"), dims);
    let ln = |n: &str| norm(store, &format!("{p}.{n}"), d, true);
    let cross = if cfg.parts.cross_attention {
        let n = ln("encoder_attn_layer_norm")?;
        let names = ["q_proj", "k_proj", "v_proj", "out_proj"];
        Some(Box::new(cross(store, cfg, (&format!("{p}.encoder_attn"), names), n)?))
    } else {
        None
    };
    Ok(LayerParams {
        q_proj: lin("self_attn.q_proj", (d, d))?,
        k_proj: lin("self_attn.k_proj", (d, d))?,
        v_proj: lin("self_attn.v_proj", (d, d))?,
        out_proj: Some(lin("self_attn.out_proj", (d, d))?),
        block: Some(Block {
            norm1: ln("self_attn_layer_norm")?,
            ffn: Ffn::Dense(Dense { linear1: lin("fc1", (d, f))?, linear2: lin("fc2", (f, d))?, gate: None }),
            norm2: ln("final_layer_norm")?,
            post_attn_norm: None,
            post_ffn_norm: None,
        }),
        qk_norm: None,
        cross,
    })
}
