//! Which keys each query sees: the attention mask (causal, a sliding window, pads) as
//! `[query, key]` flags, and the `[head, query]` rows that see no key at all once this
//! layer's knockouts are added, whose softmax would be 0/0 (their weights are defined as 0;
//! see `analysis/knockout.rs`).

use crate::config::ModelConfig;
use crate::hook::Hooks;
use crate::trace::{steps, Values};
use anyhow::Result;
use candle_core::{Device, Tensor};
use std::collections::BTreeSet;

/// Layer `layer`'s `[query, key]` flags for the `n` queries at positions `offset..offset + n`
/// against the keys at `0..offset + n` (a generation's decode step reads its cache's keys),
/// true where a key is hidden: after the query (causal), `window` or
/// more positions before it (a sliding window, as Mistral's eager attention in transformers
/// 4.46: query i sees keys i − window + 1 ..= i), or a pad (`--pad-to`, transformers'
/// `attention_mask`). `None` when nothing is hidden.
pub fn hidden_keys(cfg: &ModelConfig, layer: usize, (offset, n): (usize, usize)) -> Option<Vec<bool>> {
    hidden_rows(cfg, layer, (offset, n), offset + n)
}

/// [`hidden_keys`]' flags for the `n` queries at positions `first..first + n` against the keys
/// at `0..keys`: a tile of a pass's queries (`tiled.rs`).
pub fn hidden_rows(cfg: &ModelConfig, layer: usize, (first, n): (usize, usize), keys: usize) -> Option<Vec<bool>> {
    let window = cfg.parts.window_at(layer);
    let pads = cfg.parts.padding.as_ref().map(|p| &p.attention_mask);
    if !cfg.causal && window.is_none() && pads.is_none() {
        return None;
    }
    let pad = |k: usize| pads.is_some_and(|m| m.get(k) == Some(&0));
    let hidden = |q: usize, k: usize| (cfg.causal && k > q) || window.is_some_and(|w| q >= k + w) || pad(k);
    let mut flags = vec![false; n * keys];
    for (i, row) in flags.chunks_exact_mut(keys.max(1)).enumerate() {
        row.iter_mut().enumerate().for_each(|(k, flag)| *flag = hidden(first + i, k));
    }
    Some(flags)
}

/// A layer's `[head, query]` flags for the `n` queries from position `offset` on against
/// the keys at `0..keys` (`offset + n` for a whole pass; fewer for a causal tile, `tiled.rs`),
/// 1 where a query sees no key: every key is hidden by `hidden` (the `[query, key]` mask of
/// [`hidden_keys`] or [`hidden_rows`], if any) or is one of the `(head, query, key)` `edges`
/// knocked out (`analysis/knockout.rs`). `None` when every query sees one.
pub fn blind_rows(
    hidden: Option<&[bool]>,
    (h, offset, n): (usize, usize, usize),
    (keys, edges): (usize, &BTreeSet<(usize, usize, usize)>),
) -> Option<Vec<u8>> {
    if hidden.is_none() && edges.is_empty() {
        return None;
    }
    // `q` is a row of this pass (position offset + q), `k` a key position.
    let sees = |q: usize, k: usize| hidden.is_none_or(|m| !m[q * keys + k]);
    let visible: Vec<usize> = (0..n).map(|q| (0..keys).filter(|&k| sees(q, k)).count()).collect();
    let mut left: Vec<usize> = (0..h).flat_map(|_| visible.iter().copied()).collect(); // [head, query]
    let rows = edges.iter().filter_map(|&(head, q, k)| Some((head, q.checked_sub(offset)?, k)));
    for (head, q, _) in rows.filter(|&(_, q, k)| q < n && k < keys && sees(q, k)) {
        left[head * n + q] -= 1;
    }
    let rows: Vec<u8> = left.iter().map(|&c| u8::from(c == 0)).collect();
    rows.contains(&1).then_some(rows)
}

/// The `[head, query]` flags of `scores` ([head, query, key], masked and changed by any hook),
/// 1 where every key's score is −inf (hidden by the mask or a hook: a knockout): the rows
/// [`blind_rows`] finds from the mask and the knocked-out edges. `None` when there is none.
pub fn blind_in(scores: &Tensor) -> Result<Option<Vec<u8>>> {
    let top = scores.max(candle_core::D::Minus1)?.flatten_all()?.to_vec1::<f32>()?; // [head·query]
    let rows: Vec<u8> = top.iter().map(|&m| u8::from(m == f32::NEG_INFINITY)).collect();
    Ok(rows.contains(&1).then_some(rows))
}

/// The scaled scores as the softmax reads them (`attn.mask` and `attn.scores_uncapped`
/// recorded in `rec`, if given): soft-capped where the model caps them
/// (Gemma 2: `cap · tanh(scaled / cap)`, after the scale and before the mask, as transformers
/// computes it), then −inf where `hidden` hides a key, so exp gives exactly 0.
pub fn capped_and_masked(
    cfg: &ModelConfig,
    scaled: Tensor,
    hidden: Option<&[bool]>,
    l: usize,
    mut hooks: Option<&mut Hooks>,
) -> Result<Tensor> {
    let (_, n, keys) = scaled.dims3()?;
    let bias = match hidden {
        Some(hidden) => {
            let bias: Vec<f32> = hidden.iter().map(|&m| if m { f32::NEG_INFINITY } else { 0.0 }).collect();
            let mask = Values::Bool(hidden.to_vec());
            if let Some(hooks) = hooks.as_deref_mut() {
                hooks.rec.record(&format!("layers.{l}.attn.mask"), &steps::dims("attn.mask", cfg), &[n, keys], mask);
            }
            Some(Tensor::from_vec(bias, (n, keys), &Device::Cpu)?) // [query_pos, key_pos]
        }
        None => None,
    };
    let masked = |t: Tensor| -> Result<Tensor> {
        Ok(match &bias {
            Some(b) => t.broadcast_add(b)?,
            None => t,
        })
    };
    Ok(match cfg.parts.attn_softcap {
        Some(cap) => {
            let uncapped = masked(scaled.clone())?; // [head, query_pos, key_pos]
                                                    // Recorded, not hooked: the pass goes on from the capped scores.
            if let Some(hooks) = hooks {
                hooks.rec.tensor(&format!("layers.{l}.attn.scores_uncapped"), cfg, &uncapped)?;
            }
            masked(super::kernels::softcap::softcap(&scaled, cap)?)? // [head, query_pos, key_pos]
        }
        None => masked(scaled)?,
    })
}

/// `weights` with the flagged `[head, query]` rows set to 0.
pub fn zero_rows(weights: &Tensor, rows: &[u8]) -> Result<Tensor> {
    let (h, n, k) = weights.dims3()?;
    let flags = Tensor::from_vec(rows.to_vec(), (h, n, 1), &Device::Cpu)?.broadcast_as((h, n, k))?;
    Ok(flags.where_cond(&weights.zeros_like()?, weights)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window local to layer 0: layer 0's query 3 sees keys 2 and 3 only, layer 1's every
    /// earlier key (a Gemma 2–style alternation).
    #[test]
    fn a_local_window_hides_keys_in_its_layers_only() {
        let mut cfg = ModelConfig { causal: true, ..Default::default() };
        cfg.parts.window = Some(2);
        cfg.parts.local_layers = Some(vec![true, false]);
        let row = |l: usize| hidden_keys(&cfg, l, (0, 4)).unwrap()[12..16].to_vec();
        assert_eq!(row(0), [true, true, false, false]);
        assert_eq!(row(1), [false, false, false, false]);
        // A decode step's one query at position 3 sees what the full pass's row 3 sees.
        assert_eq!(hidden_keys(&cfg, 0, (3, 1)).unwrap(), row(0));
    }
}
