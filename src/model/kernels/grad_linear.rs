//! A linear layer whose backward pass computes its input's gradient only, for attribution
//! patching's corrupted run (`analysis/patch/attribution.rs`).
//!
//! candle 0.11's backward pass of a matrix product computes the gradient of both operands,
//! whether or not one of them needs it: through `x·Wᵀ` it would also compute every weight's
//! gradient (as much arithmetic again as the forward product) and keep it to the end of the
//! backward pass (the model's size in f32: 0.5 GB for SmolLM2). Here the product is one custom
//! op of x alone, with W held by the op: its forward is the very function a trace uses (so the
//! values are the same to the bit), its backward is `grad · W`.

use crate::params::Linear;
use anyhow::Result;
use candle_core::{CpuStorage, CustomOp1, DType, Device, Layout, Shape, Storage, Tensor};

/// The forward product, as `model::linear` computes it (handed in, so this file imports
/// nothing of the model's).
pub type Forward = fn(&Tensor, &Linear) -> Result<Tensor>;

/// `forward(x, lin)` for an `x` that tracks gradients: the same values, with a backward pass
/// that gives x's gradient and no weight's.
pub fn tracked(x: &Tensor, lin: &Linear, forward: Forward) -> Result<Tensor> {
    if x.dtype() != DType::F32 || !x.device().is_cpu() {
        return forward(x, lin);
    }
    Ok(x.contiguous()?.apply_op1(InputOnly { lin: lin.clone(), forward })?)
}

struct InputOnly {
    lin: Linear,
    forward: Forward,
}

impl CustomOp1 for InputOnly {
    fn name(&self) -> &'static str {
        "linear-input-gradient"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let internal = |what: &str| candle_core::Error::Msg(format!("internal: linear-input-gradient: {what}"));
        let (start, end) = layout.contiguous_offsets().ok_or_else(|| internal("a strided input"))?;
        let x = Tensor::from_slice(&storage.as_slice::<f32>()?[start..end], layout.shape(), &Device::Cpu)?;
        let y = (self.forward)(&x, &self.lin).map_err(|e| internal(&format!("{e:#}")))?.contiguous()?;
        let (stored, y_layout) = y.storage_and_layout();
        let (y_start, y_end) = y_layout.contiguous_offsets().ok_or_else(|| internal("a strided output"))?;
        match &*stored {
            Storage::Cpu(CpuStorage::F32(v)) => {
                Ok((CpuStorage::F32(v[y_start..y_end].to_vec()), y_layout.shape().clone()))
            }
            _ => Err(internal("an output that is not f32 on the CPU")),
        }
    }

    /// y = x·Wᵀ + b, so ∂y/∂x applied to the output's gradient is grad · W.
    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
        match grad.rank() {
            // In blocks of at most 512 (`model::product`), as the forward's products are.
            2 => crate::model::kernels::product::matmul(grad, &self.lin.weight)
                .map(Some)
                .map_err(|e| candle_core::Error::Msg(format!("{e:#}"))),
            _ => Ok(Some(grad.broadcast_matmul(&self.lin.weight)?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Var;

    fn plain(x: &Tensor, lin: &Linear) -> Result<Tensor> {
        Ok(x.matmul(&lin.weight.t()?)?.broadcast_add(lin.bias.as_ref().unwrap())?)
    }

    #[test]
    fn the_same_values_and_the_input_gradient_by_hand() {
        // y = x·Wᵀ + b with W = [[1, 2], [3, 4]], b = [10, 20]; Σy's gradient by x is each
        // row's Σ of W's rows: [1 + 3, 2 + 4] = [4, 6].
        let dev = Device::Cpu;
        let lin = Linear {
            weight: Tensor::new(&[[1f32, 2.0], [3.0, 4.0]], &dev).unwrap(),
            bias: Some(Tensor::new(&[10f32, 20.0], &dev).unwrap()),
            ggml: None,
        };
        let x = Var::new(&[[1f32, 1.0], [0.0, 2.0]], &dev).unwrap();
        let y = tracked(x.as_tensor(), &lin, plain).unwrap();
        assert_eq!(y.to_vec2::<f32>().unwrap(), vec![vec![13.0, 27.0], vec![14.0, 28.0]]);
        let grads = y.sum_all().unwrap().backward().unwrap();
        let g = grads.get(x.as_tensor()).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(g, vec![vec![4.0, 6.0], vec![4.0, 6.0]]);
        // No gradient is kept for the weight.
        assert!(grads.get(&lin.weight).is_none());
    }
}
