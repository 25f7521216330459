//! A decoder's `config.json` (or a GGUF file's metadata read as one), checked, and the
//! decoder's [`Params`] built by its family's names from a [`TensorStore`].
//!
//! Weights: `model.safetensors`, shards named by `model.safetensors.index.json`,
//! `pytorch_model.bin` (our own pickle reader) or a GGUF file, in f32, f16, bf16 or any type
//! candle dequantizes; the arithmetic is f32 on the stored values.

use super::config::DecoderConfig;
use super::traits::Family;
use crate::config::Activation;
use crate::error::usage;
use crate::params::{Layers, Linear, Params, RowReader, Stored, StoredRows};
use crate::sources::store::TensorStore;
use anyhow::Result;
use std::sync::Arc;

impl DecoderConfig {
    /// The config's family. `read` refused any `model_type` without one.
    pub fn family(&self) -> &'static dyn Family {
        super::registry::decoder(&self.model_type).unwrap_or(super::registry::DECODERS[0])
    }

    pub fn d_head(&self) -> usize {
        self.head_dim.unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    pub fn kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    /// The rotary width of a head whose `fraction` turns (int(d_head · fraction), as
    /// transformers computes it), unless a GGUF file states it.
    pub fn rotary_dims(&self, fraction: f64) -> usize {
        self.rope_dims.unwrap_or((self.d_head() as f64 * fraction) as usize)
    }

    pub fn d_ff(&self) -> usize {
        self.intermediate_size.unwrap_or(4 * self.hidden_size)
    }

    pub fn eps(&self) -> f64 {
        self.family().eps(self)
    }

    /// Whether the head reuses the token table.
    pub fn tied(&self) -> bool {
        self.family().tied(self)
    }

    /// Reads and checks `config.json`; `raw` is its parsed JSON.
    pub fn read(raw: serde_json::Value, what: &str) -> Result<DecoderConfig> {
        Self::read_with(raw, what, None)
    }

    /// [`read`](Self::read), with the rotary width a GGUF file states (`rope_dims`).
    pub fn read_with(raw: serde_json::Value, what: &str, rope_dims: Option<usize>) -> Result<DecoderConfig> {
        crate::sources::hf::fields::check(&raw, crate::sources::hf::fields::DECODER, what)?;
        let family = raw["model_type"].as_str().and_then(super::registry::decoder);
        if let Some(key) = family.and_then(|f| f.required().iter().find(|k| raw.get(**k).is_none())) {
            let why =
                format!("config.json has no {key}, which {} needs", raw["model_type"].as_str().unwrap_or_default());
            return Err(usage(what, why, "restore the model's config.json"));
        }
        let mut c: DecoderConfig = serde_json::from_value(raw).map_err(|e| {
            usage(what, format!("config.json: a field is missing or wrong: {e}"), "restore the model's config.json")
        })?;
        c.rope_dims = rope_dims;
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
        if let Some(t) = c.rope_theta.filter(|t| !t.is_finite() || *t <= 0.0) {
            let why = format!("config.json: rope_theta is {t}; expected a number above 0");
            return Err(usage(what, why, "restore the model's config.json"));
        }
        c.family().check(&c, what)?;
        for (flag, on) in [
            ("scale_attn_by_inverse_layer_idx", c.scale_attn_by_inverse_layer_idx),
            ("reorder_and_upcast_attn", c.reorder_and_upcast_attn),
        ] {
            if on == Some(true) {
                return Err(usage(what, format!("{flag} is not supported"), "use a model without it"));
            }
        }
        Ok(c)
    }

    /// The activation `hidden_act` names.
    pub fn activation(&self, what: &str) -> Result<Activation> {
        // Gemma's MLP reads `hidden_activation` (its configs may also carry `hidden_act`).
        let given = self.hidden_activation.clone().or_else(|| self.hidden_act.clone());
        let name = given.unwrap_or_else(|| self.family().default_activation().into());
        super::blocks::activation_named(&name).ok_or_else(|| {
            usage(
                what,
                format!("activation {name:?} is not supported"),
                "use a model with silu, gelu, gelu_new or relu",
            )
        })
    }
}

/// Every parameter of the decoder, by its family's names in `store`. `ids` are not needed:
/// the token table and the head stay in the store where it reads rows ([`Stored`]: the
/// input's rows, and the head a slice of the vocabulary at a time), and the layers stay in
/// it too, each read and converted to f32 as the forward pass reaches it. Layer 0 is read
/// here, so that a file with the wrong names or shapes is refused before anything runs, and
/// kept for the forward pass.
pub fn params(c: DecoderConfig, store: Box<dyn TensorStore>) -> Result<Params> {
    let both: Arc<(DecoderConfig, Box<dyn TensorStore>)> = Arc::new((c, store));
    let (c, store) = (&both.0, both.1.as_ref());
    let (d, family) = (c.hidden_size, c.family());
    let token_name = family.token_table(store);
    // `--arithmetic ggml`'s blocks only for the table the head multiplies by (the token table
    // when tied): the token table's rows are looked up, never multiplied.
    let head_table = if c.tied() { token_name.clone() } else { family.head_name().to_string() };
    let reader = |name: &str| -> Result<Arc<dyn StoredRows>> {
        let (owner, owned) = (both.clone(), name.to_string());
        let ggml = if name == head_table { store.ggml_input(name)? } else { None };
        Ok(RowReader::shared(name, ((c.vocab_size, d), ggml), move |start, len| owner.1.rows(&owned, start, len)))
    };
    let stored = tables(store, ([c.vocab_size, d], c.tied()), (&token_name, family.head_name()), reader)?;
    // Otherwise the whole table stays (the head of a tied model is the same tensor): a
    // patching sweep embeds a second input with it.
    let token = if stored.is_some() { None } else { Some(store.get(&token_name, &[c.vocab_size, d])?) };
    let shared = both.clone();
    let load = move |i: usize| shared.0.family().layer(&shared.0, shared.1.as_ref(), i);
    let first = load(0)?;
    let head = match (&stored, &token) {
        (None, Some(token)) if c.tied() => Some(token.clone()),
        (None, _) => {
            let name = family.head_name();
            Some(store.get(name, &[c.vocab_size, d]).map_err(|_| no_head(store, name))?)
        }
        (Some(_), _) => None,
    };
    Ok(Params {
        token,
        token_rows: None,
        position: family.position_table(c, store)?,
        token_type: None,
        embed_norm: None,
        layers: Layers::lazy(c.num_hidden_layers, Arc::new(load), first),
        final_norm: Some(family.final_norm(c, store)?),
        lm_head: head.map(|weight| Linear { weight, bias: None, ggml: None }),
        mlm: None,
        stored,
        relative_bias: None,
        decoder: None,
    })
}

/// `head`: the family's name for it (`lm_head.weight`, GPT-NeoX's `embed_out.weight`).
fn no_head(store: &dyn TensorStore, head: &str) -> anyhow::Error {
    let module = head.trim_end_matches(".weight");
    usage(
        store.what(),
        format!("the checkpoint has no {head} and config.json says tie_word_embeddings is false"),
        format!("restore the checkpoint's {module}, or the config's tie_word_embeddings"),
    )
}

/// The token table and the head (`names`) left in the store and read a few rows at a time
/// (a mapped safetensors tensor in f32, bf16 or f16, or any GGUF table: a 7B model's two
/// 32,000 × 4,096 tables are 1 GB in f32, of which an input needs a few rows and a product
/// a slice at a time); `None` for a pickle, read whole. `reader` makes the reader of a table
/// by name (the caller owns the store).
fn tables(
    store: &dyn TensorStore,
    (shape, tied): ([usize; 2], bool),
    (token, head_name): (&str, &str),
    reader: impl Fn(&str) -> Result<Arc<dyn StoredRows>>,
) -> Result<Option<Stored>> {
    if !store.has_rows(token, &shape) {
        return Ok(None);
    }
    let head = if tied {
        None
    } else if store.has_rows(head_name, &shape) {
        Some(reader(head_name)?)
    } else {
        // Missing, or of another type or shape: `get` says which.
        store.get(head_name, &shape).map_err(|e| if store.has(head_name) { e } else { no_head(store, head_name) })?;
        return Ok(None);
    };
    Ok(Some(Stored { token: reader(token)?, head }))
}
