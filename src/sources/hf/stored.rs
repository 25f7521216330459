//! A mapped safetensors checkpoint's token table and head, left in the file and read a few
//! rows at a time as a GGUF file's are (`params::Stored`): a 7B model's two 32,000 × 4,096
//! tables are 1 GB in f32, of which an input needs a few rows and a product a slice at a time.

use super::checkpoint::Checkpoint;
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

/// Whether `tables` will leave the token table stored (for the memory estimate): `shape`
/// is [vocab_size, d_model].
pub(super) fn will_store(gpt2: bool, shape: [usize; 2], ck: &Checkpoint) -> bool {
    let name = if !gpt2 {
        "model.embed_tokens.weight"
    } else if ck.has("transformer.wte.weight") {
        "transformer.wte.weight"
    } else {
        "wte.weight"
    };
    ck.has_rows(name, &shape)
}

/// The token table `token` and the head left in a mapped safetensors checkpoint (f32, bf16 or
/// f16) and read a few rows at a time, as a GGUF file's are; None for a pickle, read whole.
/// `owner` holds the checkpoint (`ck` finds it there), and the tables hold `owner`.
pub(super) fn tables<T: Send + Sync + 'static>(
    owner: &Arc<T>,
    ck: fn(&T) -> &Checkpoint,
    (shape, tied): ([usize; 2], bool),
    token: &str,
) -> Result<Option<Stored>> {
    let rows = |name: &str| -> Arc<dyn StoredRows> {
        Arc::new(Rows { owner: owner.clone(), ck, name: name.to_string(), dims: (shape[0], shape[1]) })
    };
    let c = ck(owner);
    if !c.has_rows(token, &shape) {
        return Ok(None);
    }
    let head = if tied {
        None
    } else if c.has_rows("lm_head.weight", &shape) {
        Some(rows("lm_head.weight"))
    } else {
        // Missing, or of another type or shape: `get` says which.
        c.get("lm_head.weight", &shape).map_err(|e| if c.has("lm_head.weight") { e } else { no_head(c) })?;
        return Ok(None);
    };
    Ok(Some(Stored { token: rows(token), head }))
}

/// A vocabulary table of a mapped checkpoint, converted to f32 a few rows at a time.
struct Rows<T> {
    owner: Arc<T>,
    ck: fn(&T) -> &Checkpoint,
    name: String,
    dims: (usize, usize),
}

impl<T> std::fmt::Debug for Rows<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rows({}, {:?})", self.name, self.dims)
    }
}

impl<T: Send + Sync> StoredRows for Rows<T> {
    fn rows(&self, start: usize, len: usize) -> Result<Tensor> {
        (self.ck)(&self.owner).rows(&self.name, start, len)
    }

    fn dims(&self) -> (usize, usize) {
        self.dims
    }
}
