//! The middle of the forward pass: the layers in order, each reading the residual stream
//! the one before wrote. The forward pass runs it once from layer 0; a patched run
//! (`analysis/patch/`) from the layer it patches, on the unpatched run's residual stream there; a
//! generation (`generate.rs`) once per decode step, on the new position with its cache.
//! Before each layer it asks whether the run has been cancelled (`cancel.rs`: a server's
//! client that has gone, Ctrl-C in Python); this and a comparison's lockstep (`lockstep.rs`)
//! are the places the model asks.

use super::layer;
use super::pass::Pass;
use crate::config::ModelConfig;
use crate::hook::Hooks;
use crate::params::Layers;
use anyhow::Result;
use candle_core::Tensor;

/// Layers `from..` on `x` (layer `from`'s input, [pos, d_model]); `pass` carries a generation's
/// cache, if any. Each layer's output passes the unrecorded hook site `layers.L.output`. `after(i, input, output, hooks)` sees every layer's input
/// and output as they are made (a patching sweep's record).
pub fn stack(
    cfg: &ModelConfig,
    layers: &Layers,
    (from, pass): (usize, &mut Pass),
    x: Tensor,
    hooks: &mut Hooks,
    mut after: impl FnMut(usize, &Tensor, &Tensor, &mut Hooks) -> Result<()>,
) -> Result<Tensor> {
    let mut x = x; // [pos, d_model]
                   // A lazily read checkpoint's next layer is read while this one runs.
    layers.each_from(from, |i, p| {
        super::cancel::check()?;
        hooks.enter_layer(i, p);
        let out = layer::layer(cfg, p, &x, i, pass, hooks)?; // [pos, d_model]
        let out = hooks.through(&format!("layers.{i}.output"), cfg, out)?; // [pos, d_model]
        hooks.leave_layer();
        after(i, &x, &out, hooks)?;
        x = out;
        Ok(())
    })?;
    Ok(x)
}
