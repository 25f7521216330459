//! Soft-capping (Gemma 2's attention scores and logits).

use anyhow::Result;
use candle_core::Tensor;

/// Soft-capping (Gemma 2's attention scores and logits): `cap · tanh(x / cap)` in f32,
/// dividing by cap as transformers does rather than multiplying by its reciprocal.
pub fn softcap(x: &Tensor, cap: f64) -> Result<Tensor> {
    let cap = Tensor::new(cap as f32, &candle_core::Device::Cpu)?;
    Ok(x.broadcast_div(&cap)?.tanh()?.broadcast_mul(&cap)?)
}
