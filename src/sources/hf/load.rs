//! A real model's configuration (`--model`): the folder fixes every dimension, its tokenizer
//! makes the tokens; flags may only restate what the model says, or choose what to show.

use super::{resolve, HfModel};
use crate::config::{Activation, InitConfig, ModelConfig, Norm, Positions, RealModel};
use crate::error::usage;
use crate::settings::{Settings, Shape};
use crate::sources::{agree, Input, Loaded, Source};
use anyhow::Result;

/// Opens the model folder, tokenizes the sentence (and pair) and fixes the configuration.
pub fn open(settings: &Settings, spec: &str, truncate: bool, sentence: Option<String>) -> Result<(Loaded, Source)> {
    let dir = resolve(spec)?;
    let model = HfModel::open(&dir)?;
    let w = format!("--model {spec}");
    let c = &model.config;
    let s = &settings.shape;
    let d_model = agree("--d-model", s.d_model, c.hidden_size, &w)?;
    let heads = agree("--heads", s.heads, c.num_attention_heads, &w)?;
    let d_head = d_model / heads;
    let d_k = agree("--d-k", s.d_k, d_head, &w)?;
    let d_v = agree("--d-v", s.d_v, d_head, &w)?;
    let d_ff = agree("--d-ff", s.d_ff, c.intermediate_size, &w)?;
    let layers = agree("--layers", s.layers, c.num_hidden_layers, &w)?;
    let max_len = agree("--max-len", s.max_len, c.max_position_embeddings, &w)?;
    let activation = restated_flags(s, &c.hidden_act, &w)?;
    let sentence = sentence.ok_or_else(|| {
        usage("sentence", "none was given", "pass a sentence, e.g. attn-trace \"my shoes are small\" --model DIR")
    })?;
    if sentence.trim().is_empty() {
        return Err(usage("sentence", "it is empty", "pass a sentence with at least one word"));
    }
    let pair = settings.pair.as_deref();
    if pair.is_some_and(|p| p.trim().is_empty()) {
        return Err(usage(
            "PAIR",
            "the second sentence is empty",
            "pass a second sentence with at least one word, or leave it out",
        ));
    }
    let enc = model.encode(&sentence, pair, truncate)?;
    let mut notes = Vec::new();
    if enc.truncated > 0 {
        notes.push(format!(
            "--truncate dropped the last {} tokens to fit max_position_embeddings {max_len}",
            enc.truncated
        ));
    }
    let cfg = ModelConfig {
        d_model,
        heads,
        d_k,
        d_v,
        d_ff,
        layers,
        vocab_size: c.vocab_size,
        max_len,
        positions: Positions::Learned,
        causal: s.causal,
        scale: s.scale.unwrap_or(1.0 / (d_k as f64).sqrt()),
        norm: Norm::Post,
        activation,
        attn_bias: true,
        ffn_bias: true,
        eps: s.eps.unwrap_or(c.layer_norm_eps),
        raw_input: false,
        model: Some(RealModel {
            path: dir.display().to_string(),
            model_type: c.model_type.clone(),
            type_vocab_size: c.type_vocab_size,
            truncated: enc.truncated,
        }),
        init: InitConfig::File { path: dir.join("model.safetensors").display().to_string() },
    };
    let loaded = Loaded {
        sentence: Some(match pair {
            Some(p) => format!("{sentence} ‖ {p}"),
            None => sentence,
        }),
        tokens: enc.tokens,
        input: Input::Ids { ids: enc.ids, type_ids: Some(enc.type_ids) },
        cfg,
        hf: Some(model.config.clone()),
        notes,
    };
    Ok((loaded, Source::Model(Box::new(model.weights))))
}

/// The config's activation; flags that describe the block may only restate the model.
fn restated_flags(s: &Shape, hidden_act: &str, w: &str) -> Result<Activation> {
    if s.positions.is_some_and(|p| p != Positions::Learned) {
        return Err(usage("--positions", format!("{w} has learned absolute positions"), "drop --positions"));
    }
    if s.norm == Some(Norm::Pre) {
        return Err(usage("--norm", format!("{w} is post-norm (BERT)"), "drop --norm"));
    }
    let activation = super::config::activation(hidden_act).ok_or_else(|| {
        usage(w, format!("hidden_act {hidden_act:?} is not supported"), "use a model with gelu, gelu_new or relu")
    })?;
    if s.activation.is_some_and(|a| a != activation) {
        return Err(usage("--activation", format!("{w} uses {hidden_act}"), "drop --activation"));
    }
    if s.attn_bias || s.no_ffn_bias {
        return Err(usage("--attn-bias/--no-ffn-bias", format!("{w} fixes its biases"), "drop the flag"));
    }
    Ok(activation)
}
