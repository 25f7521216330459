//! What one pass over the layers carries beside the residual stream: a generation's key/value
//! cache (`generate.rs`), an encoder–decoder's encoder output and T5's position bias. None is
//! configuration: the cache is the state of one generation, the others of one pass, so they
//! travel down the stack (`stack` → `layer` → `attention`) with the pass. What an analysis
//! changes or keeps goes through the hook port instead (`hook/mod.rs`).

use anyhow::Result;
use candle_core::Tensor;

/// The state one pass over the layers reads and writes besides the residual stream.
#[derive(Default)]
pub struct Pass<'a> {
    /// A generation's cache: the keys and values of every position before this pass's, which
    /// the pass's queries also read and to which its own are appended.
    pub cache: Option<&'a mut KvCache>,
    /// T5's relative position bias for this pass's queries, `[head, query_pos, key_pos]`,
    /// added to every layer's scores (`relative.rs`).
    pub bias: Option<Tensor>,
    /// An encoder–decoder's decoder pass: the encoder's output, `[enc_pos, d_model]`, which
    /// every layer's cross-attention reads.
    pub memory: Option<&'a Tensor>,
}

impl<'a> Pass<'a> {
    /// A pass that reads and extends `cache`.
    pub fn cached(cache: &'a mut KvCache) -> Self {
        Pass { cache: Some(cache), ..Default::default() }
    }

    /// The position of this pass's first token: how many positions the cache holds.
    pub fn offset(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.len)
    }
}

/// Per layer, the keys (after any q/k norm and the rotation) and values of every position so
/// far, `[kv_head, pos, d]`, as Hugging Face's `DynamicCache` holds them: one pass appends its
/// positions' keys and values in each layer, and the next pass's queries read them all.
pub struct KvCache {
    layers: Vec<Option<(Tensor, Tensor)>>,
    /// An encoder–decoder's cross-attention keys and values per layer, `[head, enc_pos, d]`:
    /// the encoder's output does not change between decode steps, so they are made once.
    cross: Vec<Option<(Tensor, Tensor)>>,
    /// How many positions every layer holds once the current pass is done with it.
    len: usize,
}

impl KvCache {
    /// An empty cache for a model of `layers` layers.
    pub fn new(layers: usize) -> Self {
        KvCache { layers: vec![None; layers], cross: vec![None; layers], len: 0 }
    }

    /// Positions held (by every layer, between passes).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends layer `l`'s new keys and values (`[kv_head, new, d]`) and returns the layer's
    /// whole cache, `[kv_head, len + new, d]` each.
    pub fn extend(&mut self, l: usize, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
        let slot = self.layers.get_mut(l).ok_or_else(|| anyhow::anyhow!("internal: no cache for layer {l}"))?;
        let whole = match slot.take() {
            Some((pk, pv)) => (Tensor::cat(&[&pk, k], 1)?, Tensor::cat(&[&pv, v], 1)?),
            None => (k.clone(), v.clone()),
        };
        *slot = Some(whole.clone());
        Ok(whole)
    }

    /// Layer `l`'s cross-attention keys and values, made by `make` the first time.
    pub fn cross(&mut self, l: usize, make: impl FnOnce() -> Result<(Tensor, Tensor)>) -> Result<(Tensor, Tensor)> {
        let slot = self.cross.get_mut(l).ok_or_else(|| anyhow::anyhow!("internal: no cache for layer {l}"))?;
        if slot.is_none() {
            *slot = Some(make()?);
        }
        slot.clone().ok_or_else(|| anyhow::anyhow!("internal: no cross-attention cache"))
    }

    /// Ends a pass over `n` new positions: the next pass's first position is `len + n`.
    pub fn advance(&mut self, n: usize) {
        self.len += n;
    }
}
