//! A layer's attention a tile of queries at a time (`config/tiles.rs`): when none of its
//! `[head, query, key]` steps is recorded, each tile's scores, mask, softmax and context are
//! computed as `attention.rs` computes the whole layer's, the tile's weights go to the
//! recorder's readers (`--stats`, the summary's strongest links) and are dropped, and the
//! tiles' contexts are joined. Each query's row is the untiled row's arithmetic, so a layer
//! of one tile (every short input) is the untiled layer.

use super::pass::Pass;
use crate::config::tiles::SQUARE_STEPS;
use crate::config::ModelConfig;
use crate::trace::rows::WeightRows;
use crate::trace::Recorder;
use anyhow::Result;
use candle_core::Tensor;

/// Whether layer `l`'s attention runs in tiles: the model allows it, no square step of the
/// layer is recorded, and nothing reads the whole matrices (`--attribute`'s ledger, a T5
/// bias, an attribution-patching run's gradients).
pub fn tiles(cfg: &ModelConfig, l: usize, pass: &Pass, rec: &Recorder) -> bool {
    cfg.tiles_attention()
        && pass.bias.is_none()
        && pass.taps.is_none()
        && rec.attribution().is_none()
        && !SQUARE_STEPS.iter().any(|s| rec.wants(&format!("layers.{l}.{s}")))
}

/// The context `[head, pos, d_v]` of queries `q` (`[head, pos, d_k]`, at positions from
/// `offset` on) over keys `k` and values `v` (`[head, key_pos, d]`, repeated per query head).
pub fn context(
    cfg: &ModelConfig,
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    (l, offset): (usize, usize),
    rec: &mut Recorder,
) -> Result<Tensor> {
    let (h, n, _) = q.dims3()?;
    let keys = k.dim(1)?;
    let kt = k.t()?; // [head, d_k, key_pos]
    let tile = cfg.query_tile(n, keys);
    let mut contexts = Vec::with_capacity(n.div_ceil(tile));
    for first in (0..n).step_by(tile) {
        let rows = tile.min(n - first);
        let q_tile = q.narrow(1, first, rows)?; // [head, rows, d_k]
        let raw_scores = q_tile.matmul(&kt)?; // [head, rows, key_pos]
        let scaled = raw_scores.affine(cfg.scale, 0.0)?; // [head, rows, key_pos]
        let hidden = super::mask::hidden_rows(cfg, l, (offset + first, rows), keys); // [rows, key_pos]
        let scores = super::mask::capped_and_masked(cfg, scaled, hidden.as_deref(), l, rec)?; // [head, rows, key_pos]
        let weights = super::softmax::softmax_last_dim(&scores)?; // [head, rows, key_pos]
        let weights = match blind(hidden.as_deref(), (h, rows, keys)) {
            Some(flags) => super::mask::zero_rows(&weights, &flags)?, // [head, rows, key_pos]
            None => weights,
        };
        if rec.reads_rows(l) {
            let values = weights.flatten_all()?.to_vec1::<f32>()?;
            rec.weight_rows(&WeightRows { layer: l, first, queries: n, heads: h, rows, keys, values: &values });
        }
        contexts.push(weights.matmul(v)?); // [head, rows, d_v]
    }
    Ok(Tensor::cat(&contexts, 1)?) // [head, pos, d_v]
}

/// The `[head, query]` flags of a tile's queries that see no key (no knockouts here:
/// `ModelConfig::tiles_attention`), as `mask::blind_rows` gives them for a whole layer.
fn blind(hidden: Option<&[bool]>, (h, rows, keys): (usize, usize, usize)) -> Option<Vec<u8>> {
    let hidden = hidden?;
    let row: Vec<u8> = (0..rows).map(|q| u8::from(hidden[q * keys..(q + 1) * keys].iter().all(|&m| m))).collect();
    row.contains(&1).then(|| row.repeat(h))
}
