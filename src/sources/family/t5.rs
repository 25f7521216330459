//! T5 (Raffel et al. 2020) v1.0 and v1.1 / Flan-T5: a pre-norm block with T5's RMS
//! LayerNorm (no centring, no bias) and no bias anywhere, scores not scaled (the init folds
//! 1/√d in), a relative position bias from the first layer's table shared by the stack's
//! layers, a ReLU FFN (v1.0) or a gated GELU (v1.1: `gated-gelu`, tanh GELU), a final norm
//! per stack, and a head tied to the token table (v1.0: its input scaled by d_model^−0.5) or
//! its own (v1.1). Names: `shared`, `{encoder,decoder}.block.{i}.layer.{0,1,2}.…`,
//! `{stack}.final_layer_norm`, `lm_head`.

use super::seq2seq::{cross, linear, norm, required, EncoderDecoder, Seq2SeqConfig};
use crate::config::{Activation, InitConfig, LmHead, ModelConfig, Norm, Parts, Positions, RelBias};
use crate::error::usage;
use crate::params::{Block, Dense, Ffn, LayerParams, Layers, Linear, Params};
use crate::sources::store::TensorStore;
use crate::trace::steps::Stack;
use anyhow::Result;
use candle_core::Tensor;

pub struct T5;

/// `feed_forward_proj`: (gated, activation). transformers reads `gated-gelu` as the tanh GELU.
fn ffn_kind(c: &Seq2SeqConfig, what: &str) -> Result<(bool, Activation)> {
    let proj = c.feed_forward_proj.as_deref().unwrap_or("relu");
    let (gated, act) = match proj.strip_prefix("gated-") {
        Some(a) => (true, a),
        None => (false, proj),
    };
    let act = if gated && act == "gelu" { "gelu_new" } else { act };
    let act = super::blocks::activation_named(act).ok_or_else(|| {
        usage(
            what,
            format!("config.json: feed_forward_proj {proj:?} is not one attn-trace computes"),
            "use relu, gelu, gated-gelu or gated-silu",
        )
    })?;
    Ok((gated, act))
}

fn tied(c: &Seq2SeqConfig) -> bool {
    c.tie_word_embeddings.unwrap_or(true)
}

impl EncoderDecoder for T5 {
    fn model_type(&self) -> &'static str {
        "t5"
    }

    fn start_token(&self) -> &'static str {
        "<pad>"
    }

    fn block(&self, c: &Seq2SeqConfig, stack: Stack, what: &str) -> Result<ModelConfig> {
        let heads = required(c.num_heads, "num_heads", what)?;
        let d_kv = required(c.d_kv, "d_kv", what)?;
        let buckets = required(c.relative_attention_num_buckets, "relative_attention_num_buckets", what)?;
        let max_distance = c.relative_attention_max_distance.unwrap_or(128);
        let encoder_layers = required(c.num_layers, "num_layers", what)?;
        let decoder = stack == Stack::Decoder;
        let layers = if decoder { c.num_decoder_layers.unwrap_or(encoder_layers) } else { encoder_layers };
        let (gated, activation) = ffn_kind(c, what)?;
        let tied = tied(c);
        let parts = Parts {
            rms_norm: true,
            gated_ffn: gated,
            final_norm: true,
            relative_bias: Some(RelBias { buckets, max_distance, bidirectional: !decoder }),
            cross_attention: decoder,
            lm_head: decoder.then_some(LmHead { tied }),
            head_scale: (decoder && tied).then(|| (c.d_model as f64).powf(-0.5)),
            ..Default::default()
        };
        Ok(ModelConfig {
            d_model: c.d_model,
            heads,
            d_k: d_kv,
            d_v: d_kv,
            d_ff: required(c.d_ff, "d_ff", what)?,
            layers,
            vocab_size: c.vocab_size,
            // Relative positions have no table to run out of; the memory estimate bounds it.
            max_len: c.n_positions.unwrap_or(1 << 16).max(1 << 16),
            positions: Positions::None,
            causal: decoder,
            scale: 1.0,
            norm: Norm::Pre,
            activation,
            attn_bias: false,
            ffn_bias: false,
            eps: c.layer_norm_epsilon.unwrap_or(1e-6),
            raw_input: false,
            model: None,
            init: InitConfig::Given,
            interventions: Default::default(),
            parts,
        })
    }

    fn token_table(&self, cfg: &ModelConfig, store: &dyn TensorStore) -> Result<Tensor> {
        store.get("shared.weight", &[cfg.vocab_size, cfg.d_model])
    }

    fn layer(&self, cfg: &ModelConfig, store: &dyn TensorStore, (stack, i): (Stack, usize)) -> Result<LayerParams> {
        let s = if stack == Stack::Decoder { "decoder" } else { "encoder" };
        layer(cfg, store, &format!("{s}.block.{i}"))
    }

    fn params(
        &self,
        c: &Seq2SeqConfig,
        cfg: &ModelConfig,
        store: &dyn TensorStore,
        (stack, token): (Stack, &Tensor),
    ) -> Result<Params> {
        let (d, v) = (cfg.d_model, cfg.vocab_size);
        let s = if stack == Stack::Decoder { "decoder" } else { "encoder" };
        let token = token.clone();
        let table = format!("{s}.block.0.layer.0.SelfAttention.relative_attention_bias.weight");
        let buckets = cfg.parts.relative_bias.as_ref().map_or(0, |r| r.buckets);
        let lm_head = match (stack, tied(c)) {
            (Stack::Decoder, true) => Some(Linear { weight: token.clone(), bias: None, ggml: None }),
            (Stack::Decoder, false) => {
                Some(Linear { weight: store.get("lm_head.weight", &[v, d])?, bias: None, ggml: None })
            }
            _ => None,
        };
        Ok(Params {
            token: Some(token),
            token_rows: None,
            position: None,
            token_type: None,
            embed_norm: None,
            layers: Layers::Ready(Vec::new()),
            final_norm: Some(norm(store, &format!("{s}.final_layer_norm"), d, false)?),
            lm_head,
            mlm: None,
            stored: None,
            relative_bias: Some(store.get(&table, &[buckets, cfg.heads])?),
            decoder: None,
        })
    }
}

/// Block `p` (`encoder.block.3`): self-attention (`layer.0`), in the decoder the
/// cross-attention (`layer.1`), then the FFN (the last `layer.N`).
fn layer(cfg: &ModelConfig, store: &dyn TensorStore, p: &str) -> Result<LayerParams> {
    let (d, w) = (cfg.d_model, cfg.heads * cfg.d_k);
    let lin = |n: &str, dims| linear(store, &format!("{p}.{n}"), dims);
    let ff = if cfg.parts.cross_attention { 2 } else { 1 };
    let dense = format!("layer.{ff}.DenseReluDense");
    let ffn = if cfg.parts.gated_ffn {
        Dense {
            gate: Some(lin(&format!("{dense}.wi_0"), (d, cfg.d_ff))?),
            linear1: lin(&format!("{dense}.wi_1"), (d, cfg.d_ff))?,
            linear2: lin(&format!("{dense}.wo"), (cfg.d_ff, d))?,
        }
    } else {
        Dense {
            gate: None,
            linear1: lin(&format!("{dense}.wi"), (d, cfg.d_ff))?,
            linear2: lin(&format!("{dense}.wo"), (cfg.d_ff, d))?,
        }
    };
    let cross = if cfg.parts.cross_attention {
        let n = norm(store, &format!("{p}.layer.1.layer_norm"), d, false)?;
        Some(Box::new(cross(store, cfg, (&format!("{p}.layer.1.EncDecAttention"), ["q", "k", "v", "o"]), n)?))
    } else {
        None
    };
    Ok(LayerParams {
        q_proj: lin("layer.0.SelfAttention.q", (d, w))?,
        k_proj: lin("layer.0.SelfAttention.k", (d, w))?,
        v_proj: lin("layer.0.SelfAttention.v", (d, w))?,
        out_proj: Some(lin("layer.0.SelfAttention.o", (w, d))?),
        block: Some(Block {
            norm1: norm(store, &format!("{p}.layer.0.layer_norm"), d, false)?,
            ffn: Ffn::Dense(ffn),
            norm2: norm(store, &format!("{p}.layer.{ff}.layer_norm"), d, false)?,
            post_attn_norm: None,
            post_ffn_norm: None,
        }),
        qk_norm: None,
        cross,
    })
}
