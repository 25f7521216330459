//! Batches: several sentences, each traced on its own (issue 17). They come from `--batch
//! FILE` (one per line) or from several positional sentences. The rule for positional
//! sentences keeps BERT's pairs: with a BERT model, two sentences are a pair (as before) and
//! three are an error pointing to `--batch`; with the toy model or a decoder, which have no
//! pairs, two or more sentences are a batch.

use super::{gguf, hf, text};
use crate::error::usage;
use crate::settings::{ModelChoice, Settings, Text};
use anyhow::Result;

/// One sentence of a batch and how to name it in messages (`--batch FILE line 3`, `sentence 2`).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub label: String,
    pub sentence: String,
}

/// The batch the settings ask for, or `None` for a single run (one sentence, or a pair).
pub fn sentences(settings: &Settings) -> Result<Option<Vec<Entry>>> {
    if let Text::Batch(path) = &settings.text {
        return from_file(path).map(Some);
    }
    let Some(pair) = &settings.pair else { return Ok(None) };
    let Text::Arg(first) = &settings.text else {
        return Err(usage(
            "PAIR",
            "a second sentence goes with a first one given as an argument",
            "pass both as arguments",
        ));
    };
    let all: Vec<&String> = [first, pair].into_iter().chain(&settings.more).collect();
    if let ModelChoice::Pretrained { spec, .. } = &settings.model {
        if is_bert(spec)? {
            if all.len() > 2 {
                return Err(usage(
                    "MORE",
                    format!("{} sentences: a BERT model takes one sentence or a pair", all.len()),
                    "trace several sentences with --batch FILE, one per line",
                ));
            }
            return Ok(None);
        }
    }
    Ok(Some(
        all.iter()
            .enumerate()
            .map(|(i, s)| Entry { label: format!("sentence {}", i + 1), sentence: s.to_string() })
            .collect(),
    ))
}

/// Whether `--model SPEC` is a BERT encoder (whose two sentences are a pair).
fn is_bert(spec: &str) -> Result<bool> {
    if spec.starts_with("ollama:") || gguf::find(spec).is_some() {
        return Ok(false);
    }
    let config = hf::resolve(spec)?.join("config.json");
    // Bounded and never waiting on a FIFO: the model's own reader names what is wrong.
    let bytes = super::input_file::bytes("", &config, "", super::input_file::CONFIG).ok();
    let raw = bytes.and_then(|b| crate::strict_json::parse(&b).ok()).unwrap_or(serde_json::Value::Null);
    Ok(raw["model_type"].as_str().is_none_or(|t| super::family::decoder(t).is_none()))
}

/// `--batch FILE`: every line a sentence; an empty line is an error naming it.
fn from_file(path: &std::path::Path) -> Result<Vec<Entry>> {
    let what = format!("--batch {}", path.display());
    let (f, _) = super::input_file::open(&what, path, "pass the path of a readable text file")?;
    let content = text::read_untrimmed(f, &what)?;
    let mut out = Vec::new();
    for (i, line) in content.lines().enumerate() {
        let sentence = line.trim();
        if sentence.is_empty() {
            return Err(usage(
                &what,
                format!("line {} is empty", i + 1),
                "write one sentence on every line (a final newline is fine)",
            ));
        }
        out.push(Entry { label: format!("{what} line {}", i + 1), sentence: sentence.to_string() });
    }
    if out.is_empty() {
        return Err(usage(&what, "the file holds no sentence", "write one sentence per line"));
    }
    Ok(out)
}
