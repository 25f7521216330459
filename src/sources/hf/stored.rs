//! A mapped safetensors checkpoint's token table and head, left in the file and read a few
//! rows at a time as a GGUF file's are (`params::Stored`): a 7B model's two 32,000 × 4,096
//! tables are 1 GB in f32, of which an input needs a few rows and a product a slice at a time.

use super::checkpoint::Checkpoint;
use crate::error::usage;
use crate::params::{Stored, StoredRows};
use anyhow::Result;
use std::sync::Arc;

pub(super) fn no_head(ck: &Checkpoint) -> anyhow::Error {
    usage(
        ck.what(),
        "the checkpoint has no lm_head.weight and config.json says tie_word_embeddings is false",
        "restore the checkpoint's lm_head, or the config's tie_word_embeddings",
    )
}

/// The token table `token` and the head left in a mapped safetensors checkpoint (f32, bf16 or
/// f16) and read a few rows at a time, as a GGUF file's are; None for a pickle, read whole.
/// `reader` makes the reader of a table by name (the caller owns the checkpoint).
pub(super) fn tables(
    c: &Checkpoint,
    (shape, tied): ([usize; 2], bool),
    token: &str,
    reader: impl Fn(&str) -> Arc<dyn StoredRows>,
) -> Result<Option<Stored>> {
    if !c.has_rows(token, &shape) {
        return Ok(None);
    }
    let head = if tied {
        None
    } else if c.has_rows("lm_head.weight", &shape) {
        Some(reader("lm_head.weight"))
    } else {
        // Missing, or of another type or shape: `get` says which.
        c.get("lm_head.weight", &shape).map_err(|e| if c.has("lm_head.weight") { e } else { no_head(c) })?;
        return Ok(None);
    };
    Ok(Some(Stored { token: reader(token), head }))
}
