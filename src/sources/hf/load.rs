//! A real model's configuration (`--model`): the folder fixes every dimension, its tokenizer
//! makes the tokens; flags may only restate what the model says, or choose what to show.

use super::checkpoint::Checkpoint;
use super::folder::{self, encode, load_tokenizer, resolve, HfModel};
use crate::config::{Activation, InitConfig, ModelConfig, Norm, Positions, RealModel};
use crate::error::usage;
use crate::params::Input;
use crate::settings::{Settings, Shape};
use crate::sources::{common::agree, family, family::DecoderConfig, input_file, loaded::Loaded, loaded::Source};
use anyhow::Result;
use std::path::Path;

/// Opens the model folder, tokenizes the sentence (and pair) and fixes the configuration.
/// `how` is (`--truncate`, add special tokens).
pub fn open(settings: &Settings, spec: &str, how: (bool, bool), sentence: Option<String>) -> Result<(Loaded, Source)> {
    let dir = resolve(spec)?;
    let config = dir.join("config.json");
    let what = format!("--model {spec}");
    // A missing config.json is the BERT reader's to name; any other is read (a device refused).
    let (fix, at) = ("restore the model's config.json", format!("--model: {}", config.display()));
    let raw: serde_json::Value = match std::fs::symlink_metadata(&config) {
        Ok(_) => crate::strict_json::parse(&input_file::bytes(&at, &config, fix, input_file::CONFIG)?)
            .map_err(|e| usage(&at, format!("not valid JSON: {e}"), fix))?,
        Err(_) => serde_json::Value::Null,
    };
    match raw["model_type"].as_str() {
        Some(t) if family::decoder(t).is_some() => open_decoder(settings, &what, &dir, raw, how, sentence),
        Some(t) if family::encoder_decoder(t).is_some() => {
            super::seq2seq::open(settings, (&what, &dir), raw, how, sentence)
        }
        _ => open_bert(settings, spec, &dir, how, sentence),
    }
}

/// A BERT-family encoder (the BERT config reader names any other family as unsupported).
fn open_bert(
    settings: &Settings,
    spec: &str,
    dir: &Path,
    (truncate, special): (bool, bool),
    sentence: Option<String>,
) -> Result<(Loaded, Source)> {
    let dir = dir.to_path_buf();
    let w = format!("--model {spec}");
    if settings.chat.is_some() {
        let why = format!("{w} is an encoder (BERT): it has no chat template, and no turns to take");
        return Err(usage("--chat", why, "use a language model, or drop --chat"));
    }
    let model = HfModel::open(&dir)?;
    let c = &model.config;
    let s = &settings.shape;
    let [d_model, heads, d_k, d_v, d_ff, layers, max_len] = bert_dims(s, c, &w)?;
    let activation = restated_flags(s, &c.hidden_act, &w)?;
    let pair = settings.pair.as_deref();
    let sentence = bert_text(sentence, pair)?;
    let mut enc = model.encode(&sentence, pair, truncate, special)?;
    let masked_lm = masked_lm(&model, &enc.tokens, &w)?;
    let mut notes: Vec<String> = folder::truncation_note(enc.truncated, max_len).into_iter().collect();
    let stored_dtype = model.weights.stored_dtype();
    notes.extend(bert_notes(c, s.causal, stored_dtype.as_deref(), &w));
    // BertConfig's pad_token_id defaults to 0.
    let pad = |p| folder::pad(&mut enc, p, c.pad_token_id.unwrap_or(0), &model.tokenizer, max_len);
    let padding = settings.padding.map(pad).transpose()?;
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
            stored_dtype,
            bos_added: None,
            tensor_types: None,
        }),
        init: InitConfig::File { path: dir.join("model.safetensors").display().to_string(), stored_dtype: None },
        interventions: Default::default(),
        parts: crate::config::Parts { masked_lm, padding, ..Default::default() },
    };
    let loaded = Loaded {
        sentence: Some(match pair {
            Some(p) => format!("{sentence} ‖ {p}"),
            None => sentence,
        }),
        tokens: enc.tokens,
        input: Input::Ids { ids: enc.ids, type_ids: Some(enc.type_ids) },
        cfg,
        run: Default::default(),
        hf: Some(model.config.clone()),
        notes,
        tokenizer: Some(model.tokenizer.clone()),
        stop_ids: Vec::new(),
        chat: None,
    };
    let mut weights = model.weights;
    weights.whole_table = settings.analysis.patch.is_some() || settings.analysis.steer.from_prompts.is_some();
    Ok((loaded, Source::Model(Box::new(weights))))
}

/// BERT's sizes (d_model, heads, d_k, d_v, d_ff, layers, max_len); flags may only restate them.
fn bert_dims(s: &Shape, c: &crate::sources::family::bert::BertConfig, w: &str) -> Result<[usize; 7]> {
    let d_model = agree("--d-model", s.d_model, c.hidden_size, w)?;
    let heads = agree("--heads", s.heads, c.num_attention_heads, w)?;
    let d_head = d_model / heads;
    Ok([
        d_model,
        heads,
        agree("--d-k", s.d_k, d_head, w)?,
        agree("--d-v", s.d_v, d_head, w)?,
        agree("--d-ff", s.d_ff, c.intermediate_size, w)?,
        agree("--layers", s.layers, c.num_hidden_layers, w)?,
        agree("--max-len", s.max_len, c.max_position_embeddings, w)?,
    ])
}

/// Where a BERT trace cannot be what the user may think it is: a causal mask the model was
/// not trained with, a config whose `is_decoder` makes transformers mask later tokens when the
/// trace does not, weights converted from a narrower type.
fn bert_notes(
    c: &crate::sources::family::bert::BertConfig,
    causal: bool,
    stored_dtype: Option<&str>,
    w: &str,
) -> Vec<String> {
    let mut notes = Vec::new();
    match (causal, c.is_decoder) {
        (true, false) => notes.push(format!(
            "--causal hides later tokens, but {w} is a bidirectional encoder trained to see every \
             token: the trace is not what the model computes"
        )),
        (false, true) => notes.push(format!(
            "{w}'s config.json sets is_decoder, so transformers hides later tokens; this trace \
             sees every token (add --causal to trace what transformers computes)"
        )),
        _ => {}
    }
    if let Some(dt) = stored_dtype {
        notes.push(crate::sources::common::stored_note(dt));
    }
    notes
}

/// The config's activation; flags that describe the block may only restate the model.
fn restated_flags(s: &Shape, hidden_act: &str, w: &str) -> Result<Activation> {
    if s.positions.is_some_and(|p| p != Positions::Learned) {
        return Err(usage("--positions", format!("{w} has learned absolute positions"), "drop --positions"));
    }
    if s.norm == Some(Norm::Pre) {
        return Err(usage("--norm", format!("{w} is post-norm (BERT)"), "drop --norm"));
    }
    let activation = crate::sources::family::bert::activation(hidden_act).ok_or_else(|| {
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

/// A decoder language model: GPT-2 or the Llama family.
fn open_decoder(
    settings: &Settings,
    w: &str,
    dir: &Path,
    raw: serde_json::Value,
    how: (bool, bool),
    sentence: Option<String>,
) -> Result<(Loaded, Source)> {
    let c = DecoderConfig::read(raw, w)?;
    let files = super::checkpoint::weight_files(dir, w)?;
    let tokenizer = load_tokenizer(dir, c.vocab_size, w)?;
    let checkpoint = Checkpoint::open(&files, w)?;
    let fam = c.family();
    checkpoint.check_layers(c.num_hidden_layers, fam.layer_prefixes())?;
    let table = fam.token_table(&checkpoint);
    super::dims::check(&c, &table, fam.qk_names(), |n| checkpoint.shape(n), ("config.json", w))?;
    let facts = Facts {
        path: dir.display().to_string(),
        weights: files[0].display().to_string(),
        stored_dtype: checkpoint.stored_dtype(),
        attn_bias: checkpoint.has(&fam.q_bias(&checkpoint)),
        chat: settings.chat.as_ref().map(|chat| crate::sources::chat::from_folder(dir, chat, w)).transpose()?,
    };
    let mut loaded = decoder_loaded(settings, w, &c, tokenizer, how, sentence, facts)?;
    // Only a generation reads it: a broken file must not stop a plain trace.
    if let Some(ids) = settings.generate.as_ref().map(|_| folder::generation_eos(dir, w)).transpose()?.flatten() {
        loaded.stop_ids = ids;
    }
    // `family::decoder::params` leaves the table stored exactly when it can be read by rows.
    loaded.run.vocab_stored = checkpoint.has_rows(&table, &[c.vocab_size, c.hidden_size]);
    Ok((loaded, Source::Decoder(Box::new((c, Box::new(checkpoint))))))
}

/// What a decoder's files say beyond its config.
pub struct Facts {
    /// The model's folder or file, for `config.model.path`.
    pub path: String,
    /// The (first) weights file, for `config.init.path`.
    pub weights: String,
    /// The stored type when not f32 (`bf16`, or a GGUF's quantization types).
    pub stored_dtype: Option<String>,
    /// Whether q/k/v have biases.
    pub attn_bias: bool,
    /// `--chat`: the model's chat template (or `--chat-template`'s).
    pub chat: Option<crate::sources::chat::Template>,
}

/// A decoder's inputs and configuration, whatever file format holds it: flags checked
/// against the model, the sentence tokenized, the block's options filled in.
pub fn decoder_loaded(
    settings: &Settings,
    w: &str,
    c: &DecoderConfig,
    tokenizer: tokenizers::Tokenizer,
    (truncate, special): (bool, bool),
    sentence: Option<String>,
    facts: Facts,
) -> Result<Loaded> {
    let s = &settings.shape;
    let (d_model, heads, d_head, d_ff, layers, max_len) = decoder_dims(s, c, w)?;
    let (activation, positions) = decoder_flags(s, c, w)?;
    if settings.pair.is_some() {
        return Err(usage("PAIR", format!("{w} is a decoder; sentence pairs are for BERT"), "join the sentences"));
    }
    let sentence = decoder_sentence(settings, sentence)?;
    let text = sentence.as_deref().unwrap_or("");
    // `--chat`: the template's text is tokenized, its special tokens the only ones.
    let chat = settings.chat.as_ref().zip(facts.chat.as_ref()).map(|(c, t)| t.turn(c, text)).transpose()?;
    let (text, special) = chat.as_ref().map_or((text, special), |c| (c.rendered.as_str(), false));
    let (mut enc, plain) = decoder_tokens(settings, (&tokenizer, text), c, (max_len, truncate, special), w)?;
    let mut notes: Vec<String> = folder::truncation_note(enc.truncated, max_len).into_iter().collect();
    if let Some(dt) = &facts.stored_dtype {
        notes.push(crate::sources::common::stored_note(dt));
    }
    let mut cfg = ModelConfig {
        d_model,
        heads,
        d_k: d_head,
        d_v: d_head,
        d_ff,
        layers,
        vocab_size: c.vocab_size,
        max_len,
        positions,
        causal: true,
        scale: s.scale.or_else(|| c.family().attn_scale(c)).unwrap_or(1.0 / (d_head as f64).sqrt()),
        norm: Norm::Pre,
        activation,
        attn_bias: facts.attn_bias,
        ffn_bias: c.family().ffn_bias(c),
        eps: s.eps.unwrap_or(c.eps()),
        raw_input: false,
        model: Some(RealModel {
            path: facts.path,
            model_type: c.model_type.clone(),
            type_vocab_size: 0,
            truncated: enc.truncated,
            stored_dtype: facts.stored_dtype,
            bos_added: Some(special && enc.ids.len() > plain),
            tensor_types: None,
        }),
        init: InitConfig::File { path: facts.weights, stored_dtype: None },
        interventions: Default::default(),
        parts: c.family().parts(c, w)?,
    };
    if let Some(p) = settings.padding {
        cfg.parts.padding = Some(folder::pad(&mut enc, p, folder::decoder_pad_id(c, w)?, &tokenizer, max_len)?);
    }
    // LongRoPE's frequencies depend on the input's length, padding included.
    if let Some(rope) = cfg.parts.rope.as_mut() {
        rope.fit_length(enc.ids.len());
    }
    Ok(Loaded {
        sentence,
        tokens: enc.tokens,
        input: Input::Ids { ids: enc.ids, type_ids: None },
        cfg,
        // A decoder's layers are read a layer at a time (`params::Layers::Lazy`).
        run: crate::config::RunConfig { layer_at_a_time: true, ..Default::default() },
        hf: None,
        notes,
        tokenizer: Some(tokenizer),
        stop_ids: folder::eos_ids(c.eos_token_id.as_ref()),
        chat,
    })
}

/// The sentence, which a decoder needs unless `--induction N` makes the tokens itself.
fn decoder_sentence(settings: &Settings, sentence: Option<String>) -> Result<Option<String>> {
    let sentence = sentence.filter(|t| !t.trim().is_empty());
    if sentence.is_none() && settings.analysis.induction.is_none() {
        let fix = "pass a sentence, e.g. attn-trace \"The capital of France is\" --model DIR";
        return Err(usage("sentence", "none was given", fix));
    }
    Ok(sentence)
}

/// The sentence's tokens (or `--induction`'s), and how many the text alone makes (without
/// the special tokens the tokenizer adds, such as a BOS).
fn decoder_tokens(
    settings: &Settings,
    (tokenizer, sentence): (&tokenizers::Tokenizer, &str),
    c: &DecoderConfig,
    (max_len, truncate, special): (usize, bool, bool),
    w: &str,
) -> Result<(folder::Encoded, usize)> {
    if let Some(n) = settings.analysis.induction {
        // The tokens are made, not read (a sentence, if given, is not used): the special
        // tokens the tokenizer puts before any text (a BOS), then the random ones.
        let vocab = c.vocab_size.min(tokenizer.get_vocab_size(true));
        let enc = folder::induction_input(tokenizer, special, n, vocab, max_len, w)?;
        return Ok((enc, 2 * n));
    }
    let enc = encode(tokenizer, (sentence, None), special, (max_len, c.vocab_size), truncate, w)?;
    let plain = tokenizer.encode(sentence, false).map(|e| e.get_ids().len()).unwrap_or(enc.ids.len());
    Ok((enc, plain))
}

/// The decoder's sizes; flags may only restate them.
fn decoder_dims(s: &Shape, c: &DecoderConfig, w: &str) -> Result<(usize, usize, usize, usize, usize, usize)> {
    let d_head = agree("--d-k", s.d_k, c.d_head(), w)?;
    agree("--d-v", s.d_v, c.d_head(), w)?;
    Ok((
        agree("--d-model", s.d_model, c.hidden_size, w)?,
        agree("--heads", s.heads, c.num_attention_heads, w)?,
        d_head,
        agree("--d-ff", s.d_ff, c.d_ff(), w)?,
        agree("--layers", s.layers, c.num_hidden_layers, w)?,
        agree("--max-len", s.max_len, c.max_position_embeddings, w)?,
    ))
}

/// The decoder's activation and positions; block flags may only restate them.
fn decoder_flags(s: &Shape, c: &DecoderConfig, w: &str) -> Result<(Activation, Positions)> {
    let activation = c.activation(w)?;
    let positions = c.family().positions();
    if s.positions.is_some_and(|p| p != positions) {
        return Err(usage("--positions", format!("{w} has {} positions", positions.name()), "drop --positions"));
    }
    if s.norm == Some(Norm::Post) {
        return Err(usage("--norm", format!("{w} is pre-norm"), "drop --norm"));
    }
    if s.activation.is_some_and(|a| a != activation) {
        return Err(usage("--activation", format!("{w} uses {}", activation.name()), "drop --activation"));
    }
    if s.attn_bias || s.no_ffn_bias {
        return Err(usage("--attn-bias/--no-ffn-bias", format!("{w} fixes its biases"), "drop the flag"));
    }
    Ok((activation, positions))
}

/// BERT's sentence and optional second sentence, both non-empty.
fn bert_text(sentence: Option<String>, pair: Option<&str>) -> Result<String> {
    let sentence = sentence.ok_or_else(|| {
        usage("sentence", "none was given", "pass a sentence, e.g. attn-trace \"my shoes are small\" --model DIR")
    })?;
    if sentence.trim().is_empty() {
        return Err(usage("sentence", "it is empty", "pass a sentence with at least one word"));
    }
    if pair.is_some_and(|p| p.trim().is_empty()) {
        return Err(usage(
            "PAIR",
            "the second sentence is empty",
            "pass a second sentence with at least one word, or leave it out",
        ));
    }
    Ok(sentence)
}

/// Whether the checkpoint has BERT's masked-LM head; a `[MASK]` without one is an error.
fn masked_lm(model: &HfModel, tokens: &[String], w: &str) -> Result<bool> {
    let has = model.weights.has_mlm_head();
    if !has && tokens.iter().any(|t| t == "[MASK]") {
        return Err(usage(
            w,
            "the sentence has [MASK] but the checkpoint has no masked-LM head (cls.predictions.*)",
            "use a BertForMaskedLM checkpoint to fill masks (sentence encoders such as MiniLM carry none)",
        ));
    }
    Ok(has)
}
