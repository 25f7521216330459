//! `--pad-to` on the toy model: the pad token, and its embedding.
//!
//! The pad token is `<pad>`. With a `--vocab` file that lists `<pad>` (seed notebook 001's
//! does, as id 0), the pad is that token, whose embedding row is the table's. Otherwise its id
//! is the first one past the vocabulary (the token table's row count) and its embedding is a
//! zero row, as `nn.Embedding(padding_idx=…)` zeroes the pad's row, appended *after* the
//! drawn rows, so that the vocabulary's draws, and with them every number of an unpadded run,
//! stay what they were. The pad is hidden from every query by the attention mask
//! (`config.padding.attention_mask`, as `nn.TransformerEncoderLayer`'s `src_key_padding_mask`
//! and, with `--causal`, together with the causal mask), so a real token never sees it. The
//! LM head (`--lm-head`) still predicts over the vocabulary alone.

use super::loaded::Loaded;
use crate::config::{ModelConfig, Padding, Positions};
use crate::error::usage;
use crate::params::Input;
use crate::params::Params;
use anyhow::Result;
use candle_core::{Device, Tensor};
use std::collections::BTreeMap;

/// The pad token's label.
pub const PAD: &str = "<pad>";

/// Pads `tokens` and `ids` to `n` on the left or the right with the pad token and sets
/// `cfg.parts.padding`. `vocab` is the `--vocab` file, if any; `cfg.vocab_size` is the token
/// table's row count.
pub fn pad(
    tokens: &mut Vec<String>,
    ids: &mut Vec<u32>,
    cfg: &mut ModelConfig,
    (n, left): (usize, bool),
    vocab: Option<&BTreeMap<String, u32>>,
) -> Result<()> {
    let len = ids.len();
    if cfg.positions == Positions::Learned && n > cfg.max_len {
        return Err(usage(
            "--pad-to",
            format!("{n} is more than the learned position table's {} rows", cfg.max_len),
            format!("pass --max-len {n} or more, or --pad-to {} or less", cfg.max_len),
        ));
    }
    if len > n {
        return Err(usage(
            "--pad-to",
            format!("the sentence has {len} tokens, more than {n}"),
            format!("pass --pad-to {len} or more"),
        ));
    }
    let pad_id = match vocab.and_then(|v| v.get(PAD)) {
        Some(&id) => id,
        None => u32::try_from(cfg.vocab_size).map_err(|_| anyhow::anyhow!("internal: vocabulary too large"))?,
    };
    let (at, pads) = (if left { 0 } else { len }, n - len);
    ids.splice(at..at, std::iter::repeat_n(pad_id, pads));
    tokens.splice(at..at, std::iter::repeat_n(PAD.to_string(), pads));
    let mut attention_mask = vec![1u8; len];
    attention_mask.splice(at..at, std::iter::repeat_n(0, pads));
    cfg.parts.padding = Some(Padding { side: if left { "left" } else { "right" }, length: n, pad_id, attention_mask });
    Ok(())
}

/// A pad past the vocabulary has no row in the token table: the embedding rows are gathered
/// here, the pads' as zeros (the model takes gathered rows as they are).
pub fn embed_rows(params: &mut Params, loaded: &Loaded) -> Result<()> {
    let (Some(p), Input::Ids { ids, .. }, Some(table)) = (&loaded.cfg.parts.padding, &loaded.input, &params.token)
    else {
        return Ok(());
    };
    let (rows, d) = table.dims2()?;
    if (p.pad_id as usize) < rows {
        return Ok(());
    }
    let zero = Tensor::zeros((1, d), table.dtype(), &Device::Cpu)?;
    let with_pad = Tensor::cat(&[table, &zero], 0)?; // [vocab + 1, d_model]
    let idx = Tensor::new(ids.as_slice(), &Device::Cpu)?;
    params.token_rows = Some(with_pad.index_select(&idx, 0)?); // [pos, d_model]
    Ok(())
}
