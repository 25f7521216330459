//! Attention in tiles of queries: when no step as large as `[head, query, key]` of a layer
//! is recorded, its scores, softmax and context are computed for a few queries at a time, so
//! a long input never holds a whole score matrix (SmolLM2 at 8,192 tokens: 2.4 GB per copy).
//! The model (`model/tiled.rs`) and the memory estimate (`settings/limits.rs`) read the same
//! rule from here.

use super::{Arithmetic, ModelConfig};

/// Bytes of one tile's scores (one copy, `[head, rows, keys]` in f32) by default: large
/// enough that every short input is one tile, so its arithmetic is the untiled one.
pub const TILE_BYTES: usize = 16 << 20;

/// Bytes of the logits computed at once for predictions alone.
pub const LOGIT_BYTES: usize = 64 << 20;

/// The steps as large as `[head, query, key]` (or `[query, key]`): recording any of a layer's
/// needs its whole score matrix.
pub const SQUARE_STEPS: [&str; 5] =
    ["attn.raw_scores", "attn.mask", "attn.scores_uncapped", "attn.scores", "attn.weights"];

impl ModelConfig {
    /// Whether this model's attention may run in tiles (given that no square step is
    /// recorded): not with llama.cpp's kernels (whose f16 sums are written for whole
    /// matrices), knocked-out edges or T5's position bias (each a whole `[query, key]` map).
    pub fn tiles_attention(&self) -> bool {
        self.parts.arithmetic == Arithmetic::F32
            && self.interventions.knockout.is_empty()
            && self.parts.relative_bias.is_none()
    }

    /// Queries per tile for `queries` queries against `keys` keys: `--query-tile` if given,
    /// else as many as keep one copy of the tile's scores within [`TILE_BYTES`]; at least 1,
    /// at most `queries`.
    pub fn query_tile(&self, queries: usize, keys: usize) -> usize {
        let row = self.heads.max(1).saturating_mul(keys.max(1)).saturating_mul(4);
        let rows = self.parts.query_tile.unwrap_or(TILE_BYTES / row);
        rows.clamp(1, queries.max(1))
    }

    /// Positions whose logits are computed together when only their predictions are kept
    /// (`model/unembed.rs`): as many as keep the logits near 64 MiB, at least 1.
    pub fn logit_rows(&self) -> usize {
        (LOGIT_BYTES / self.vocab_size.max(1).saturating_mul(4)).max(1)
    }
}
