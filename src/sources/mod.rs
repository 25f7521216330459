//! Parameter sources: everything that reads the user's inputs and yields the model's
//! configuration, its input rows and its parameters.
//!
//! [`open`] reads the sentence (argument, stdin or `--file`), tokenizes it, opens the weights
//! (a `--weights` file, a `--model` folder) and fixes every dimension, then checks the memory
//! estimate, all before a parameter tensor exists. [`Source::params`] then yields the
//! parameters: drawn as PyTorch draws them ([`seeded`]), read from a weights file ([`file`]),
//! or mapped from a checkpoint ([`hf`]). Nothing here prints: notes travel in
//! [`Loaded::notes`] to the output stage.

pub mod batch;
pub mod chat;
mod chat_jinja;
mod chat_json;
pub mod check;
mod common;
mod counted;
mod dequant;
pub mod family;
pub mod file;
pub mod gguf;
mod gguf_blocks;
mod gguf_check;
mod gguf_meta;
pub mod gguf_names;
mod gguf_params;
mod gguf_pretok;
// Public so that tests/it/gguf_tokenize.rs can build a tokenizer from edited metadata.
pub mod gguf_tokenizer;
pub mod given;
pub mod hf;
pub mod input_file;
mod loaded;
pub mod memo;
pub mod meta;
pub mod namer;
pub mod naming;
pub mod seeded;
pub mod store;
pub mod text;
mod textbook;
pub mod token_text;
pub mod tokenize;
mod toy;
mod toy_pad;
pub mod tracked;

pub use loaded::{Loaded, Source};

use crate::params::Input;
use crate::params::Params;
use crate::settings::{ModelChoice, Settings};
use anyhow::Result;

/// Reads the inputs the settings name and fixes the model's configuration.
pub fn open(settings: &Settings) -> Result<(Loaded, Source)> {
    let sentence = text::sentence(&settings.text)?;
    let lines = sentence.as_deref().map_or(0, |s| s.lines().filter(|l| !l.trim().is_empty()).count());
    let (mut loaded, source) = match &settings.model {
        ModelChoice::Toy(toy) => toy::open(settings, toy, sentence)?,
        ModelChoice::Pretrained { spec, truncate, special, .. } if spec.starts_with("ollama:") => {
            gguf::open(settings, spec, &gguf::ollama(spec)?, (*truncate, *special), sentence)?
        }
        ModelChoice::Pretrained { spec, truncate, special, arithmetic } => match gguf::find(spec) {
            Some(path) => gguf::open(settings, spec, &path, (*truncate, *special), sentence)?,
            None if *arithmetic == crate::config::Arithmetic::Ggml => {
                return Err(crate::error::usage(
                    "--arithmetic ggml",
                    format!("{spec} is not a GGUF file, and ggml's arithmetic is llama.cpp's for GGUF weights"),
                    "pass a .gguf file (or ollama:NAME), or drop --arithmetic ggml",
                ))
            }
            None => hf::open(settings, spec, (*truncate, *special), sentence)?,
        },
    };
    if settings.target.is_some() && loaded.cfg.parts.seq2seq.is_none() {
        return Err(crate::error::usage(
            "--target",
            "it is the decoder's text of an encoder–decoder (T5, BART), and this model has one stack",
            "drop --target; a language model continues the sentence itself with --generate N",
        ));
    }
    if lines > 1 {
        // A file of sentences is easily mistaken for a batch.
        loaded
            .notes
            .push(format!("the input has {lines} lines, traced as one sequence (--batch FILE traces each line)"));
    }
    Ok((loaded, source))
}

impl Source {
    /// [`Source::params`], converted once per batch where they do not depend on the sentence
    /// (`memo`): a decoder's or a GGUF model's are its file's (the whole token table; layers
    /// are read as the pass reaches them), so a batch's sentences share them. An encoder's
    /// gather this sentence's token rows, and the toy draws for its own vocabulary: those are
    /// made anew, as is everything outside a batch.
    /// With `made`, the kept parameters have every layer converted once (`Layers::made`).
    pub fn params_once(self, loaded: &Loaded, made: bool) -> Result<Params> {
        let key = match (&self, &loaded.cfg.model) {
            (Source::Decoder(_), Some(m)) => {
                format!("parameters {}{}", m.path, if made { " (layers made)" } else { "" })
            }
            _ => return self.params(loaded),
        };
        memo::kept(&key, move || {
            let params = self.params(loaded)?;
            Ok(if made { params.made()? } else { params })
        })
    }

    /// Makes every parameter the trace of `loaded` needs.
    pub fn params(self, loaded: &Loaded) -> Result<Params> {
        let cfg = &loaded.cfg;
        match self {
            Source::Seeded(recipe) => {
                let mut params = seeded::draw(cfg, &recipe)?;
                toy_pad::embed_rows(&mut params, loaded)?;
                Ok(params)
            }
            Source::File(named) => {
                let what = match &cfg.init {
                    crate::config::InitConfig::File { path, .. } => format!("--weights {path}"),
                    crate::config::InitConfig::Given => "weights".to_string(),
                    _ => "--weights".to_string(),
                };
                let mut params = file::params(named, cfg, &what)?;
                toy_pad::embed_rows(&mut params, loaded)?;
                Ok(params)
            }
            Source::Model(weights) => {
                let (Input::Ids { ids, .. }, Some(hf)) = (&loaded.input, &loaded.hf) else {
                    anyhow::bail!("internal: a real model takes token ids and has a config");
                };
                weights.params(hf, ids)
                // `weights` drops here: the file is unmapped.
            }
            // Decoders keep the whole token table (the embeddings are looked up from it).
            Source::Decoder(both) => {
                let (c, store) = *both;
                family::decoder::params(c, store)
            }
            Source::Seq2Seq(both) => {
                let (c, store) = *both;
                hf::seq2seq::params(c, cfg, store)
            }
        }
    }
}

/// `--model`'s help, written from the registry of families (`family::model_types`, the
/// GGUF architectures they read), so that the help lists exactly what is accepted.
pub fn model_help() -> String {
    format!(
        "A model: a Hugging Face folder (config.json, weights, tokenizer.json) or ORG/NAME already in \
         the local Hugging Face cache, a GGUF file (.gguf), or ollama:NAME (a model Ollama has \
         pulled). A folder's model_type: {}. A GGUF file's architecture: {}.",
        family::model_types().join(", "),
        family::gguf_archs().join(", ")
    )
}
