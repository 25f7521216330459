//! An encoder–decoder's folder (T5, BART): config.json read by its family
//! (`family/seq2seq.rs`), the sentence tokenized as the encoder's input, the decoder's input
//! made from its start token and `--target` (teacher forcing), and the checkpoint kept for
//! `Source::params`.

use super::checkpoint::Checkpoint;
use super::folder::{encode, load_tokenizer};
use crate::config::{InitConfig, ModelConfig, RealModel, Seq2Seq};
use crate::error::usage;
use crate::params::Input;
use crate::params::Layers;
use crate::settings::Settings;
use crate::sources::family::seq2seq::{EncoderDecoder, Seq2SeqConfig};
use crate::sources::loaded::{Loaded, Source};
use crate::sources::store::TensorStore;
use crate::sources::token_text;
use crate::trace::steps::Stack;
use anyhow::Result;
use std::path::Path;
use std::sync::Arc;

/// config.json's fields checked by key before serde reads them (`hf/fields.rs`).
const FIELDS: &[(&str, super::fields::Kind)] = {
    use super::fields::Kind::*;
    &[
        ("model_type", Text),
        ("vocab_size", Count),
        ("d_model", Count),
        ("d_kv", Count),
        ("d_ff", Count),
        ("num_layers", Count),
        ("num_decoder_layers", Count),
        ("num_heads", Count),
        ("relative_attention_num_buckets", Count),
        ("relative_attention_max_distance", Count),
        ("layer_norm_epsilon", Float),
        ("feed_forward_proj", Text),
        ("n_positions", Count),
        ("encoder_layers", Count),
        ("decoder_layers", Count),
        ("encoder_attention_heads", Count),
        ("decoder_attention_heads", Count),
        ("encoder_ffn_dim", Count),
        ("decoder_ffn_dim", Count),
        ("activation_function", Text),
        ("max_position_embeddings", Count),
        ("scale_embedding", Flag),
        ("normalize_before", Flag),
        ("add_final_layer_norm", Flag),
        ("normalize_embedding", Flag),
        ("tie_word_embeddings", Flag),
        ("decoder_start_token_id", Id),
        ("pad_token_id", Id),
    ]
};

/// Opens an encoder–decoder's folder; `how` is (`--truncate`, add special tokens).
pub fn open(
    settings: &Settings,
    (w, dir): (&str, &Path),
    raw: serde_json::Value,
    (truncate, special): (bool, bool),
    sentence: Option<String>,
) -> Result<(Loaded, Source)> {
    refuse_flags(settings, w)?;
    super::fields::check(&raw, FIELDS, w)?;
    let c: Seq2SeqConfig = serde_json::from_value(raw).map_err(|e| {
        usage(
            w,
            format!("config.json: {}", super::folder::first_line(&e.to_string())),
            "restore the model's config.json",
        )
    })?;
    let fam =
        crate::sources::family::encoder_decoder(&c.model_type).ok_or_else(|| anyhow::anyhow!("internal: no family"))?;
    let (mut enc_cfg, mut dec_cfg) = (fam.block(&c, Stack::Encoder, w)?, fam.block(&c, Stack::Decoder, w)?);
    let files = super::checkpoint::weight_files(dir, w)?;
    let tokenizer = load_tokenizer(dir, c.vocab_size, w)?;
    let checkpoint = Checkpoint::open(&files, w)?;
    let sentence = sentence.filter(|t| !t.trim().is_empty()).ok_or_else(|| {
        usage(
            "sentence",
            "none was given",
            "pass the source sentence, e.g. attn-trace \"my shoes are small\" --model DIR",
        )
    })?;
    let enc = encode(&tokenizer, (&sentence, None), special, (enc_cfg.max_len, c.vocab_size), truncate, w)?;
    let start = start_token(&c, fam, &tokenizer, w)?;
    let decoder_ids = decoder_ids(settings, &tokenizer, start, (dec_cfg.max_len, c.vocab_size), w)?;
    let decoder_tokens: Vec<String> =
        decoder_ids.iter().map(|&i| tokenizer.id_to_token(i).unwrap_or_else(|| format!("#{i}"))).collect();
    let stored_dtype = checkpoint.stored_dtype();
    let model = RealModel {
        path: dir.display().to_string(),
        model_type: c.model_type.clone(),
        type_vocab_size: 0,
        truncated: enc.truncated,
        stored_dtype: stored_dtype.clone(),
        bos_added: None,
        tensor_types: None,
    };
    let init = InitConfig::File { path: files[0].display().to_string(), stored_dtype: None };
    for cfg in [&mut enc_cfg, &mut dec_cfg] {
        (cfg.model, cfg.init) = (Some(model.clone()), init.clone());
    }
    enc_cfg.parts.seq2seq = Some(Seq2Seq {
        decoder: Box::new(dec_cfg),
        decoder_start: start,
        decoder_texts: token_text::texts(Some(&tokenizer), &decoder_tokens),
        decoder_tokens,
        decoder_ids,
        target: settings.target.clone(),
    });
    let mut notes: Vec<String> = super::folder::truncation_note(enc.truncated, enc_cfg.max_len).into_iter().collect();
    notes.extend(stored_dtype.map(|dt| crate::sources::common::stored_note(&dt)));
    let loaded = Loaded {
        sentence: Some(sentence),
        tokens: enc.tokens,
        input: Input::Ids { ids: enc.ids, type_ids: None },
        cfg: enc_cfg,
        // Each stack's layers are read a layer at a time (`params`): the estimate counts one.
        run: crate::config::RunConfig { layer_at_a_time: true, ..Default::default() },
        hf: None,
        notes,
        tokenizer: Some(tokenizer),
        stop_ids: super::folder::eos_ids(c.eos_token_id.as_ref()),
        chat: None,
    };
    Ok((loaded, Source::Seq2Seq(Box::new((c, Box::new(checkpoint))))))
}

/// What an encoder–decoder's input cannot be.
fn refuse_flags(settings: &Settings, w: &str) -> Result<()> {
    if settings.pair.is_some() {
        let why = format!("{w} is an encoder–decoder: the sentence is the encoder's input");
        return Err(usage("PAIR", why, "give the decoder's text with --target TEXT"));
    }
    let (a, v) = (&settings.analysis, &settings.output.views);
    let tl = settings.outputs.trace_names == crate::settings::outputs::TraceNames::TransformerLens;
    let refused = [
        (settings.chat.is_some(), "--chat"),
        (settings.padding.is_some(), "--pad-to"),
        (a.induction.is_some(), "--induction"),
        (a.lens, "--lens"),
        (a.attribute.is_some(), "--attribute"),
        (a.patch.is_some(), "--patch"),
        (v.focus.is_some(), "--focus"),
        (settings.outputs.check.is_some(), "--check"),
        (tl, "--names transformer-lens"),
    ];
    if (a.stats || a.rollout) && v.stack == crate::settings::views::StackView::Cross {
        let flag = if a.stats { "--stats" } else { "--rollout" };
        let why = "it reads square maps, and the cross-attention's are decoder tokens × source tokens";
        return Err(usage(flag, why, "add --stack encoder or --stack decoder"));
    }
    match refused.iter().find(|(on, _)| *on) {
        Some((_, flag)) => Err(usage(
            *flag,
            format!("{w} is an encoder–decoder: {flag} is for one-stack models"),
            format!("drop {flag}"),
        )),
        None => Ok(()),
    }
}

/// The decoder's start token: config.json's `decoder_start_token_id`, else the family's token
/// (T5 `<pad>`, BART `</s>`) in the tokenizer.
fn start_token(c: &Seq2SeqConfig, fam: &dyn EncoderDecoder, tok: &tokenizers::Tokenizer, w: &str) -> Result<u32> {
    let id = c.decoder_start_token_id.or_else(|| tok.token_to_id(fam.start_token())).ok_or_else(|| {
        let why = format!("config.json has no decoder_start_token_id and the tokenizer no {}", fam.start_token());
        usage(w, why, "add decoder_start_token_id to config.json")
    })?;
    if id as usize >= c.vocab_size {
        let why = format!("config.json: decoder_start_token_id {id} is beyond vocab_size {}", c.vocab_size);
        return Err(usage(w, why, "restore the model's config.json"));
    }
    Ok(id)
}

/// The start token, then `--target`'s tokens (with the tokenizer's special tokens) shifted
/// right by one: transformers' `_shift_right(labels)`, so position i predicts label i.
fn decoder_ids(
    settings: &Settings,
    tok: &tokenizers::Tokenizer,
    start: u32,
    (max, vocab): (usize, usize),
    w: &str,
) -> Result<Vec<u32>> {
    let Some(target) = settings.target.as_deref() else { return Ok(vec![start]) };
    if target.trim().is_empty() {
        return Err(usage("--target", "it is empty", "give the decoder's text, or drop --target"));
    }
    // No limit here: `encode`'s own message is the sentence's and offers --truncate, which
    // the target does not take.
    let labels = encode(tok, (target, None), true, (usize::MAX, vocab), false, w)?;
    if labels.ids.len() > max {
        let why =
            format!("it has {} tokens but the decoder takes at most {max} (max_position_embeddings)", labels.ids.len());
        return Err(usage("--target", why, "shorten it"));
    }
    let mut ids = vec![start];
    ids.extend(&labels.ids[..labels.ids.len() - 1]);
    Ok(ids)
}

/// The encoder's and the decoder's parameters (`Source::params`): one token table for both,
/// and each stack's layers read and converted as the forward pass reaches them (layer 0 of
/// each read here, so a checkpoint with the wrong names or shapes is refused before anything
/// runs), as a decoder's are.
pub fn params(c: Seq2SeqConfig, cfg: &ModelConfig, store: Box<dyn TensorStore>) -> Result<crate::params::Params> {
    let fam =
        crate::sources::family::encoder_decoder(&c.model_type).ok_or_else(|| anyhow::anyhow!("internal: no family"))?;
    let s = cfg.parts.seq2seq.as_ref().ok_or_else(|| anyhow::anyhow!("internal: not an encoder–decoder"))?;
    let shared: Arc<(ModelConfig, ModelConfig, Box<dyn TensorStore>)> =
        Arc::new((cfg.clone(), (*s.decoder).clone(), store));
    let token = fam.token_table(cfg, shared.2.as_ref())?; // [vocab, d_model]
    let stack = |which: Stack| -> Result<crate::params::Params> {
        let own = if which == Stack::Decoder { &shared.1 } else { &shared.0 };
        let mut p = fam.params(&c, own, shared.2.as_ref(), (which, &token))?;
        let owner = shared.clone();
        let load = move |i: usize| {
            let cfg = if which == Stack::Decoder { &owner.1 } else { &owner.0 };
            fam.layer(cfg, owner.2.as_ref(), (which, i))
        };
        let first = load(0)?;
        p.layers = Layers::lazy(own.layers, Arc::new(load), first);
        Ok(p)
    };
    let mut encoder = stack(Stack::Encoder)?;
    encoder.decoder = Some(Box::new(stack(Stack::Decoder)?));
    Ok(encoder)
}
