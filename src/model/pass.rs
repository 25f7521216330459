//! What one pass over the layers carries beside the residual stream: a patched run's copied
//! activation (`patch.rs`), or a generation's key/value cache (`generate.rs`). Neither is
//! configuration: a patch is the state of one run of a sweep, the cache the state of one
//! generation, so both travel down the stack (`stack` → `layer` → `attention`) with the pass.

use super::intervene::Patch;
use anyhow::Result;
use candle_core::Tensor;

/// The state one pass over the layers reads and writes besides the residual stream.
#[derive(Default)]
pub struct Pass<'a> {
    /// A patched run's one copied activation, if any.
    pub patch: Option<&'a Patch>,
    /// A generation's cache: the keys and values of every position before this pass's, which
    /// the pass's queries also read and to which its own are appended.
    pub cache: Option<&'a mut KvCache>,
    /// T5's relative position bias for this pass's queries, `[head, query_pos, key_pos]`,
    /// added to every layer's scores (`relative.rs`).
    pub bias: Option<Tensor>,
    /// An encoder–decoder's decoder pass: the encoder's output, `[enc_pos, d_model]`, which
    /// every layer's cross-attention reads.
    pub memory: Option<&'a Tensor>,
    /// An attribution-patching run (`attrpatch.rs`): every layer's `attn.context` and output,
    /// as [`Pass::tap`] keeps them.
    pub taps: Option<Taps>,
    /// A path-patching run (`pathpatch.rs`): the receiver heads of each layer that has some,
    /// with the residual stream their inputs read instead of the layer's.
    pub receivers: &'a [Receive],
    /// Layer l's receivers' input through the layer's first norm, set by `layer.rs` for
    /// `attention.rs`.
    pub received: Option<Tensor>,
}

/// One layer's receivers in a path-patching run: their q, k or v is computed from `x` (the
/// clean residual stream plus the sender's path), the other heads' from the layer's input.
pub struct Receive {
    pub layer: usize,
    pub heads: Vec<(usize, crate::params::receivers::Qkv)>,
    /// `[pos, d_model]`, before the layer's first norm.
    pub x: Tensor,
}

/// Per layer, an attribution-patching run's activations, each as (its value, the handle whose
/// gradient is its own: the zero variable added to it where it tracks gradients, else itself).
#[derive(Default)]
pub struct Taps {
    pub contexts: Vec<(Tensor, Tensor)>,
    pub outputs: Vec<(Tensor, Tensor)>,
}

/// Which activation a tap keeps.
#[derive(Clone, Copy)]
pub enum Tap {
    Context,
    Output,
}

impl<'a> Pass<'a> {
    /// A pass of a patching sweep's run with `patch` copied in.
    pub fn patched(patch: Option<&'a Patch>) -> Self {
        Pass { patch, ..Default::default() }
    }

    /// A pass of a path-patching run whose receivers read `receivers`' inputs.
    pub fn receiving(receivers: &'a [Receive]) -> Self {
        Pass { receivers, ..Default::default() }
    }

    /// A pass that keeps every layer's context and output (`attrpatch.rs`).
    pub fn tapped() -> Self {
        Pass { taps: Some(Taps::default()), ..Default::default() }
    }

    /// `t` as the pass goes on with it, kept where the pass has taps. A tensor that tracks
    /// gradients goes on as t + 0, the 0 a `Var` of t's shape, and the variable is kept:
    /// candle 0.11's backward pass drops an intermediate tensor's gradient once it has passed
    /// it on and keeps only the variables', and the zero's gradient is t's (the sum's
    /// derivative by either term is 1). t + 0 is t to the bit.
    pub fn tap(&mut self, t: Tensor, which: Tap) -> Result<Tensor> {
        let Some(taps) = self.taps.as_mut() else { return Ok(t) };
        let (t, kept) = if t.track_op() {
            let zero = candle_core::Var::zeros(t.shape(), t.dtype(), t.device())?;
            ((&t + zero.as_tensor())?, (t.detach(), zero.as_tensor().clone()))
        } else {
            (t.clone(), (t.clone(), t))
        };
        match which {
            Tap::Context => taps.contexts.push(kept),
            Tap::Output => taps.outputs.push(kept),
        }
        Ok(t)
    }

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
