//! A GGUF file's tokenizer, built from its metadata with the tokenizers crate as transformers'
//! GGUF converter builds it: for `tokenizer.ggml.model` `gpt2`, a byte-level BPE from
//! `tokenizer.ggml.tokens` and `.merges` (ByteLevel pre-tokenizer without a prefix space and
//! decoder), with the control tokens (`token_type` 3) as special tokens and a BOS prepended
//! when `tokenizer.ggml.add_bos_token` says so. (`llama`, SentencePiece-style from tokens and
//! scores, is not built yet: an error says so.)

use crate::error::usage;
use anyhow::Result;
use candle_core::quantized::gguf_file::Value;
use std::collections::HashMap;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, Tokenizer};

/// The tokenizer, and whether it prepends a BOS token by default.
pub fn build(meta: &HashMap<String, Value>, what: &str) -> Result<(Tokenizer, bool)> {
    let missing = |k: &str| usage(what, format!("the GGUF has no {k}"), "use a GGUF file that carries its tokenizer");
    let strings = |k: &str| -> Result<Vec<String>> {
        let v = meta.get(k).ok_or_else(|| missing(k))?;
        let items = v.to_vec().map_err(|_| usage(what, format!("{k} is not an array"), "use a complete GGUF file"))?;
        items
            .iter()
            .map(|s| {
                s.to_string()
                    .cloned()
                    .map_err(|_| usage(what, format!("{k} holds a non-string"), "use a complete GGUF file"))
            })
            .collect()
    };
    let model = meta.get("tokenizer.ggml.model").and_then(|v| v.to_string().ok()).cloned().unwrap_or_default();
    if model != "gpt2" {
        return Err(usage(
            what,
            format!("tokenizer.ggml.model {model:?} is not supported yet"),
            "use a GGUF with a byte-level BPE (gpt2) tokenizer",
        ));
    }
    let tokens = strings("tokenizer.ggml.tokens")?;
    let merges: Vec<(String, String)> = strings("tokenizer.ggml.merges")?
        .into_iter()
        .filter_map(|m| m.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string())))
        .collect();
    let vocab: Vocab = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| usage(what, format!("the GGUF's BPE cannot be built ({e})"), "use a complete GGUF file"))?;
    let mut tok = Tokenizer::new(bpe);
    tok.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    tok.with_decoder(Some(ByteLevel::default()));
    // Control tokens (`<|im_start|>`, `<|endoftext|>`…) are matched whole, never split.
    let types: Vec<i64> = meta
        .get("tokenizer.ggml.token_type")
        .and_then(|v| v.to_vec().ok())
        .map(|v| v.iter().map(|t| t.to_i32().map(i64::from).unwrap_or(1)).collect())
        .unwrap_or_default();
    let specials: Vec<AddedToken> =
        tokens.iter().zip(&types).filter(|(_, &t)| t == 3).map(|(s, _)| AddedToken::from(s.clone(), true)).collect();
    tok.add_special_tokens(specials).map_err(|e| {
        usage(what, format!("the GGUF's special tokens cannot be added ({e})"), "use a complete GGUF file")
    })?;
    let id = |k: &str| meta.get(k).and_then(|v| v.to_u32().ok());
    let add_bos = meta.get("tokenizer.ggml.add_bos_token").and_then(|v| v.to_bool().ok()).unwrap_or(false);
    if let (true, Some(bos)) = (add_bos, id("tokenizer.ggml.bos_token_id")) {
        let name = tokens.get(bos as usize).cloned().ok_or_else(|| missing("tokenizer.ggml.bos_token_id's token"))?;
        let post = TemplateProcessing::builder()
            .try_single(format!("{name}:0 $A:0"))
            .and_then(|b| b.special_tokens(vec![(name.clone(), bos)]).build().map_err(|e| e.to_string()))
            .map_err(|e| usage(what, format!("the BOS template cannot be built ({e})"), "use a complete GGUF file"))?;
        tok.with_post_processor(Some(post));
    }
    Ok((tok, add_bos))
}
