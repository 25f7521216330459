//! `--save-weights`: a run's parameters as a safetensors file, with the settings and input
//! that `sources::meta` describes in its `__metadata__` (and reads back for `--weights`).

use crate::params::Params;
use crate::sources::meta::Metadata;
use anyhow::Result;

/// `--save-weights`: every parameter as safetensors bytes (the output stage writes them), with
/// `meta` as the header's `__metadata__`.
pub fn encode(params: &Params, meta: &Metadata) -> Result<Vec<u8>> {
    let map: std::collections::HashMap<String, candle_core::Tensor> =
        params.named().into_iter().map(|(n, t)| (n, t.clone())).collect();
    let plain = safetensors::tensor::serialize(&map, None)?;
    // safetensors takes metadata as a HashMap, whose order changes from run to run: the header
    // is rewritten with the map inserted, sorted by key (serde_json's Map is a BTreeMap). The
    // data offsets count from the end of the header, so the tensors' bytes stay as they are.
    let n = u64::from_le_bytes(plain[..8].try_into()?) as usize;
    let mut header: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&plain[8..8 + n])?;
    header.insert("__metadata__".into(), serde_json::to_value(meta)?);
    let mut head = serde_json::to_vec(&header)?;
    while head.len() % 8 != 0 {
        head.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + head.len() + plain.len() - 8 - n);
    out.extend_from_slice(&(head.len() as u64).to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(&plain[8 + n..]);
    Ok(out)
}
