//! Softmax over the last dimension, as candle_nn's `softmax_last_dim` computes it, on this
//! thread for small tensors.
//!
//! candle_nn hands every row to rayon's pool, however small the tensor: for a short
//! sentence's few dozen scores the pool's workers wake, find nothing left to do and spin
//! (`sched_yield`) before sleeping again, which made much of a batch of short sentences'
//! time (issue 27). Below [`ON_THIS_THREAD`] elements the rows are computed here, with
//! candle's own kernels in candle's order (the row's maximum, `exp(x − max)`, their sum, each
//! divided by it), so the bits are the same (`tests::the_same_bits_as_candle_nn`).
//!
//! Neither path has a backward pass (candle_nn's is `apply_op1_no_bwd`; ours leaves the
//! graph through a Vec), so a tensor that tracks gradients (attribution patching's
//! corrupted run, `analysis/patch/attribution.rs`) takes the softmax as candle's differentiable ops instead:
//! the same arithmetic, with the row maximum detached (its gradient is 0 in exact arithmetic).

use anyhow::Result;
use candle_core::cpu::kernels::VecOps;
use candle_core::{DType, Tensor, D};

/// Tensors with fewer elements are computed on this thread (about 30 µs of work, less than
/// waking a pool costs on a busy machine).
pub const ON_THIS_THREAD: usize = 1 << 14;

/// The softmax of `x` along its last dimension.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    let last = x.dims().last().copied().unwrap_or(0);
    if x.track_op() {
        let max = x.max_keepdim(D::Minus1)?.detach(); // [.., 1]
        let num = x.broadcast_sub(&max)?.exp()?;
        return Ok(num.broadcast_div(&num.sum_keepdim(D::Minus1)?)?);
    }
    if x.elem_count() >= ON_THIS_THREAD || x.dtype() != DType::F32 || last == 0 {
        return Ok(candle_nn::ops::softmax_last_dim(x)?);
    }
    let src = x.flatten_all()?.to_vec1::<f32>()?;
    let mut dst = vec![0f32; src.len()];
    for (s, d) in src.chunks(last).zip(dst.chunks_mut(last)) {
        let mut max = f32::NEG_INFINITY;
        // SAFETY: both slices hold `last` > 0 elements, and the results are valid f32s.
        unsafe { f32::vec_reduce_max(s.as_ptr(), &mut max, last) };
        for (a, b) in s.iter().zip(d.iter_mut()) {
            *b = (*a - max).exp();
        }
        let mut sum = 0f32;
        // SAFETY: as above.
        unsafe { f32::vec_reduce_sum(d.as_ptr(), &mut sum, last) };
        for b in d.iter_mut() {
            *b /= sum;
        }
    }
    Ok(Tensor::from_vec(dst, x.dims(), x.device())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn the_same_bits_as_candle_nn() {
        for shape in [vec![1usize, 1], vec![2, 7, 7], vec![4, 33, 33], vec![3, 100]] {
            let n: usize = shape.iter().product();
            // Scores of a few magnitudes, every fifth one masked as the model masks them.
            let v: Vec<f32> = (0..n)
                .map(|i| if i % 5 == 3 { f32::NEG_INFINITY } else { ((i * 7919) % 613) as f32 / 37.0 - 8.0 })
                .collect();
            let x = Tensor::from_vec(v, shape.as_slice(), &Device::Cpu).unwrap();
            let ours = softmax_last_dim(&x).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let theirs = candle_nn::ops::softmax_last_dim(&x).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
            assert!(ours.iter().zip(&theirs).all(|(a, b)| a.to_bits() == b.to_bits()), "{shape:?}");
        }
        // Rows of −inf (0/0) are NaN in both, as torch.softmax gives; the model zeroes them.
        let x = Tensor::new(&[[f32::NEG_INFINITY, f32::NEG_INFINITY], [0.0, f32::NEG_INFINITY]], &Device::Cpu).unwrap();
        let ours = softmax_last_dim(&x).unwrap().to_vec2::<f32>().unwrap();
        assert!(ours[0].iter().all(|v| v.is_nan()) && ours[1] == [1.0, 0.0], "{ours:?}");
    }
}
