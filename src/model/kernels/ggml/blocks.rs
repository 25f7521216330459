//! The products llama.cpp takes with Q4_1, Q5_0 and Q8_0 weights, bit for bit: the input row
//! quantized to Q8_1 (Q4_1 weights) or Q8_0, then for each output `ggml_vec_dot_q4_1_q8_1` /
//! `_q8_0_q8_0` as its AVX2 code sums (llamafile's tinyBLAS takes Q8_0 and Q5_0, whose values
//! are unpacked to signed bytes, the same way): per block, 8 lanes of exact integer sums over
//! 4 elements each, `acc[j] = fma(d_w·d_x, lane_j, acc[j])`, Q4_1's offsets `summs += m·s` in
//! order, and `hsum8(acc) + summs`. The weight is never dequantized.

use super::kernels::{hsum8, on_threads};
use crate::params::GgmlBlocks;
use anyhow::{anyhow, Result};
use candle_core::Tensor;
use half::f16;

/// One input row quantized: per block of 32, the f16 scale (as f32), Q8_1's stored sum
/// `s = f16(d·Σq)` (with the f32 `d`), and the integers.
pub(super) struct Quantized {
    pub(super) d: Vec<f32>,
    pub(super) s: Vec<f32>,
    pub(super) q: Vec<i8>,
}

/// `quantize_row_q8_1` (and `_q8_0`, the same without `s`) on x86: d = max|x|/127 and the
/// multiplier 127/max|x| in f32, q = x·multiplier rounded half to even.
pub(super) fn quantize(x: &[f32]) -> Quantized {
    let blocks = x.len() / 32;
    let mut out = Quantized { d: Vec::with_capacity(blocks), s: Vec::with_capacity(blocks), q: vec![0; x.len()] };
    for (b, chunk) in x.chunks_exact(32).enumerate() {
        let max = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = max / 127.0;
        let id = if max != 0.0 { 127.0 / max } else { 0.0 };
        let mut sum = 0i32;
        for (i, &v) in chunk.iter().enumerate() {
            let q = super::kernels::nearest(v * id);
            out.q[b * 32 + i] = q as i8;
            sum += q as i32;
        }
        out.d.push(f16::from_f32(d).to_f32());
        out.s.push(f16::from_f32(d * sum as f32).to_f32());
    }
    out
}

/// Row `r` (of the view) times one quantized input row.
#[cfg(test)]
fn dot(w: &GgmlBlocks, r: usize, x: &Quantized) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if super::kernels::has_fma() {
        // SAFETY: the features were detected on this CPU.
        return unsafe { dot_avx2(w, r, x) };
    }
    dot_scalar(w, r, x)
}

/// The weight's rows `rows` times every input row, row by row.
fn rows_times(w: &GgmlBlocks, rows: std::ops::Range<usize>, inputs: &[Quantized]) -> Vec<f32> {
    #[cfg(target_arch = "x86_64")]
    if super::kernels::has_fma() {
        // SAFETY: the features were detected on this CPU.
        return unsafe { rows_times_avx2(w, rows, inputs) };
    }
    rows.flat_map(|r| inputs.iter().map(move |x| dot_scalar(w, r, x))).collect()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_times_avx2(w: &GgmlBlocks, rows: std::ops::Range<usize>, inputs: &[Quantized]) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows.len() * inputs.len());
    for r in rows {
        let mut fours = inputs.chunks_exact(4);
        for four in fours.by_ref() {
            out.extend_from_slice(&dot4_avx2(w, r, [&four[0], &four[1], &four[2], &four[3]]));
        }
        for x in fours.remainder() {
            out.push(dot_avx2(w, r, x));
        }
    }
    out
}

/// [`dot_avx2`] for four input rows at once, each weight block loaded once: the same
/// operations on each row's lanes, in the same order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn dot4_avx2(w: &GgmlBlocks, r: usize, x: [&Quantized; 4]) -> [f32; 4] {
    use std::arch::x86_64::*;
    let row = w.start + r;
    let (mut acc, mut summs) = ([_mm256_setzero_ps(); 4], [0f32; 4]);
    let ones = _mm256_set1_epi16(1);
    for b in 0..w.per_row {
        let at = row * w.per_row + b;
        let wq = _mm256_loadu_si256(w.q.as_ptr().add(at * 32) as *const __m256i);
        let (abs_w, d) = (_mm256_sign_epi8(wq, wq), w.d[at]);
        for k in 0..4 {
            let xq = _mm256_loadu_si256(x[k].q.as_ptr().add(b * 32) as *const __m256i);
            let pairs = if w.q4_1 {
                _mm256_maddubs_epi16(wq, xq)
            } else {
                _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(xq, wq))
            };
            let lanes = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(d * x[k].d[b]), lanes, acc[k]);
            if w.q4_1 {
                summs[k] += w.m[at] * x[k].s[b];
            }
        }
    }
    let mut out = [0f32; 4];
    for k in 0..4 {
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), acc[k]);
        out[k] = if w.q4_1 { hsum8(&lanes) + summs[k] } else { hsum8(&lanes) };
    }
    out
}

/// [`dot`] with ggml's own AVX2 instructions: `maddubs` (unsigned × signed byte pairs; Q8_0's
/// signs moved onto the input as ggml does, `sign(y, x)` with |x|), `madd` with ones into 8
/// lanes of 4, converted to f32 and fused with d_w·d_x. The same integers and roundings as
/// [`dot_scalar`], at the machine's rate.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn dot_avx2(w: &GgmlBlocks, r: usize, x: &Quantized) -> f32 {
    use std::arch::x86_64::*;
    let row = w.start + r;
    let (mut acc, mut summs) = (_mm256_setzero_ps(), 0f32);
    let ones = _mm256_set1_epi16(1);
    for b in 0..w.per_row {
        let at = row * w.per_row + b;
        let wq = _mm256_loadu_si256(w.q.as_ptr().add(at * 32) as *const __m256i);
        let xq = _mm256_loadu_si256(x.q.as_ptr().add(b * 32) as *const __m256i);
        let pairs = if w.q4_1 {
            _mm256_maddubs_epi16(wq, xq)
        } else {
            _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(xq, wq))
        };
        let lanes = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(w.d[at] * x.d[b]), lanes, acc);
        if w.q4_1 {
            summs += w.m[at] * x.s[b];
        }
    }
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
    if w.q4_1 {
        hsum8(&lanes) + summs
    } else {
        hsum8(&lanes)
    }
}

/// [`dot`] one element at a time.
fn dot_scalar(w: &GgmlBlocks, r: usize, x: &Quantized) -> f32 {
    let row = w.start + r;
    let (mut acc, mut summs) = ([0f32; 8], 0f32);
    for b in 0..w.per_row {
        let at = row * w.per_row + b;
        let (wq, xq) = (&w.q[at * 32..at * 32 + 32], &x.q[b * 32..b * 32 + 32]);
        let dd = w.d[at] * x.d[b];
        for (j, slot) in acc.iter_mut().enumerate() {
            let lane: i32 = (0..4).map(|t| wq[4 * j + t] as i32 * xq[4 * j + t] as i32).sum();
            *slot = dd.mul_add(lane as f32, *slot);
        }
        if w.q4_1 {
            summs += w.m[at] * x.s[b];
        }
    }
    if w.q4_1 {
        hsum8(&acc) + summs
    } else {
        hsum8(&acc)
    }
}

/// `x` (`[pos, in]`) times the weight's rows: `[pos, rows]`, as llama.cpp computes it. The
/// rows are split between the pool's threads (each output is one kernel call, so the split does
/// not change a bit).
pub fn matmul(x: &Tensor, w: &GgmlBlocks) -> Result<Tensor> {
    let (pos, width) = x.dims2()?;
    if width != w.per_row * 32 {
        return Err(anyhow!("internal: a {width}-wide input for {}-wide blocks", w.per_row * 32));
    }
    let values = x.flatten_all()?.to_vec1::<f32>()?;
    let inputs: Vec<Quantized> = values.chunks_exact(width).map(quantize).collect();
    let by_row = on_threads(w.rows, |rows| rows_times(w, rows, &inputs))?;
    let by_row = Tensor::from_vec(by_row, (w.rows, pos), x.device())?; // [rows, pos]
    Ok(by_row.t()?.contiguous()?) // [pos, rows]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(q4_1: bool, rows: usize, per_row: usize) -> GgmlBlocks {
        let n = rows * per_row;
        let q = (0..n * 32).map(|i| if q4_1 { (i * 7 % 16) as i8 } else { ((i * 37 % 255) as i32 - 127) as i8 });
        GgmlBlocks {
            q4_1,
            per_row,
            d: (0..n).map(|i| 0.01 + i as f32 * 1e-4).collect(),
            m: (0..n).map(|i| -0.05 - i as f32 * 1e-4).collect(),
            q: q.collect(),
            start: 0,
            rows,
        }
    }

    #[test]
    fn the_machines_instructions_give_the_scalar_codes_bits() {
        let x: Vec<f32> = (0..96).map(|i| ((i as f32) * 0.731).sin() * (1.0 + i as f32 / 10.0)).collect();
        let input = quantize(&x);
        for q4_1 in [true, false] {
            let w = blocks(q4_1, 5, 3);
            for r in 0..5 {
                assert_eq!(dot(&w, r, &input).to_bits(), dot_scalar(&w, r, &input).to_bits(), "q4_1 {q4_1} row {r}");
            }
            // Four inputs at a time and one at a time: the same bits.
            let inputs: Vec<Quantized> =
                (0..6).map(|k| quantize(&x.iter().map(|v| v * (k as f32 - 2.5)).collect::<Vec<_>>())).collect();
            let all = rows_times(&w, 0..5, &inputs);
            for r in 0..5 {
                for (k, x) in inputs.iter().enumerate() {
                    assert_eq!(
                        all[r * 6 + k].to_bits(),
                        dot_scalar(&w, r, x).to_bits(),
                        "q4_1 {q4_1} row {r} input {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn quantized_products_are_close_to_the_dequantized_ones() {
        let x: Vec<f32> = (0..64).map(|i| ((i as f32) * 0.37).cos()).collect();
        let w = blocks(true, 3, 2);
        let xt = Tensor::from_vec(x.clone(), (1, 64), &candle_core::Device::Cpu).unwrap();
        let y = matmul(&xt, &w).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (r, got) in y.iter().enumerate() {
            let exact: f32 = (0..64)
                .map(|e| {
                    let at = r * 2 + e / 32;
                    (w.d[at] * w.q[at * 32 + e % 32] as f32 + w.m[at]) * x[e]
                })
                .sum();
            assert!((got - exact).abs() <= 0.02 * exact.abs().max(1.0), "row {r}: {got} vs {exact}");
        }
    }
}
