//! The machine's arithmetic rate as candle reaches it, the denominator of `--timings`' share
//! of the peak and the figures of `cargo bench --bench peak` (BENCHMARKS.md, "Share of the
//! peak"): a large f32 matrix product through candle's `matmul` (the gemm crate, which
//! computes every product of the forward pass), and candle's quantized matrix product
//! (`QMatMul`: activations quantized to 8 bits, integer dot products with a quantized weight).
//!
//! Compute only, no I/O: it lives in the output stage because `--timings` reports it there,
//! after the run, so that it changes no recorded number and no figure of the stages before.

use anyhow::Result;
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use std::time::{Duration, Instant};

/// The best rate of a few runs of one product.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    /// Operations per second over 1e9 (a multiply-add is two operations).
    pub giga_per_s: f64,
    /// The product's [m × k]·[k × n].
    pub mkn: (usize, usize, usize),
    /// Timed runs (after one untimed warm-up) and the threads candle ran them on.
    pub runs: usize,
    pub threads: usize,
    /// The whole measurement, warm-up included.
    pub took: Duration,
}

/// f32: [size × size]·[size × size] with candle's `matmul`, best of up to `runs` timed runs
/// after a warm-up, stopping early once `budget` is spent.
pub fn f32_matmul(size: usize, runs: usize, budget: Duration) -> Result<Rate> {
    // Values do not change gemm's speed (no subnormals here); ones cost nothing to make.
    let a = Tensor::ones((size, size), candle_core::DType::F32, &Device::Cpu)?;
    let b = (Tensor::ones((size, size), candle_core::DType::F32, &Device::Cpu)? * 0.5)?;
    best((size, size, size), runs, budget, || Ok(a.matmul(&b)?))
}

/// Quantized: [m × k] f32 activations times a [n × k] weight stored as `dtype` (Q8_0, Q4K, …),
/// through `QMatMul` as a GGUF model's product would run in candle: the activations are
/// quantized to 8 bits on every call, then multiplied by integer dot products (on x86 with
/// AVX-512 VNNI candle repacks the weight once, on the first call, which the warm-up takes).
pub fn quantized_matmul(
    dtype: GgmlDType,
    (m, k, n): (usize, usize, usize),
    runs: usize,
    budget: Duration,
) -> Result<Rate> {
    let w = Tensor::randn(0f32, 1.0, (n, k), &Device::Cpu)?;
    let w = QMatMul::from_qtensor(QTensor::quantize(&w, dtype)?)?;
    let x = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu)?;
    best((m, k, n), runs, budget, || Ok(w.forward(&x)?))
}

/// Runs `product` once untimed, then up to `runs` times timed, and keeps the fastest. A run
/// that the slowest so far says would end past `budget` is not started (one is always timed).
fn best(
    mkn: (usize, usize, usize),
    runs: usize,
    budget: Duration,
    product: impl Fn() -> Result<Tensor>,
) -> Result<Rate> {
    let start = Instant::now();
    product()?;
    let mut slowest = start.elapsed();
    let (mut fastest, mut timed) = (Duration::MAX, 0);
    while timed < runs.max(1) && (timed == 0 || start.elapsed() + slowest <= budget) {
        let t = Instant::now();
        product()?;
        let took = t.elapsed();
        (fastest, slowest, timed) = (fastest.min(took), slowest.max(took), timed + 1);
    }
    let ops = 2.0 * (mkn.0 * mkn.1 * mkn.2) as f64;
    Ok(Rate {
        giga_per_s: ops / fastest.as_secs_f64().max(1e-9) / 1e9,
        mkn,
        runs: timed,
        threads: candle_core::utils::get_num_threads(),
        took: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rates are finite and positive, and the budget stops the runs (no timing asserted).
    #[test]
    fn small_products_give_a_rate() {
        let r = f32_matmul(64, 3, Duration::from_secs(5)).unwrap();
        assert!(r.giga_per_s.is_finite() && r.giga_per_s > 0.0, "{r:?}");
        assert_eq!((r.mkn, r.runs), ((64, 64, 64), 3));
        let r = f32_matmul(64, 1000, Duration::ZERO).unwrap();
        assert_eq!(r.runs, 1, "a spent budget still times one run");
        let q = quantized_matmul(GgmlDType::Q8_0, (8, 256, 32), 2, Duration::from_secs(5)).unwrap();
        assert!(q.giga_per_s > 0.0 && q.runs == 2, "{q:?}");
    }
}
