//! The Gemma family: Gemma 2 (`gemma2`, transformers' Gemma2ForCausalLM) and Gemma 3's text
//! model (`gemma3_text`, Gemma3ForCausalLM), two values of one struct. Against Llama's block:
//!
//! - sandwich norms: each sublayer's output is normed before its residual sum
//!   (`post_attention_layernorm` after the attention, as `Block.post_attn_norm`;
//!   `pre_feedforward_layernorm` before the FFN, as `norm2`; `post_feedforward_layernorm`);
//! - RMSNorm computes x̂·(1 + w): the `1 +` is folded into every norm weight here, once, so the
//!   block's RMSNorm is Llama's (a GGUF file holds the weights with the 1 added already);
//! - GeGLU: the gated FFN with the tanh GELU (`hidden_activation`);
//! - the embeddings times √d_model (an f32, as transformers computes it in f32);
//! - scores scaled by `query_pre_attn_scalar^-½`, not 1/√d_head;
//! - a sliding window on the local layers: Gemma 2's even layers, Gemma 3's all but every
//!   `sliding_window_pattern`-th (or as `layer_types` lists them);
//! - Gemma 2: attention logits and final logits soft-capped (`cap · tanh(x / cap)`);
//! - Gemma 3: q and k RMS-normed per head (`self_attn.{q,k}_norm`), and the local layers'
//!   positions turn by `rope_local_base_freq`, never scaled; `rope_scaling` is the global
//!   layers'.

use super::blocks::norm;
use super::config::DecoderConfig;
use super::traits::{decoder_parts, Family, GgufKey, GgufKind};
use crate::config::{Parts, Positions, Rope};
use crate::error::usage;
use crate::params::{Block, Dense, Ffn, LayerNorm, LayerParams, QkNorm};
use crate::sources::store::TensorStore;
use anyhow::Result;
use candle_core::Tensor;

/// A Gemma generation.
pub struct Gemma {
    model_type: &'static str,
    gguf: &'static str,
    /// Gemma 3: q/k norms, a local rotary base, `sliding_window_pattern`.
    three: bool,
    /// llama.cpp's layer count of the 27B model, whose scale is (hidden / heads)^-½ rather
    /// than head_dim^-½: its GGUF metadata has no `query_pre_attn_scalar`.
    gguf_27b_layers: u64,
}

pub static GEMMA2: Gemma = Gemma { model_type: "gemma2", gguf: "gemma2", three: false, gguf_27b_layers: 46 };
pub static GEMMA3: Gemma = Gemma { model_type: "gemma3_text", gguf: "gemma3", three: true, gguf_27b_layers: 62 };

/// Keys transformers writes into every Gemma 2 config.json; their class defaults (a 2B
/// model's) would trace another model than the one in the folder.
const GEMMA2_KEYS: &[&str] =
    &["head_dim", "query_pre_attn_scalar", "sliding_window", "attn_logit_softcapping", "final_logit_softcapping"];
const GEMMA3_KEYS: &[&str] =
    &["head_dim", "query_pre_attn_scalar", "sliding_window", "rope_theta", "rope_local_base_freq"];

/// The GGUF metadata both generations read (llama.cpp's converter writes them).
const GGUF2: &[GgufKey] = &[
    GgufKey { key: "attention.key_length", field: "head_dim", kind: GgufKind::Count, required: true },
    GgufKey { key: "attention.sliding_window", field: "sliding_window", kind: GgufKind::Count, required: true },
    GgufKey {
        key: "attn_logit_softcapping",
        field: "attn_logit_softcapping",
        kind: GgufKind::Positive,
        required: true,
    },
    GgufKey {
        key: "final_logit_softcapping",
        field: "final_logit_softcapping",
        kind: GgufKind::Positive,
        required: true,
    },
];
/// Gemma 3 has no soft-caps (llama.cpp reads a final one if present).
const GGUF3: &[GgufKey] = &[
    GgufKey { key: "attention.key_length", field: "head_dim", kind: GgufKind::Count, required: true },
    GgufKey { key: "attention.sliding_window", field: "sliding_window", kind: GgufKind::Count, required: true },
    GgufKey {
        key: "final_logit_softcapping",
        field: "final_logit_softcapping",
        kind: GgufKind::Positive,
        required: false,
    },
];

fn bad(what: &str, why: String) -> anyhow::Error {
    usage(what, why, "restore the model's config.json")
}

impl Gemma {
    /// Which layers are local (sliding-window): `layer_types` where the config lists them,
    /// else Gemma 2's even layers (transformers 4.46: `not layer_idx % 2`) or Gemma 3's
    /// `(i + 1) % sliding_window_pattern != 0`.
    fn local_layers(&self, c: &DecoderConfig, what: &str) -> Result<Vec<bool>> {
        let n = c.num_hidden_layers;
        if let Some(types) = &c.layer_types {
            if types.len() != n {
                return Err(bad(what, format!("config.json: layer_types lists {} layers, not {n}", types.len())));
            }
            return types
                .iter()
                .map(|t| match t.as_str() {
                    "sliding_attention" => Ok(true),
                    "full_attention" => Ok(false),
                    other => Err(bad(
                        what,
                        format!(
                            "config.json: layer_types holds {other:?}; expected sliding_attention or full_attention"
                        ),
                    )),
                })
                .collect();
        }
        let pattern = match (self.three, c.sliding_window_pattern) {
            (false, _) => 2,
            (true, Some(p)) if p >= 1 => p,
            (true, Some(_)) => return Err(bad(what, "config.json: sliding_window_pattern is 0".into())),
            (true, None) => {
                let why = format!(
                    "config.json has no sliding_window_pattern (or layer_types), which {} needs",
                    self.model_type
                );
                return Err(bad(what, why));
            }
        };
        Ok((0..n).map(|i| (i + 1) % pattern != 0).collect())
    }

    /// A norm's weight as the block's RMSNorm applies it: `1 + w` (transformers'
    /// `Gemma*RMSNorm` multiplies by `1.0 + weight.float()`), in f32; a GGUF file's already is.
    fn norm(&self, store: &dyn TensorStore, prefix: &str, d: usize) -> Result<LayerNorm> {
        let stored = norm(store, prefix, d, false)?;
        if store.is_gguf() {
            return Ok(stored);
        }
        Ok(LayerNorm { weight: stored.weight.affine(1.0, 1.0)?, bias: None })
    }
}

impl Family for Gemma {
    fn model_type(&self) -> &'static str {
        self.model_type
    }
    fn gguf_arch(&self) -> Option<&'static str> {
        Some(self.gguf)
    }
    fn required(&self) -> &'static [&'static str] {
        if self.three {
            GEMMA3_KEYS
        } else {
            GEMMA2_KEYS
        }
    }
    /// `query_pre_attn_scalar^-½`, as transformers' `config.query_pre_attn_scalar**-0.5`.
    fn attn_scale(&self, c: &DecoderConfig) -> Option<f64> {
        c.query_pre_attn_scalar.map(|s| s.powf(-0.5))
    }
    fn gguf_layer_names(&self) -> &'static [(&'static str, &'static str)] {
        crate::sources::gguf_names::SANDWICH
    }
    fn gguf_keys(&self) -> &'static [GgufKey] {
        if self.three {
            GGUF3
        } else {
            GGUF2
        }
    }
    fn gguf_rope_scaling(&self) -> bool {
        self.three
    }
    /// What llama.cpp's `llama_model::load_hparams` fixes for these architectures instead of
    /// reading it: the scale's `query_pre_attn_scalar` (hidden / heads for the 27B model,
    /// known by its layer count, else the head width), Gemma 3's five local layers to one
    /// global, and its local rotary base 10,000 (not stored in the file; transformers'
    /// `rope_local_base_freq` default is the same).
    fn gguf_fixed(&self, raw: &serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        let n = |k: &str| raw[k].as_u64().unwrap_or(0);
        let scalar = if n("num_hidden_layers") == self.gguf_27b_layers {
            n("hidden_size") / n("num_attention_heads").max(1)
        } else {
            n("head_dim")
        };
        let mut out = serde_json::Map::new();
        out.insert("query_pre_attn_scalar".into(), scalar.into());
        if self.three {
            out.insert("sliding_window_pattern".into(), 6.into());
            out.insert("rope_local_base_freq".into(), 10000.0.into());
        }
        out
    }
    fn eps(&self, c: &DecoderConfig) -> f64 {
        c.rms_norm_eps.unwrap_or(1e-6)
    }
    fn default_activation(&self) -> &'static str {
        "gelu_pytorch_tanh"
    }
    fn tied(&self, c: &DecoderConfig) -> bool {
        c.tie_word_embeddings.unwrap_or(true)
    }

    /// Values the arithmetic cannot take (a window or cap of 0), and what transformers'
    /// versions disagree on: Gemma 3's `attn_logit_softcapping` (4.50–4.51 never apply it,
    /// later versions do) and Gemma 2's `rope_scaling` (4.46 ignores it).
    fn check(&self, c: &DecoderConfig, what: &str) -> Result<()> {
        if !c.d_head().is_multiple_of(2) {
            return Err(bad(
                what,
                format!("config.json: head_dim is {}, an odd width; rotary positions turn pairs", c.d_head()),
            ));
        }
        if c.sliding_window == Some(0) {
            return Err(bad(what, "config.json: sliding_window is 0; expected a window of at least 1 token".into()));
        }
        let positive = [
            ("query_pre_attn_scalar", c.query_pre_attn_scalar),
            ("attn_logit_softcapping", c.attn_logit_softcapping),
            ("final_logit_softcapping", c.final_logit_softcapping),
            ("rope_local_base_freq", c.rope_local_base_freq),
        ];
        if let Some((k, v)) =
            positive.iter().find_map(|(k, v)| v.filter(|v| !v.is_finite() || *v <= 0.0).map(|v| (k, v)))
        {
            return Err(bad(what, format!("config.json: {k} is {v}; expected a number above 0")));
        }
        if self.three && c.attn_logit_softcapping.is_some() {
            let why = "config.json: attn_logit_softcapping is set; transformers 4.50–4.51 ignore it for Gemma 3 \
                       and later versions apply it, so its trace is not defined";
            return Err(usage(what, why, "set it to null, as Gemma 3's own configs do"));
        }
        if !self.three && c.rope_scaling.as_ref().is_some_and(|v| !v.is_null()) {
            let why = "config.json: rope_scaling is set; transformers 4.46 ignores it for Gemma 2";
            return Err(usage(what, why, "set it to null, as Gemma 2's own configs do"));
        }
        self.local_layers(c, what).map(|_| ())
    }

    fn parts(&self, c: &DecoderConfig, what: &str) -> Result<Parts> {
        let rope = super::rope::rope(c, what)?;
        // Gemma 3's local layers: their own base, "default" rotary whatever `rope_scaling` says.
        let rope_local = match (self.three, c.rope_local_base_freq) {
            (true, Some(base)) => Some(Rope::plain(base, c.d_head())),
            _ => None,
        };
        Ok(Parts {
            rms_norm: true,
            rope: Some(rope),
            gated_ffn: true,
            window: c.sliding_window,
            local_layers: Some(self.local_layers(c, what)?),
            rope_local,
            qk_norm: self.three,
            sandwich_norms: true,
            attn_softcap: c.attn_logit_softcapping.filter(|_| !self.three),
            final_softcap: c.final_logit_softcapping,
            // transformers casts √hidden_size to the embeddings' dtype: f32 when it computes in
            // f32, as attn-trace does on any stored type (a bf16 run would use √640 ≈ 25.25).
            embed_scale: Some((c.hidden_size as f64).sqrt() as f32 as f64),
            ..decoder_parts(c)
        })
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
        Some(["model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight"])
    }
    fn q_bias(&self, _: &dyn TensorStore) -> String {
        "model.layers.0.self_attn.q_proj.bias".into()
    }
    fn position_table(&self, _: &DecoderConfig, _: &dyn TensorStore) -> Result<Option<Tensor>> {
        Ok(None)
    }
    fn final_norm(&self, c: &DecoderConfig, store: &dyn TensorStore) -> Result<LayerNorm> {
        self.norm(store, "model.norm", c.hidden_size)
    }

    fn layer(&self, c: &DecoderConfig, store: &dyn TensorStore, i: usize) -> Result<LayerParams> {
        let (d, ff, dh) = (c.hidden_size, c.d_ff(), c.d_head());
        let (qw, kvw) = (c.num_attention_heads * dh, c.kv_heads() * dh);
        let p = format!("model.layers.{i}");
        let lin =
            |name: &str, d_in: usize, d_out: usize| super::blocks::linear(store, &format!("{p}.{name}"), (d_in, d_out));
        let norm = |name: &str, width: usize| self.norm(store, &format!("{p}.{name}"), width);
        Ok(LayerParams {
            q_proj: lin("self_attn.q_proj", d, qw)?,
            k_proj: lin("self_attn.k_proj", d, kvw)?,
            v_proj: lin("self_attn.v_proj", d, kvw)?,
            out_proj: Some(lin("self_attn.o_proj", qw, d)?),
            block: Some(Block {
                norm1: norm("input_layernorm", d)?,
                ffn: Ffn::Dense(Dense {
                    linear1: lin("mlp.up_proj", d, ff)?,
                    linear2: lin("mlp.down_proj", ff, d)?,
                    gate: Some(lin("mlp.gate_proj", d, ff)?),
                }),
                norm2: norm("pre_feedforward_layernorm", d)?,
                post_attn_norm: Some(norm("post_attention_layernorm", d)?),
                post_ffn_norm: Some(norm("post_feedforward_layernorm", d)?),
            }),
            qk_norm: if self.three {
                Some(QkNorm { q: norm("self_attn.q_norm", dh)?, k: norm("self_attn.k_norm", dh)? })
            } else {
                None
            },
            cross: None,
        })
    }
}
