//! Sentence → tokens and ids, the toy way the seed notebooks do it.
//!
//! Characters listed in `remove` are deleted, the text is optionally lower-cased and split on
//! white space. Ids come from a vocabulary built from the sentence itself (first-seen order as
//! in seed 000, or sorted as in seeds 003/004) or from a fixed vocabulary file with an unknown
//! token (seed 001), optionally wrapped in begin/end markers.

use crate::error::usage;
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::Path;

pub use crate::settings::VocabOrder;

#[derive(Debug, Clone)]
pub struct TokenizerOptions {
    pub lowercase: bool,
    /// Characters deleted before splitting (seed 000 deletes ",").
    pub remove: String,
    /// Also delete every Unicode punctuation character.
    pub remove_punctuation: bool,
    pub order: VocabOrder,
    /// A fixed vocabulary: token → id.
    pub fixed: Option<BTreeMap<String, u32>>,
    pub unk: Option<String>,
    pub bos: Option<String>,
    pub eos: Option<String>,
}

impl Default for TokenizerOptions {
    fn default() -> Self {
        TokenizerOptions {
            lowercase: false,
            remove: ",".to_string(),
            remove_punctuation: false,
            order: VocabOrder::FirstSeen,
            fixed: None,
            unk: None,
            bos: None,
            eos: None,
        }
    }
}

/// The tokenizer's output.
#[derive(Debug, Clone, PartialEq)]
pub struct Tokenized {
    pub tokens: Vec<String>,
    pub ids: Vec<u32>,
    /// Rows the token-embedding table needs: one more than the largest id in the vocabulary.
    pub vocab_size: usize,
}

/// Splits the sentence into words after deleting and lower-casing.
pub fn words(sentence: &str, opts: &TokenizerOptions) -> Vec<String> {
    let kept: String = sentence
        .chars()
        .filter(|c| !(opts.remove.contains(*c) || opts.remove_punctuation && is_punctuation(*c)))
        .collect();
    let text = if opts.lowercase { kept.to_lowercase() } else { kept };
    text.split_whitespace().map(str::to_string).collect()
}

/// ASCII punctuation plus the common Unicode quotation marks and dashes.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || matches!(c, '“' | '”' | '‘' | '’' | '–' | '—' | '…' | '«' | '»' | '¿' | '¡')
}

pub fn tokenize(sentence: &str, opts: &TokenizerOptions) -> Result<Tokenized> {
    let words = words(sentence, opts);
    if words.is_empty() {
        return Err(usage(
            "sentence",
            if sentence.trim().is_empty() { "it is empty" } else { "no words are left after removing characters" },
            "pass a sentence with at least one word, e.g. attn-trace \"my shoes are small\"",
        ));
    }
    match &opts.fixed {
        Some(vocab) => with_fixed_vocab(words, vocab, opts),
        None => Ok(with_own_vocab(words, opts)),
    }
}

fn with_own_vocab(words: Vec<String>, opts: &TokenizerOptions) -> Tokenized {
    // Begin/end markers take the first ids, in that order.
    let mut specials: Vec<String> = Vec::new();
    for s in opts.bos.iter().chain(opts.eos.iter()) {
        if !specials.contains(s) {
            specials.push(s.clone());
        }
    }
    let base = specials.len();
    let own: Vec<(String, usize)> = match opts.order {
        VocabOrder::FirstSeen => {
            let mut seen: Vec<String> = Vec::new();
            for w in &words {
                if !seen.contains(w) {
                    seen.push(w.clone());
                }
            }
            seen.into_iter().enumerate().map(|(i, w)| (w, i)).collect()
        }
        // Exactly the notebooks' `{s: i for i, s in enumerate(sorted(words))}`: the sorted list
        // keeps repeats, so a repeated word takes its last index and some ids go unused
        // (seed 003: "are" is 2, nothing is 1, and the table has one row per word).
        VocabOrder::Sorted => {
            let mut sorted = words.clone();
            sorted.sort();
            sorted.into_iter().enumerate().map(|(i, w)| (w, i)).collect()
        }
    };
    let id = |t: &str| -> u32 {
        match specials.iter().position(|s| s == t) {
            Some(i) => i as u32,
            None => (base + own.iter().rev().find(|(w, _)| w == t).map(|(_, i)| *i).unwrap_or(0)) as u32,
        }
    };
    let rows = base + own.iter().map(|(_, i)| i + 1).max().unwrap_or(0);
    let tokens = wrap(words, opts);
    let ids = tokens.iter().map(|t| id(t)).collect();
    Tokenized { tokens, ids, vocab_size: rows }
}

fn wrap(words: Vec<String>, opts: &TokenizerOptions) -> Vec<String> {
    opts.bos.iter().cloned().chain(words).chain(opts.eos.iter().cloned()).collect()
}

fn with_fixed_vocab(words: Vec<String>, vocab: &BTreeMap<String, u32>, opts: &TokenizerOptions) -> Result<Tokenized> {
    for (flag, tok) in [("--unk", &opts.unk), ("--bos", &opts.bos), ("--eos", &opts.eos)] {
        if let Some(t) = tok {
            if !vocab.contains_key(t) {
                return Err(usage(
                    flag,
                    format!("{t:?} is not in the vocabulary file"),
                    "add it to the file or name a token that is in it",
                ));
            }
        }
    }
    let mut tokens = Vec::new();
    let mut ids = Vec::new();
    for t in wrap(words, opts) {
        match vocab.get(&t) {
            Some(&id) => ids.push(id),
            None => match &opts.unk {
                Some(unk) => ids.push(vocab[unk]),
                None => {
                    return Err(usage(
                        "sentence",
                        format!("the word {t:?} is not in the vocabulary file"),
                        "add it to the file, or map unknown words with --unk TOKEN",
                    ))
                }
            },
        }
        tokens.push(t);
    }
    let vocab_size = vocab.values().map(|&i| i as usize + 1).max().unwrap_or(0);
    Ok(Tokenized { tokens, ids, vocab_size })
}

/// Reads a vocabulary file: a JSON object `{"token": id, …}`, or plain text with one token
/// per line whose id is its line number (counting from 0).
pub fn load_vocab(path: &Path) -> Result<BTreeMap<String, u32>> {
    let what = format!("--vocab {}", path.display());
    let fix = "pass a readable UTF-8 vocabulary file";
    let bytes = super::text::read_file(path, &what, fix)?;
    let text = String::from_utf8(bytes).map_err(|_| usage(&what, "stream did not contain valid UTF-8", fix))?;
    let vocab: BTreeMap<String, u32> = if text.trim_start().starts_with('{') {
        crate::strict_json::parse(text.as_bytes())
            .and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()))
            .map_err(|e| {
                usage(
                    &what,
                    format!("not a JSON object of token to id: {e}"),
                    "write it as {\"token\": 0, …} or one token per line",
                )
            })?
    } else {
        let mut v = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            if !line.is_empty() {
                v.insert(line.to_string(), i as u32);
            }
        }
        v
    };
    if vocab.is_empty() {
        return Err(usage(&what, "the vocabulary is empty", "list at least one token"));
    }
    const MAX_ID: u32 = 50_000_000;
    if let Some((t, &id)) = vocab.iter().find(|(_, &id)| id > MAX_ID) {
        return Err(usage(
            &what,
            format!("token {t:?} has id {id}, above the limit of {MAX_ID}"),
            "number the tokens densely from 0",
        ));
    }
    Ok(vocab)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_000_first_seen() {
        let t = tokenize("my shoes are small, my feet are big.", &TokenizerOptions::default()).unwrap();
        assert_eq!(t.tokens, ["my", "shoes", "are", "small", "my", "feet", "are", "big."]);
        assert_eq!(t.ids, [0, 1, 2, 3, 0, 4, 2, 5]);
        assert_eq!(t.vocab_size, 6);
    }

    #[test]
    fn seed_003_sorted_puts_upper_case_first() {
        let opts = TokenizerOptions { order: VocabOrder::Sorted, ..Default::default() };
        let t = tokenize("My shoes are small, my feet are big.", &opts).unwrap();
        assert_eq!(t.ids, [0, 6, 2, 7, 5, 4, 2, 3]);
        assert_eq!(t.vocab_size, 8); // Embedding(8, 2) in the notebook
        let t = tokenize("Life is short, eat dessert first", &opts).unwrap();
        assert_eq!(t.ids, [0, 4, 5, 2, 1, 3]);
    }

    #[test]
    fn seed_001_fixed_vocab_with_markers() {
        let vocab: BTreeMap<String, u32> =
            [("<pad>", 0), ("<bos>", 1), ("<eos>", 2), ("time", 3), ("flies", 4), ("fast", 5)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
        let opts = TokenizerOptions {
            lowercase: true,
            fixed: Some(vocab),
            unk: Some("<pad>".into()),
            bos: Some("<bos>".into()),
            eos: Some("<eos>".into()),
            ..Default::default()
        };
        let t = tokenize("Time flies fast", &opts).unwrap();
        assert_eq!(t.ids, [1, 3, 4, 5, 2]);
        assert_eq!(t.tokens, ["<bos>", "time", "flies", "fast", "<eos>"]);
        let t = tokenize("Time flies slowly", &opts).unwrap();
        assert_eq!(t.ids, [1, 3, 4, 0, 2]);
    }

    #[test]
    fn empty_and_punctuation_only_are_errors() {
        assert!(tokenize("   ", &TokenizerOptions::default()).is_err());
        let opts = TokenizerOptions { remove_punctuation: true, ..Default::default() };
        assert!(tokenize("?! ...", &opts).is_err());
        assert_eq!(tokenize("big. dogs!", &opts).unwrap().tokens, ["big", "dogs"]);
    }
}
