//! Matrix products whose bits do not depend on the CPU's caches. The gemm crate behind
//! candle's `matmul` sums the inner dimension in blocks it sizes from the L1 data cache
//! (gemm-common's `kernel_params`; never under 512 elements), adding each block's sums into
//! the output in order; so a product over more than 512 can round differently on another
//! machine (1,536 is two blocks of 768 on a 48 KiB 12-way L1, three of 512 on a 32 KiB 8-way
//! one; `cargo bench --bench matmul` shows the two differ). Here an inner dimension over 512
//! is cut into even blocks of at most 512 — each one block of gemm's on any cache — whose
//! products are added in order, as gemm adds its own blocks: every CPU with the same vector
//! kernel then sums every element in the same order.

use crate::config::tiles::even_tiles;
use anyhow::Result;
use candle_core::{Tensor, D};

/// The longest inner dimension gemm sums in one block on every CPU.
pub const BLOCK: usize = 512;

/// `a·b` (batched as candle's `matmul`: the last dimension of `a` against the second to last
/// of `b`), the same bits on every machine whose vector kernel is this one's.
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let k = a.dim(D::Minus1)?;
    if k <= BLOCK {
        return Ok(a.matmul(b)?);
    }
    let inner = b.rank().saturating_sub(2);
    let part = |(first, len): (usize, usize)| -> Result<Tensor> {
        Ok(a.narrow(D::Minus1, first, len)?.matmul(&b.narrow(inner, first, len)?)?)
    };
    let mut blocks = even_tiles(k, BLOCK);
    let mut sum = part(blocks.next().unwrap_or((0, k)))?;
    for block in blocks {
        sum = (sum + part(block)?)?;
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    fn bits(t: &Tensor) -> Vec<u64> {
        let t = t.flatten_all().unwrap().to_dtype(DType::F64).unwrap();
        t.to_vec1::<f64>().unwrap().iter().map(|v| v.to_bits()).collect()
    }

    /// Over 512, the product is the sum of its ≤ 512 blocks' products added in order (the
    /// sums a 32 KiB 8-way L1 gives gemm), and not this machine's whole product for an inner
    /// dimension gemm sums in larger blocks here; at 512 or under it is candle's own product.
    #[test]
    fn long_inner_dimensions_are_summed_in_blocks_of_512() {
        let cpu = Device::Cpu;
        for (n, k, m) in [(32, 1536, 576), (7, 1100, 9), (40, 512, 70)] {
            let x = Tensor::randn(0f32, 1., (n, k), &cpu).unwrap();
            let w = Tensor::randn(0f32, 1., (m, k), &cpu).unwrap();
            let got = matmul(&x, &w.t().unwrap()).unwrap();
            let mut want: Option<Tensor> = None;
            for (first, len) in even_tiles(k, BLOCK) {
                let p = x.narrow(1, first, len).unwrap().contiguous().unwrap();
                let p = p.matmul(&w.narrow(1, first, len).unwrap().contiguous().unwrap().t().unwrap()).unwrap();
                want = Some(match want {
                    None => p,
                    Some(s) => (s + p).unwrap(),
                });
            }
            assert_eq!(bits(&got), bits(&want.unwrap()), "[{n}×{k}]·[{k}×{m}]");
        }
        // Batched, as attention's weights·values over 1,000 keys.
        let a = Tensor::randn(0f32, 1., (3, 5, 1000), &cpu).unwrap();
        let b = Tensor::randn(0f32, 1., (3, 1000, 8), &cpu).unwrap();
        let got = matmul(&a, &b).unwrap();
        let halves = (a.narrow(2, 0, 500).unwrap().matmul(&b.narrow(1, 0, 500).unwrap()).unwrap()
            + a.narrow(2, 500, 500).unwrap().matmul(&b.narrow(1, 500, 500).unwrap()).unwrap())
        .unwrap();
        assert_eq!(bits(&got), bits(&halves));
    }
}
