//! T5's relative position bias (`position_bias`): each head adds a learned scalar to the
//! score of every query–key pair, chosen by the bucket of the key's offset from the query
//! (`config::RelBias::bucket`). Computed once per pass from the first layer's table and
//! added to every layer's scores, as transformers shares it.

use crate::config::ModelConfig;
use crate::hook::Hooks;
use crate::params::Params;
use anyhow::Result;
use candle_core::{Device, Tensor};

/// The bias of queries at positions `offset..offset + n` against keys `0..offset + n`,
/// `[head, query_pos, key_pos]`, recorded as `position_bias`; `None` for a model without one.
pub fn position_bias(
    cfg: &ModelConfig,
    params: &Params,
    (offset, n): (usize, usize),
    hooks: &mut Hooks,
) -> Result<Option<Tensor>> {
    let (Some(rb), Some(table)) = (&cfg.parts.relative_bias, &params.relative_bias) else { return Ok(None) };
    let keys = offset + n;
    let buckets: Vec<u32> =
        (offset..keys).flat_map(|q| (0..keys).map(move |k| rb.bucket(k as i64 - q as i64) as u32)).collect();
    let index = Tensor::from_vec(buckets, n * keys, &Device::Cpu)?;
    let rows = table.index_select(&index, 0)?; // [query_pos·key_pos, head]
    let bias = rows.t()?.reshape((cfg.heads, n, keys))?.contiguous()?; // [head, query_pos, key_pos]
    let bias = hooks.at("position_bias", cfg, bias)?;
    Ok(Some(bias))
}
