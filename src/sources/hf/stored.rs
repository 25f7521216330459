//! A mapped safetensors checkpoint's token table and head, left in the file and read a few
//! rows at a time as a GGUF file's are (`params::Stored`): a 7B model's two 32,000 × 4,096
//! tables are 1 GB in f32, of which an input needs a few rows and a product a slice at a time.

use super::checkpoint::Checkpoint;
use super::decoder::DecoderConfig;
use crate::error::usage;
use crate::sources::params::{Stored, StoredRows};
use anyhow::Result;
use candle_core::Tensor;
use std::sync::Arc;

pub(super) fn no_head(ck: &Checkpoint) -> anyhow::Error {
    usage(
        ck.what(),
        "the checkpoint has no lm_head.weight and config.json says tie_word_embeddings is false",
        "restore the checkpoint's lm_head, or the config's tie_word_embeddings",
    )
}

/// Whether `tables` will leave the token table stored (for the memory estimate).
pub(super) fn will_store(c: &DecoderConfig, ck: &Checkpoint) -> bool {
    let name = if !c.is_gpt2() {
        "model.embed_tokens.weight"
    } else if ck.has("transformer.wte.weight") {
        "transformer.wte.weight"
    } else {
        "wte.weight"
    };
    ck.has_rows(name, &[c.vocab_size, c.hidden_size])
}

/// The token table and head left in a mapped safetensors checkpoint (f32, bf16 or f16) and
/// read a few rows at a time, as a GGUF file's are; None for a pickle, read whole.
pub(super) fn tables(both: &Arc<(DecoderConfig, Checkpoint)>, token: &str) -> Result<Option<Stored>> {
    let (c, ck) = (&both.0, &both.1);
    let shape = [c.vocab_size, c.hidden_size];
    let rows = |name: &str| -> Arc<dyn StoredRows> {
        Arc::new(Rows { both: both.clone(), name: name.to_string(), dims: (shape[0], shape[1]) })
    };
    if !ck.has_rows(token, &shape) {
        return Ok(None);
    }
    let head = if c.tied() {
        None
    } else if ck.has_rows("lm_head.weight", &shape) {
        Some(rows("lm_head.weight"))
    } else {
        // Missing, or of another type or shape: `get` says which.
        ck.get("lm_head.weight", &shape).map_err(|e| if ck.has("lm_head.weight") { e } else { no_head(ck) })?;
        return Ok(None);
    };
    Ok(Some(Stored { token: rows(token), head }))
}

/// A vocabulary table of a mapped checkpoint, converted to f32 a few rows at a time.
#[derive(Debug)]
struct Rows {
    both: Arc<(DecoderConfig, Checkpoint)>,
    name: String,
    dims: (usize, usize),
}

impl StoredRows for Rows {
    fn rows(&self, start: usize, len: usize) -> Result<Tensor> {
        self.both.1.rows(&self.name, start, len)
    }

    fn dims(&self) -> (usize, usize) {
        self.dims
    }
}
