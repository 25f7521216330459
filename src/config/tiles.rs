//! Attention in tiles of queries: when no step as large as `[head, query, key]` of a layer
//! is recorded, its scores, softmax and context are computed for a few queries at a time, so
//! a long input never holds a whole score matrix (SmolLM2 at 8,192 tokens: 2.4 GB per copy).
//! The model (`model/tiled.rs`) and the memory estimate (`settings/limits.rs`) read the same
//! rule from here. Likewise the FFN: when none of a layer's `[pos, d_ff]` steps is recorded,
//! it runs on a few positions at a time (`model/ffn.rs`), so a 7B's 8,192 positions never hold
//! four 361 MB intermediates at once.

use super::{Arithmetic, ModelConfig};

/// Bytes of one tile's scores (one copy, `[head, rows, keys]` in f32) by default: large
/// enough that every short input is one tile, so its arithmetic is the untiled one.
pub const TILE_BYTES: usize = 16 << 20;

/// Bytes of the logits computed at once for predictions alone.
pub const LOGIT_BYTES: usize = 64 << 20;

/// Bytes of one FFN tile's `[rows, d_ff]` intermediate (one copy, f32) by default: every input
/// of SmolLM2, GPT-2 and the 1 B Llama up to 2,048 positions is one tile, so its arithmetic
/// is the untiled one. Each row's products are the same sums either way (`model/ffn.rs`).
pub const FFN_TILE_BYTES: usize = 64 << 20;

/// A dense FFN's steps as wide as `[pos, d_ff]`: recording any of a layer's needs them whole.
pub const WIDE_FFN_STEPS: [&str; 4] = ["ffn.hidden", "ffn.gate", "ffn.up", "ffn.act"];

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

    /// Positions per FFN tile for `positions` positions, given that none of the layer's wide
    /// steps is recorded: as many as keep one `[rows, d_ff]` within [`FFN_TILE_BYTES`], at
    /// least 16 (a tile of one row would be a matrix-vector product, summed in another order),
    /// all of them under `--arithmetic ggml` (whose products are llama.cpp's whole-matrix ones).
    pub fn ffn_rows(&self, positions: usize) -> usize {
        if self.parts.arithmetic != Arithmetic::F32 {
            return positions.max(1);
        }
        (FFN_TILE_BYTES / self.d_ff.max(1).saturating_mul(4)).max(16).min(positions.max(1))
    }
}
