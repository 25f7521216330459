//! `x·Wᵀ + b`, PyTorch's `nn.Linear`, as every projection of the pass computes it: candle's
//! product in the faster of two orders that give the same bits, llama.cpp's own kernels under
//! `--arithmetic ggml`, and a gradient-tracking product for attribution patching.

use super::{ggml, grad_linear, product};
use crate::params::Linear;
use anyhow::Result;
use candle_core::Tensor;

/// `x·Wᵀ + b` for `x` of shape [pos, in], PyTorch's `nn.Linear`.
/// Under `--arithmetic ggml` (`lin.ggml`), `x` is first rounded as llama.cpp quantizes it
/// for the weight's type (`ggml.rs`). An `x` that tracks gradients (attribution patching's
/// corrupted run, never under `--arithmetic ggml`) goes through `grad_linear`, whose backward
/// pass computes no weight's gradient.
pub fn linear(x: &Tensor, lin: &Linear) -> Result<Tensor> {
    if x.track_op() && lin.ggml.is_none() {
        return grad_linear::tracked(x, lin, untracked_linear);
    }
    untracked_linear(x, lin)
}

fn untracked_linear(x: &Tensor, lin: &Linear) -> Result<Tensor> {
    let exact = match lin.ggml.as_deref() {
        Some(crate::params::GgmlInput { blocks: Some(blocks), .. }) => Some(ggml::blocks::matmul(x, blocks)?),
        Some(crate::params::GgmlInput { kblocks: Some(k), .. }) => ggml::kquants::matmul(x, k)?,
        _ => None,
    };
    if let Some(y) = exact {
        // [pos, out]: llama.cpp's own kernel
        return Ok(match &lin.bias {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        });
    }
    let (rounded, correction) = match &lin.ggml {
        Some(g) => {
            let (r, c) = ggml::rounded_input(x, g)?; // [pos, in], [pos, blocks]
            (Some(r), c)
        }
        None => (None, None),
    };
    let x = rounded.as_ref().unwrap_or(x);
    let y = if weight_first(x, &lin.weight) {
        product::matmul(&lin.weight, &x.t()?)?.t()?.contiguous()? // [pos, out]
    } else {
        product::matmul(x, &lin.weight.t()?)? // [pos, out]
    };
    let y = match &lin.ggml {
        Some(g) => ggml::corrected(y, correction, g)?, // [pos, out]
        None => y,
    };
    Ok(match &lin.bias {
        Some(b) => y.broadcast_add(b)?,
        None => y,
    })
}

/// Whether `(W·xᵀ)ᵀ` is the faster way to `x·Wᵀ`: candle's matrix product (the gemm crate)
/// packs a row-major [out, in] weight when it is the right-hand operand, and for few
/// positions against a wide input that packing is a large part of the work. Measured on this
/// project's 2-core machine (`BENCHMARKS.md`): 10–27% faster for a 1 B Llama's projections at
/// 128 positions, 2–3× at 16 or 32, slower at 512 positions, at d_model ≤ 1536 and for
/// vocabulary-wide heads. Both forms sum in the same order and give the same bits
/// (`tests::both_orders_of_the_product_agree_bit_for_bit`). `cargo bench --bench matmul`
/// measures both on the shapes the rule is drawn from.
pub fn weight_first(x: &Tensor, w: &Tensor) -> bool {
    let (Ok((n, k)), Ok((m, _))) = (x.dims2(), w.dims2()) else { return false };
    w.is_contiguous() && m <= 16_384 && (n <= 64 || (n <= 256 && k >= 2048))
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    #[test]
    fn both_orders_of_the_product_agree_bit_for_bit() {
        for (n, k, m) in [(16, 2048, 512), (128, 2048, 2048), (128, 4096, 1024), (40, 300, 70)] {
            let x = Tensor::randn(0f32, 1., (n, k), &Device::Cpu).unwrap();
            let w = Tensor::randn(0f32, 1., (m, k), &Device::Cpu).unwrap();
            let a = x.matmul(&w.t().unwrap()).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let b = w.matmul(&x.t().unwrap()).unwrap().t().unwrap().contiguous().unwrap();
            let b = b.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            assert!(a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()), "[{n}×{k}]·[{k}×{m}]");
        }
    }
}
