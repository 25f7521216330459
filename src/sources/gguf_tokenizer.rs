//! A GGUF file's tokenizer, built from its metadata with the tokenizers crate:
//! - `tokenizer.ggml.model` `gpt2`: a byte-level BPE from `tokenizer.ggml.tokens` and `.merges`,
//!   its words split as llama.cpp splits them for the file's `tokenizer.ggml.pre` (Llama 3,
//!   Qwen2, SmolLM, DeepSeek… each have their own rule for digits, contractions, whitespace
//!   and newlines: see `gguf_pretok`; absent is llama.cpp's `default`, an unknown name is an
//!   error), then mapped to GPT-2's byte alphabet, and the ByteLevel decoder. GGUF is
//!   llama.cpp's format, so its split is the model's; transformers' GGUF converter (4.46)
//!   splits every `llama`-architecture file with GPT-2's rule instead (see
//!   fixtures/gguf/tokenize for where the two differ);
//! - `llama` (SentencePiece: Llama 2, TinyLlama, Mistral v0.1…), as transformers' GGUF
//!   converter (`GGUFLlamaConverter`, 4.46) builds it: a BPE with byte fallback whose
//!   merges are derived from the tokens' scores (see `spm_merges`), "▁" prepended and spaces
//!   replaced by "▁" (unless `tokenizer.ggml.add_space_prefix` is false), `<unk>` fused.
//!
//! Both: the control tokens (`token_type` 3) are special tokens, matched whole, and so are
//! user-defined ones (`token_type` 4, as llama.cpp matches them); a BOS is
//! prepended when `tokenizer.ggml.add_bos_token` says so (absent: no for `gpt2`, yes for
//! `llama`, as llama.cpp and transformers' LlamaTokenizerFast default).

use super::gguf_pretok;
use crate::error::{quote, usage};
use anyhow::Result;
use candle_core::quantized::gguf_file::Value;
use std::collections::HashMap;
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::{Prepend, Replace, Sequence as NormalizerSequence};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, Tokenizer};

/// The tokenizer kinds this reader builds, for the error that names another.
const SUPPORTED: &str = "gpt2 (byte-level BPE) and llama (SentencePiece)";

/// The tokenizer, and whether it prepends a BOS token by default.
pub fn build(meta: &HashMap<String, Value>, what: &str) -> Result<(Tokenizer, bool)> {
    let m = Meta { meta, what };
    let model = meta.get("tokenizer.ggml.model").and_then(|v| v.to_string().ok()).cloned().unwrap_or_default();
    let tokens = m.strings("tokenizer.ggml.tokens")?;
    let vocab: Vocab = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
    let (mut tok, bos_default) = match model.as_str() {
        "gpt2" => (m.gpt2(vocab)?, false),
        "llama" => (m.llama(&tokens, vocab)?, true),
        other => {
            return Err(usage(
                what,
                format!("tokenizer.ggml.model {other:?} is not supported; supported: {SUPPORTED}"),
                "use a GGUF whose tokenizer is one of those",
            ))
        }
    };
    // Control tokens (`<s>`, `<|im_start|>`, `<|endoftext|>`…) are matched whole, never split.
    // A file without token types gets <unk>, BOS and EOS, as transformers' converter does.
    let types: Option<Vec<i64>> = meta
        .get("tokenizer.ggml.token_type")
        .and_then(|v| v.to_vec().ok())
        .map(|v| v.iter().map(|t| t.to_i32().map(i64::from).unwrap_or(1)).collect());
    let special_ids: Vec<usize> = match &types {
        Some(types) => types.iter().enumerate().filter(|(_, &t)| t == 3).map(|(i, _)| i).collect(),
        None => ["unknown", "bos", "eos"]
            .iter()
            .filter_map(|k| m.id(&format!("tokenizer.ggml.{k}_token_id")))
            .map(|i| i as usize)
            .collect(),
    };
    let specials: Vec<AddedToken> =
        special_ids.iter().filter_map(|&i| tokens.get(i)).map(|s| AddedToken::from(s.clone(), true)).collect();
    tok.add_special_tokens(specials).map_err(|e| m.bad(format!("its special tokens cannot be added ({e})")))?;
    // User-defined tokens (`token_type` 4: Gemma's runs of spaces and newlines, `<h1>`…) are
    // matched whole in the raw text before the model splits the rest, as llama.cpp's
    // `tokenizer_st_partition` matches them; they are text, not control tokens.
    let user: Vec<AddedToken> = types
        .iter()
        .flatten()
        .enumerate()
        .filter(|(_, &t)| t == 4)
        .filter_map(|(i, _)| tokens.get(i))
        .map(|s| AddedToken::from(s.clone(), false).normalized(false))
        .collect();
    tok.add_tokens(user).map_err(|e| m.bad(format!("its user-defined tokens cannot be added ({e})")))?;
    let add_bos = meta.get("tokenizer.ggml.add_bos_token").and_then(|v| v.to_bool().ok()).unwrap_or(bos_default);
    if let (true, Some(bos)) = (add_bos, m.id("tokenizer.ggml.bos_token_id")) {
        let name = tokens.get(bos as usize).cloned().ok_or_else(|| m.missing("tokenizer.ggml.bos_token_id's token"))?;
        let post = TemplateProcessing::builder()
            .try_single(format!("{name}:0 $A:0"))
            .and_then(|b| b.special_tokens(vec![(name.clone(), bos)]).build().map_err(|e| e.to_string()))
            .map_err(|e| m.bad(format!("its BOS template cannot be built ({e})")))?;
        tok.with_post_processor(Some(post));
    }
    Ok((tok, add_bos))
}

/// The metadata, and how errors name the file.
struct Meta<'a> {
    meta: &'a HashMap<String, Value>,
    what: &'a str,
}

impl Meta<'_> {
    fn missing(&self, k: &str) -> anyhow::Error {
        usage(self.what, format!("the GGUF has no {k}"), "use a GGUF file that carries its tokenizer")
    }

    fn bad(&self, why: String) -> anyhow::Error {
        usage(self.what, format!("the GGUF's tokenizer is malformed: {why}"), "use a complete GGUF file")
    }

    fn id(&self, k: &str) -> Option<u32> {
        self.meta.get(k).and_then(|v| v.to_u32().ok())
    }

    fn strings(&self, k: &str) -> Result<Vec<String>> {
        let v = self.meta.get(k).ok_or_else(|| self.missing(k))?;
        let items = v.to_vec().map_err(|_| self.bad(format!("{k} is not an array")))?;
        items.iter().map(|s| s.to_string().cloned().map_err(|_| self.bad(format!("{k} holds a non-string")))).collect()
    }

    fn floats(&self, k: &str) -> Result<Vec<f32>> {
        let v = self.meta.get(k).ok_or_else(|| self.missing(k))?;
        let items = v.to_vec().map_err(|_| self.bad(format!("{k} is not an array")))?;
        items.iter().map(|s| s.to_f32().map_err(|_| self.bad(format!("{k} holds a non-float")))).collect()
    }

    fn gpt2(&self, vocab: Vocab) -> Result<Tokenizer> {
        let merges: Vec<(String, String)> = self
            .strings("tokenizer.ggml.merges")?
            .into_iter()
            .filter_map(|m| m.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string())))
            .collect();
        let rule = self.pre_rule()?;
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .ignore_merges(rule.ignore_merges)
            .build()
            .map_err(|e| self.bad(format!("its BPE cannot be built ({e})")))?;
        let mut tok = Tokenizer::new(bpe);
        tok.with_pre_tokenizer(Some(gguf_pretok::pre_tokenizer(rule).map_err(|e| self.bad(e))?));
        tok.with_decoder(Some(ByteLevel::default()));
        Ok(tok)
    }

    /// llama.cpp's pre-tokenizer for `tokenizer.ggml.pre`; a name it does not list (or one
    /// this reader lacks) is refused rather than split with another type's rule, which would
    /// give other tokens than the model was trained on.
    fn pre_rule(&self) -> Result<&'static gguf_pretok::Rule> {
        let pre = match self.meta.get("tokenizer.ggml.pre") {
            None => None,
            Some(v) => Some(v.to_string().map_err(|_| self.bad("tokenizer.ggml.pre is not a string".into()))?),
        };
        gguf_pretok::rule(pre.map(String::as_str)).ok_or_else(|| {
            usage(
                self.what,
                format!(
                    "tokenizer.ggml.pre {} is not supported; supported: {}",
                    quote(pre.map_or("", String::as_str)),
                    gguf_pretok::supported()
                ),
                "use a GGUF whose pre-tokenizer is one of those",
            )
        })
    }

    fn llama(&self, tokens: &[String], vocab: Vocab) -> Result<Tokenizer> {
        let scores = self.floats("tokenizer.ggml.scores")?;
        if scores.len() != tokens.len() {
            return Err(self.bad(format!("{} scores for {} tokens", scores.len(), tokens.len())));
        }
        // The merges are ordered by score: NaN has no place in that order (sorting by it
        // panicked).
        if let Some(i) = scores.iter().position(|s| s.is_nan()) {
            return Err(self.bad(format!("tokenizer.ggml.scores holds NaN (token {i})")));
        }
        let merges = spm_merges(tokens, &scores);
        let mut b = BPE::builder().vocab_and_merges(vocab, merges).fuse_unk(true).byte_fallback(true);
        let unk = self.id("tokenizer.ggml.unknown_token_id").and_then(|i| tokens.get(i as usize));
        if let Some(unk) = unk {
            b = b.unk_token(unk.clone());
        }
        let bpe = b.build().map_err(|e| self.bad(format!("its BPE cannot be built ({e})")))?;
        let mut tok = Tokenizer::new(bpe);
        let prefix = self.meta.get("tokenizer.ggml.add_space_prefix").and_then(|v| v.to_bool().ok()).unwrap_or(true);
        let replace = Replace::new(" ", "▁").map_err(|e| self.bad(e.to_string()))?;
        let mut norms = Vec::new();
        if prefix {
            norms.push(Prepend::new("▁".into()).into());
        }
        norms.push(replace.into());
        tok.with_normalizer(Some(NormalizerSequence::new(norms)))
            .map_err(|e| self.bad(format!("its normalizer cannot be set ({e})")))?;
        let mut decoders = vec![
            ByteFallback::new().into(),
            Fuse::new().into(),
            Replace::new("▁", " ").map_err(|e| self.bad(e.to_string()))?.into(),
        ];
        if prefix {
            decoders.push(Strip::new(' ', 1, 0).into());
        }
        tok.with_decoder(Some(DecoderSequence::new(decoders)));
        Ok(tok)
    }
}

/// A SentencePiece vocabulary's BPE merges, derived from the pieces and their scores exactly as
/// transformers' `GGUFTokenizerSkeleton` derives them: every split of every piece into two
/// pieces of the vocabulary is a merge; a piece's merges are ordered by the two halves' scores
/// (highest first), and all merges by the merged piece's score (highest first). Both sorts are
/// stable, and pieces are visited in vocabulary order (a repeated piece once, with the last
/// score), as Python's dict iteration does. SentencePiece's own BPE merges the pair whose result
/// scores highest, which this order reproduces.
pub fn spm_merges(tokens: &[String], scores: &[f32]) -> Vec<(String, String)> {
    // Each piece's place in `order` (first seen) and its score (the last given). ahash keeps
    // the lookups DoS-resistant, as std's SipHash, at a fraction of its cost: Gemma 3's
    // 262,144 pieces took 0.4 s here with SipHash and a map per lookup.
    let mut at: HashMap<&str, usize, ahash::RandomState> =
        HashMap::with_capacity_and_hasher(tokens.len(), ahash::RandomState::new());
    let mut order: Vec<(&str, f32)> = Vec::with_capacity(tokens.len());
    for (t, &s) in tokens.iter().zip(scores) {
        match at.entry(t.as_str()) {
            std::collections::hash_map::Entry::Occupied(e) => order[*e.get()].1 = s,
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(order.len());
                order.push((t.as_str(), s));
            }
        }
    }
    let score = |p: &str| at.get(p).map(|&i| order[i].1);
    let desc = |a: f32, b: f32| b.partial_cmp(&a).unwrap_or(std::cmp::Ordering::Equal);
    let mut merges: Vec<(&str, &str, f32)> = Vec::new();
    let mut local: Vec<(&str, &str, f32, f32)> = Vec::new();
    for &(piece, merged) in &order {
        local.clear();
        for (i, _) in piece.char_indices().skip(1) {
            let (l, r) = piece.split_at(i);
            if let (Some(a), Some(b)) = (score(l), score(r)) {
                local.push((l, r, a, b));
            }
        }
        local.sort_by(|x, y| desc(x.2, y.2).then(desc(x.3, y.3)));
        merges.extend(local.iter().map(|&(l, r, _, _)| (l, r, merged)));
    }
    merges.sort_by(|a, b| desc(a.2, b.2));
    merges.into_iter().map(|(l, r, _)| (l.to_string(), r.to_string())).collect()
}

#[cfg(test)]
mod tests {
    use super::spm_merges;
    use std::collections::{HashMap, HashSet};

    /// The definition as first written (maps looked up in each comparison), kept to check
    /// the faster `spm_merges` against.
    fn reference(tokens: &[String], scores: &[f32]) -> Vec<(String, String)> {
        let mut score: HashMap<&str, f32> = HashMap::new();
        let mut order: Vec<&str> = Vec::new();
        for (t, &s) in tokens.iter().zip(scores) {
            if score.insert(t.as_str(), s).is_none() {
                order.push(t.as_str());
            }
        }
        let known: HashSet<&str> = order.iter().copied().collect();
        let desc = |a: f32, b: f32| b.partial_cmp(&a).unwrap_or(std::cmp::Ordering::Equal);
        let mut merges: Vec<(&str, &str, f32)> = Vec::new();
        for piece in &order {
            let mut local: Vec<(&str, &str)> = piece
                .char_indices()
                .skip(1)
                .map(|(i, _)| piece.split_at(i))
                .filter(|(l, r)| known.contains(l) && known.contains(r))
                .collect();
            local.sort_by(|a, b| desc(score[a.0], score[b.0]).then(desc(score[a.1], score[b.1])));
            merges.extend(local.into_iter().map(|(l, r)| (l, r, score[piece])));
        }
        merges.sort_by(|a, b| desc(a.2, b.2));
        merges.into_iter().map(|(l, r, _)| (l.to_string(), r.to_string())).collect()
    }

    /// Random vocabularies over a few one- and multi-byte letters, with repeated pieces (the
    /// last score counts), tied and infinite scores, and more scores than pieces: the same
    /// merges. (NaN scores are refused before the merges are made.)
    #[test]
    fn the_fast_merges_are_the_definitions() {
        let letters = ["a", "b", "▁", "é", "c", "<0x0A>"];
        let mut g = crate::torch_rng::TorchGenerator::new(7, crate::torch_rng::Kernel::Avx2);
        let mut next = move |n: u64| g.random64() % n;
        for round in 0..20 {
            let mut tokens: Vec<String> = letters.iter().map(|s| s.to_string()).collect();
            for _ in 0..600 {
                let len = 2 + next(4) as usize;
                tokens.push((0..len).map(|_| letters[next(letters.len() as u64) as usize]).collect());
            }
            let scores: Vec<f32> = (0..tokens.len() + round % 3)
                .map(|_| match next(20) {
                    0 => f32::NEG_INFINITY,
                    1..=5 => -1.0,
                    k => -(k as f32) - next(1000) as f32 / 1000.0,
                })
                .collect();
            assert_eq!(spm_merges(&tokens, &scores), reference(&tokens, &scores), "round {round}");
        }
    }

    #[test]
    fn merges_follow_the_merged_pieces_scores() {
        let t: Vec<String> = ["a", "b", "c", "ab", "bc", "abc"].iter().map(|s| s.to_string()).collect();
        // "bc" scores above "ab"; "abc" splits as a+bc (halves 0, -1) before ab+c (-2, 0).
        let s = [0.0, 0.0, 0.0, -2.0, -1.0, -3.0];
        let m = spm_merges(&t, &s);
        let m: Vec<String> = m.iter().map(|(l, r)| format!("{l} {r}")).collect();
        assert_eq!(m, ["b c", "a b", "a bc", "ab c"]);
    }

    /// A SentencePiece vocabulary whose scores hold NaN is refused in one line (its merges
    /// could not be ordered: sorting by NaN panicked).
    #[test]
    fn nan_scores_are_refused_not_sorted() {
        use candle_core::quantized::gguf_file::Value;
        let strs = |v: &[&str]| Value::Array(v.iter().map(|s| Value::String(s.to_string())).collect());
        let mut meta = HashMap::new();
        meta.insert("tokenizer.ggml.model".to_string(), Value::String("llama".into()));
        meta.insert("tokenizer.ggml.tokens".to_string(), strs(&["a", "b", "ab", "ba"]));
        let scores = |v: &[f32]| Value::Array(v.iter().map(|&x| Value::F32(x)).collect());
        meta.insert("tokenizer.ggml.scores".to_string(), scores(&[0.0, 0.0, f32::NAN, -1.0]));
        let err = super::build(&meta, "--model m.gguf").err().unwrap().to_string();
        assert!(err.contains("tokenizer.ggml.scores holds NaN (token 2)") && !err.contains('\n'), "{err}");
        meta.insert("tokenizer.ggml.scores".to_string(), scores(&[0.0, 0.0, -2.0, -1.0]));
        assert!(super::build(&meta, "--model m.gguf").is_ok());
    }
}
