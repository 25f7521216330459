//! The encoder's forward pass, recorded step by step into a [`Trace`].
//!
//! Each function reads top to bottom as a column of named `let`s, one per traced step, with
//! the tensor's shape in a comment. Model code records; it never prints.

pub mod attention;
pub mod embed;
pub mod ffn;
pub mod layer;
pub mod norm;

use crate::config::ModelConfig;
use crate::init::{Linear, Params};
use crate::trace::{Dim, Trace, Values};
use anyhow::Result;
use candle_core::Tensor;

/// What enters the encoder: token ids, or a raw `[pos, d_model]` matrix (seed 002).
#[derive(Debug, Clone)]
pub enum Input {
    /// Vocabulary ids, and BERT's token types (segment ids) for real models.
    Ids {
        ids: Vec<u32>,
        type_ids: Option<Vec<u32>>,
    },
    Matrix(Tensor),
}

/// Runs the whole encoder, recording every step into `trace`; returns the final output.
pub fn forward(cfg: &ModelConfig, params: &Params, input: &Input, trace: &mut Trace) -> Result<Tensor> {
    let mut x = embed::embed(cfg, params, input, trace)?; // [pos, d_model]
    for (i, layer_params) in params.layers.iter().enumerate() {
        x = layer::layer(cfg, layer_params, &x, i, trace)?; // [pos, d_model]
    }
    record(trace, "output", &["pos", "d_model"], &x)?;
    Ok(x)
}

/// Copies a tensor into the trace, if the selection keeps this step.
pub fn record(trace: &mut Trace, id: &str, dims: &[Dim], t: &Tensor) -> Result<()> {
    if trace.wants(id) {
        let values = t.flatten_all()?.to_vec1::<f32>()?;
        trace.record(id, dims, t.dims(), Values::F32(values));
    }
    Ok(())
}

/// `x·Wᵀ + b` for `x` of shape [pos, in], PyTorch's `nn.Linear`.
pub fn linear(x: &Tensor, lin: &Linear) -> Result<Tensor> {
    let y = x.matmul(&lin.weight.t()?)?;
    Ok(match &lin.bias {
        Some(b) => y.broadcast_add(b)?,
        None => y,
    })
}
