//! Decoder language models from Hugging Face folders: GPT-2 and the Llama family (Llama,
//! Qwen2, Mistral). One loader fills the block's options ([`crate::config::Parts`]) from
//! `config.json` and maps the checkpoint's names onto [`Params`]; the forward pass is the
//! same one every model runs.
//!
//! Weights: `model.safetensors`, shards named by `model.safetensors.index.json`, or
//! `pytorch_model.bin` (candle's pickle reader), in f32, f16 or bf16; the arithmetic is f32 on
//! the stored values. GPT-2's `Conv1D` weights are stored `[in, out]` and its q, k and v are
//! one fused `c_attn`: both are converted here, so the trace shows the standard layout.

use super::checkpoint::Checkpoint;
use crate::config::{Activation, LmHead, Parts, Rope};
use crate::error::usage;
use crate::params::{Block, LayerNorm, LayerParams, Layers, Linear, Params, RowReader};
use anyhow::Result;

use serde::Deserialize;

/// The families this loader reads.
pub const FAMILIES: &[&str] = &["gpt2", "llama", "qwen2", "mistral"];

/// `config.json` of a decoder, with GPT-2's names as aliases.
#[derive(Debug, Clone, Deserialize)]
pub struct DecoderConfig {
    pub model_type: String,
    pub vocab_size: usize,
    #[serde(alias = "n_embd")]
    pub hidden_size: usize,
    #[serde(alias = "n_layer")]
    pub num_hidden_layers: usize,
    #[serde(alias = "n_head")]
    pub num_attention_heads: usize,
    pub num_key_value_heads: Option<usize>,
    pub head_dim: Option<usize>,
    /// GPT-2's `n_inner` may be null: 4 × hidden.
    #[serde(alias = "n_inner")]
    pub intermediate_size: Option<usize>,
    #[serde(alias = "n_positions")]
    pub max_position_embeddings: usize,
    #[serde(alias = "activation_function")]
    pub hidden_act: Option<String>,
    pub rms_norm_eps: Option<f64>,
    pub layer_norm_epsilon: Option<f64>,
    pub rope_theta: Option<f64>,
    pub rope_scaling: Option<serde_json::Value>,
    pub attention_bias: Option<bool>,
    pub mlp_bias: Option<bool>,
    pub tie_word_embeddings: Option<bool>,
    pub sliding_window: Option<usize>,
    pub use_sliding_window: Option<bool>,
    pub scale_attn_by_inverse_layer_idx: Option<bool>,
    /// The pad token (`--pad-to`); without one, the end-of-sequence token pads, as
    /// `tokenizer.pad_token = tokenizer.eos_token` does for GPT-2 and Llama.
    pub pad_token_id: Option<u32>,
    /// One id, or a list (Llama 3): the first pads when there is no `pad_token_id`.
    pub eos_token_id: Option<serde_json::Value>,
    pub reorder_and_upcast_attn: Option<bool>,
}

impl DecoderConfig {
    pub fn is_gpt2(&self) -> bool {
        self.model_type == "gpt2"
    }

    pub fn d_head(&self) -> usize {
        self.head_dim.unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    pub fn kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    pub fn d_ff(&self) -> usize {
        self.intermediate_size.unwrap_or(4 * self.hidden_size)
    }

    pub fn eps(&self) -> f64 {
        if self.is_gpt2() {
            self.layer_norm_epsilon.unwrap_or(1e-5)
        } else {
            self.rms_norm_eps.unwrap_or(1e-6)
        }
    }

    /// Whether the head reuses the token table: GPT-2 always; others as the config says
    /// (transformers' default is tied).
    pub fn tied(&self) -> bool {
        self.is_gpt2() || self.tie_word_embeddings.unwrap_or(true)
    }

    /// Reads and checks `config.json`; `raw` is its parsed JSON.
    pub fn read(raw: serde_json::Value, what: &str) -> Result<DecoderConfig> {
        super::fields::check(&raw, super::fields::DECODER, what)?;
        let c: DecoderConfig = serde_json::from_value(raw).map_err(|e| {
            usage(what, format!("config.json: a field is missing or wrong: {e}"), "restore the model's config.json")
        })?;
        let zero = [
            ("hidden_size", c.hidden_size),
            ("num_hidden_layers", c.num_hidden_layers),
            ("num_attention_heads", c.num_attention_heads),
            ("vocab_size", c.vocab_size),
            ("max_position_embeddings", c.max_position_embeddings),
            ("num_key_value_heads", c.kv_heads()),
            ("head_dim", c.d_head()),
            ("intermediate_size", c.d_ff()),
        ];
        if let Some((k, _)) = zero.iter().find(|(_, v)| *v == 0) {
            return Err(usage(what, format!("config.json: {k} is 0"), "restore the model's config.json"));
        }
        let (h, kv) = (c.num_attention_heads, c.kv_heads());
        if !h.is_multiple_of(kv) {
            return Err(usage(
                what,
                format!("num_attention_heads {h} is not divisible by num_key_value_heads {kv}"),
                "restore the model's config.json",
            ));
        }
        if c.head_dim.is_none() && !c.hidden_size.is_multiple_of(h) {
            return Err(usage(
                what,
                format!("hidden_size {} is not divisible by {h} heads", c.hidden_size),
                "restore the model's config.json",
            ));
        }
        if !c.eps().is_finite() || c.eps() < 0.0 {
            return Err(usage(what, format!("the norm's eps {} is not finite and ≥ 0", c.eps()), "restore the config"));
        }
        c.check_positions(what)?;
        for (flag, on) in [
            ("scale_attn_by_inverse_layer_idx", c.scale_attn_by_inverse_layer_idx),
            ("reorder_and_upcast_attn", c.reorder_and_upcast_attn),
            ("use_sliding_window", c.use_sliding_window.filter(|_| c.model_type == "qwen2")),
        ] {
            if on == Some(true) {
                return Err(usage(what, format!("{flag} is not supported"), "use a model without it"));
            }
        }
        Ok(c)
    }

    /// The rotary base, the head width rotary positions turn in pairs, Mistral's window.
    fn check_positions(&self, what: &str) -> Result<()> {
        let restore = "restore the model's config.json";
        if let Some(t) = self.rope_theta.filter(|t| !t.is_finite() || *t <= 0.0) {
            return Err(usage(what, format!("config.json: rope_theta is {t}; expected a number above 0"), restore));
        }
        if !self.is_gpt2() && !self.d_head().is_multiple_of(2) {
            let why = format!("the heads are {} wide, an odd width; rotary positions turn pairs", self.d_head());
            return Err(usage(what, why, "restore head_dim, or hidden_size / num_attention_heads, to an even width"));
        }
        if self.sliding_window == Some(0) && self.model_type == "mistral" {
            let why = "config.json: sliding_window is 0; expected a window of at least 1 token (or null for none)";
            return Err(usage(what, why, restore));
        }
        Ok(())
    }

    /// The activation `hidden_act` names.
    pub fn activation(&self, what: &str) -> Result<Activation> {
        let name = self.hidden_act.clone().unwrap_or_else(|| if self.is_gpt2() { "gelu_new" } else { "silu" }.into());
        match name.as_str() {
            "silu" | "swish" => Ok(Activation::Silu),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(Activation::GeluTanh),
            "gelu" => Ok(Activation::Gelu),
            "relu" => Ok(Activation::Relu),
            other => Err(usage(
                what,
                format!("activation {other:?} is not supported"),
                "use a model with silu, gelu, gelu_new or relu",
            )),
        }
    }

    /// The block's options for this family.
    pub fn parts(&self, what: &str) -> Result<Parts> {
        let (h, kv) = (self.num_attention_heads, self.kv_heads());
        Ok(Parts {
            rms_norm: !self.is_gpt2(),
            kv_heads: (kv != h).then_some(kv),
            kv_head_of_query_head: (kv != h).then(|| (0..h).map(|q| q / (h / kv)).collect()),
            rope: if self.is_gpt2() { None } else { Some(self.rope(what)?) },
            gated_ffn: !self.is_gpt2(),
            // Mistral's window; Qwen2's only with use_sliding_window (refused above).
            window: self.sliding_window.filter(|_| self.model_type == "mistral"),
            attn_out_bias: (self.model_type == "qwen2").then_some(false),
            final_norm: true,
            lm_head: Some(LmHead { tied: self.tied() }),
            padding: None,
            masked_lm: false,
            layer_at_a_time: true,
            ..Default::default()
        })
    }

    /// Rotary frequencies, as transformers' `ROPE_INIT_FUNCTIONS` compute them: the default
    /// θ^(−2i/d), divided by `factor` for `linear`, or Llama 3's smooth per-wavelength scaling.
    fn rope(&self, what: &str) -> Result<Rope> {
        let theta = self.rope_theta.unwrap_or(10000.0);
        let d = self.d_head();
        let base = Rope::plain(theta, d).inv_freq;
        let Some(scaling) = self.rope_scaling.as_ref().filter(|v| !v.is_null()) else {
            return Ok(Rope { theta, scaling: None, inv_freq: base });
        };
        let kind = scaling["rope_type"].as_str().or(scaling["type"].as_str()).unwrap_or("?").to_string();
        let num = |k: &str| scaling[k].as_f64();
        let inv_freq = match kind.as_str() {
            "default" => base,
            "linear" => {
                let f =
                    num("factor").filter(|f| *f > 0.0).ok_or_else(|| bad_scaling(what, "linear needs factor > 0"))?;
                base.iter().map(|x| ((*x as f32) / f as f32) as f64).collect()
            }
            "llama3" => llama3(&base, scaling).ok_or_else(|| {
                bad_scaling(
                    what,
                    "llama3 needs factor, low_freq_factor, high_freq_factor and original_max_position_embeddings",
                )
            })?,
            other => {
                return Err(usage(
                    what,
                    format!("rope_scaling type {other:?} is not supported"),
                    "use a model with no rope_scaling, or linear or llama3",
                ))
            }
        };
        Ok(Rope { theta, scaling: Some(kind), inv_freq })
    }
}

fn bad_scaling(what: &str, why: &str) -> anyhow::Error {
    usage(what, format!("rope_scaling: {why}"), "restore the model's config.json")
}

/// Llama 3's frequency scaling (transformers' `_compute_llama3_parameters`), in f32.
fn llama3(base: &[f64], s: &serde_json::Value) -> Option<Vec<f64>> {
    let f = |k: &str| s[k].as_f64().map(|v| v as f32);
    let (factor, low, high, old) =
        (f("factor")?, f("low_freq_factor")?, f("high_freq_factor")?, f("original_max_position_embeddings")?);
    if factor <= 0.0 || high <= low {
        return None;
    }
    let (low_wavelen, high_wavelen) = (old / low, old / high);
    Some(
        base.iter()
            .map(|&x| {
                let x = x as f32;
                let wavelen = 2.0 * std::f32::consts::PI / x;
                let scaled = if wavelen > low_wavelen { x / factor } else { x };
                let smooth = (old / wavelen - low) / (high - low);
                let smoothed = (1.0 - smooth) * scaled / factor + smooth * scaled;
                // transformers' `~(wavelen < high) * ~(wavelen > low)`, i.e. high ≤ wavelen ≤ low.
                let medium = (high_wavelen..=low_wavelen).contains(&wavelen);
                (if medium { smoothed } else { scaled }) as f64
            })
            .collect(),
    )
}

/// The token table's name: GPT2LMHeadModel saves `transformer.wte.weight`, GPT2Model
/// `wte.weight`.
pub fn token_table(c: &DecoderConfig, ck: &Checkpoint) -> String {
    if c.is_gpt2() {
        ck.prefixed(&["transformer.", ""], "wte.weight")
    } else {
        "model.embed_tokens.weight".into()
    }
}

/// Every parameter of the decoder, by the family's checkpoint names. `ids` are the input's
/// token ids (their rows of the token table are the embeddings).
/// The layers stay in the checkpoint (memory-mapped, in their stored type) and are read and
/// converted to f32 one at a time as the forward pass reaches them; layer 0 is read here, so
/// that a checkpoint with the wrong names or shapes is refused before anything runs, and kept
/// for the forward pass.
pub fn params(c: DecoderConfig, ck: Checkpoint) -> Result<Params> {
    let both = std::sync::Arc::new((c, ck));
    let (c, ck) = (&both.0, &both.1);
    let (d, layers) = (c.hidden_size, c.num_hidden_layers);
    // GPT2LMHeadModel saves `transformer.wte.weight`, GPT2Model `wte.weight`.
    let pre = if c.is_gpt2() && ck.has("transformer.wte.weight") { "transformer." } else { "" };
    let p = |name: &str| format!("{pre}{name}");
    let token_name = token_table(c, ck);
    let reader = |name: &str| {
        let (owner, owned) = (both.clone(), name.to_string());
        RowReader::shared(name, (c.vocab_size, d), move |start, len| owner.1.rows(&owned, start, len))
    };
    let stored = super::stored::tables(ck, ([c.vocab_size, d], c.tied()), &token_name, reader)?;
    // Otherwise the whole table stays (the head of a tied model is the same tensor): a
    // patching sweep embeds a second input with it.
    let token = if stored.is_some() { None } else { Some(ck.get(&token_name, &[c.vocab_size, d])?) };
    let position = if c.is_gpt2() { Some(ck.get(&p("wpe.weight"), &[c.max_position_embeddings, d])?) } else { None };
    let pre = pre.to_string();
    let shared = both.clone();
    let load = move |i: usize| -> Result<LayerParams> {
        let (c, ck) = (&shared.0, &shared.1);
        if c.is_gpt2() {
            gpt2_layer(c, ck, &format!("{pre}h.{i}"))
        } else {
            llama_layer(c, ck, i)
        }
    };
    let first = load(0)?;
    let final_norm = if c.is_gpt2() { norm(ck, &p("ln_f"), d, true)? } else { norm(ck, "model.norm", d, false)? };
    let head = match (&stored, &token) {
        (None, Some(token)) if c.tied() => Some(token.clone()),
        (None, _) => Some(ck.get("lm_head.weight", &[c.vocab_size, d]).map_err(|_| super::stored::no_head(ck))?),
        (Some(_), _) => None,
    };
    Ok(Params {
        token,
        token_rows: None,
        position,
        token_type: None,
        embed_norm: None,
        layers: Layers::lazy(layers, std::sync::Arc::new(load), first),
        final_norm: Some(final_norm),
        lm_head: head.map(|weight| Linear { weight, bias: None }),
        mlm: None,
        stored,
    })
}

fn norm(ck: &Checkpoint, prefix: &str, d: usize, bias: bool) -> Result<LayerNorm> {
    Ok(LayerNorm {
        weight: ck.get(&format!("{prefix}.weight"), &[d])?,
        bias: if bias { Some(ck.get(&format!("{prefix}.bias"), &[d])?) } else { None },
    })
}

/// A Llama-family layer: `model.layers.{i}.self_attn.{q,k,v,o}_proj`, `mlp.{gate,up,down}_proj`,
/// `input_layernorm`, `post_attention_layernorm`; biases where the checkpoint has them.
fn llama_layer(c: &DecoderConfig, ck: &Checkpoint, i: usize) -> Result<LayerParams> {
    let (d, ff, dh) = (c.hidden_size, c.d_ff(), c.d_head());
    let (qw, kvw) = (c.num_attention_heads * dh, c.kv_heads() * dh);
    let p = format!("model.layers.{i}");
    let lin = |name: &str, d_in: usize, d_out: usize| -> Result<Linear> {
        let full = format!("{p}.{name}");
        Ok(Linear {
            weight: ck.get(&format!("{full}.weight"), &[d_out, d_in])?,
            bias: ck.has(&format!("{full}.bias")).then(|| ck.get(&format!("{full}.bias"), &[d_out])).transpose()?,
        })
    };
    Ok(LayerParams {
        q_proj: lin("self_attn.q_proj", d, qw)?,
        k_proj: lin("self_attn.k_proj", d, kvw)?,
        v_proj: lin("self_attn.v_proj", d, kvw)?,
        out_proj: Some(lin("self_attn.o_proj", qw, d)?),
        block: Some(Block {
            norm1: norm(ck, &format!("{p}.input_layernorm"), d, false)?,
            linear1: lin("mlp.up_proj", d, ff)?,
            linear2: lin("mlp.down_proj", ff, d)?,
            norm2: norm(ck, &format!("{p}.post_attention_layernorm"), d, false)?,
            gate: Some(lin("mlp.gate_proj", d, ff)?),
        }),
    })
}

/// A GPT-2 block: `Conv1D` weights are `[in, out]`, and `c_attn` holds q, k and v side by side
/// in its output columns. The weights stay in their stored layout: `Linear.weight` is a
/// transposed view, which the matrix product reads through its strides, because copying them
/// into `[out, in]` cost a fifth of a GPT-2 trace's time.
fn gpt2_layer(c: &DecoderConfig, ck: &Checkpoint, p: &str) -> Result<LayerParams> {
    let (d, ff) = (c.hidden_size, c.d_ff());
    let conv = |name: &str, d_in: usize, d_out: usize| -> Result<Linear> {
        let w = ck.get(&format!("{p}.{name}.weight"), &[d_in, d_out])?;
        Ok(Linear { weight: w.t()?, bias: Some(ck.get(&format!("{p}.{name}.bias"), &[d_out])?) })
    };
    let fused = conv("attn.c_attn", d, 3 * d)?; // weight [3·d, d], bias [3·d]
    let third = |i: usize| -> Result<Linear> {
        Ok(Linear {
            weight: fused.weight.narrow(0, i * d, d)?,
            bias: fused.bias.as_ref().map(|b| b.narrow(0, i * d, d)).transpose()?,
        })
    };
    Ok(LayerParams {
        q_proj: third(0)?,
        k_proj: third(1)?,
        v_proj: third(2)?,
        out_proj: Some(conv("attn.c_proj", d, d)?),
        block: Some(Block {
            norm1: norm(ck, &format!("{p}.ln_1"), d, true)?,
            linear1: conv("mlp.c_fc", d, ff)?,
            linear2: conv("mlp.c_proj", ff, d)?,
            norm2: norm(ck, &format!("{p}.ln_2"), d, true)?,
            gate: None,
        }),
    })
}
