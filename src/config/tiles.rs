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

    /// Queries per tile for `queries` queries against `keys` keys: `asked` (`--query-tile`,
    /// `RunConfig::query_tile`) if given, else as many as keep one copy of the tile's scores
    /// within [`TILE_BYTES`]; at least 1, at most `queries`.
    pub fn query_tile(&self, asked: Option<usize>, queries: usize, keys: usize) -> usize {
        let row = self.heads.max(1).saturating_mul(keys.max(1)).saturating_mul(4);
        let rows = asked.unwrap_or(TILE_BYTES / row);
        rows.clamp(1, queries.max(1))
    }

    /// Positions whose logits are computed together when only their predictions are kept
    /// (`model/unembed.rs`): as many as keep the logits near 64 MiB, at least 16 (see
    /// [`even_tiles`]).
    pub fn logit_rows(&self) -> usize {
        (LOGIT_BYTES / self.vocab_size.max(1).saturating_mul(4)).max(16)
    }

    /// Positions per FFN tile for `positions` positions, given that none of the layer's wide
    /// steps is recorded: as many as keep one `[rows, d_ff]` within [`FFN_TILE_BYTES`], at
    /// least 16 (see [`even_tiles`]), all of them under `--arithmetic ggml` (whose products are llama.cpp's whole-matrix ones).
    pub fn ffn_rows(&self, positions: usize) -> usize {
        if self.parts.arithmetic != Arithmetic::F32 {
            return positions.max(1);
        }
        (FFN_TILE_BYTES / self.d_ff.max(1).saturating_mul(4)).max(16).min(positions.max(1))
    }
}

/// `n` positions in tiles of about `rows` (at least 16): each tile's (first, len), in order,
/// their lengths differing by one at most, so no tile is a single row unless `n` is 1. A
/// one-row product is a matrix-vector product, which the gemm crate sums in another order
/// than a matrix product (SmolLM2's last prediction at 342 tokens moved in its sixth digit
/// when its logits came from a tile of one row); in tiles of several rows each row's sums are
/// the untiled product's, bit for bit.
pub fn even_tiles(n: usize, rows: usize) -> impl Iterator<Item = (usize, usize)> {
    let count = n.div_ceil(rows.max(1));
    let (size, longer) = (n / count.max(1), n % count.max(1));
    (0..count).map(move |i| (i * size + i.min(longer), size + usize::from(i < longer)))
}

#[cfg(test)]
mod tests {
    use super::even_tiles;

    #[test]
    fn even_tiles_cover_every_position_once_in_near_equal_tiles() {
        for n in 0..200 {
            for rows in [1, 2, 16, 17, 64, 341] {
                let tiles: Vec<(usize, usize)> = even_tiles(n, rows).collect();
                let mut next = 0;
                for &(first, len) in &tiles {
                    assert_eq!(first, next, "{n} {rows}");
                    assert!(len <= rows && len > 0, "{n} {rows} {len}");
                    next += len;
                }
                assert_eq!(next, n);
                let (min, max) = (tiles.iter().map(|t| t.1).min(), tiles.iter().map(|t| t.1).max());
                assert!(max.zip(min).is_none_or(|(max, min)| max - min <= 1));
                if rows >= 16 && n >= 2 {
                    assert!(min.unwrap() >= 2, "{n} {rows}");
                }
            }
        }
    }
}
