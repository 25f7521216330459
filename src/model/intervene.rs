//! Activation patching's copied activations in the forward pass (`patch.rs`): a patched
//! head's context, or one position's layer output, replaced by another run's. Knockout,
//! ablation, expert ablation and steering, once here, are hooks in `analysis/`; these stay
//! until patching is one too.

use anyhow::Result;
use candle_core::{Device, Tensor};

/// One patched activation: a head's context ([pos, d_v]) or one position's layer output
/// ([d_model]), copied from another run: the state of one patched run of a sweep, passed down the stack
/// (`stack` → `layer` → `attention`), not configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Patch {
    pub layer: usize,
    /// `Some(head)`: the head's context; `None`: the layer output at `position`.
    pub head: Option<usize>,
    pub position: usize,
    pub values: std::sync::Arc<Vec<f32>>,
}

/// This layer's context ([head, pos, d_v]) with a patched head's replaced by the values a
/// patching sweep copied in.
pub fn patch_head(layer: usize, patch: Option<&Patch>, context: Tensor) -> Result<Tensor> {
    Ok(match patch {
        Some(p) if p.layer == layer && p.head.is_some() => {
            let (h, n, d) = context.dims3()?;
            let head = p.head.unwrap_or(0);
            let mut all = context.flatten_all()?.to_vec1::<f32>()?;
            all[head * n * d..(head + 1) * n * d].copy_from_slice(&p.values);
            Tensor::from_vec(all, (h, n, d), &Device::Cpu)?
        }
        _ => context,
    })
}

/// Replaces one position of this layer's output ([pos, d_model]) with a patching sweep's
/// values (activation patching of the residual stream).
pub fn patch_resid(patch: Option<&Patch>, layer: usize, x: Tensor) -> Result<Tensor> {
    match patch {
        Some(p) if p.layer == layer && p.head.is_none() => {
            let (n, d) = x.dims2()?;
            let mut all = x.flatten_all()?.to_vec1::<f32>()?;
            all[p.position * d..(p.position + 1) * d].copy_from_slice(&p.values);
            Ok(Tensor::from_vec(all, (n, d), &Device::Cpu)?)
        }
        _ => Ok(x),
    }
}
