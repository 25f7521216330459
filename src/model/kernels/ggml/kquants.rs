//! The products llama.cpp takes with Q4_K and Q6_K weights, bit for bit (the AVX2 build's
//! kernels; fixtures/oracle/ggml_recipes/gemma3): the input row quantized to Q8_K
//! (`quantize_row_q8_K_ref`), integer dot products with each super-block, then
//!
//! - Q4_K, repacked by llama.cpp into its 8 × 8 layout when the rows are a multiple of 8: the
//!   first n − n % 4 positions through its gemm kernel, which fuses the scales once per pair
//!   of sub-blocks, the rest (and one position alone) through its gemv, once per super-block:
//!   `acc = fma(Σ sc·(q4·q8), d·d_x, acc)`, `accm = fma(Σ m·Σq8, dmin·d_x, accm)`, `acc − accm`;
//! - Q6_K, not repacked: below 8 positions `ggml_vec_dot_q6_K_q8_K` (8 lanes: lane l sums the
//!   elements 4l..4l+3 of every 32, scaled, less 32 · its two sub-blocks' scaled sums),
//!   from 8 on the tiled kernel (one exact sum per super-block, `fma(S·d, d_x, acc)`).

use super::kernels::{hsum8, on_threads};
use crate::params::GgmlKBlocks;
use anyhow::{anyhow, Result};
use candle_core::Tensor;

/// One input row in Q8_K: per 256, the integers, the f32 scale, and the sums of each 16.
pub(super) struct Q8K {
    pub(super) q: Vec<i8>,
    pub(super) d: Vec<f32>,
    bsums: Vec<i32>,
}

pub(super) fn quantize(x: &[f32]) -> Q8K {
    let mut out = Q8K { q: vec![0; x.len()], d: Vec::new(), bsums: Vec::new() };
    for (b, block) in x.chunks_exact(256).enumerate() {
        let (mut amax, mut max) = (0f32, 0f32);
        for &v in block {
            if v.abs() > amax {
                (amax, max) = (v.abs(), v);
            }
        }
        if amax == 0.0 {
            out.d.push(0.0);
            out.bsums.extend([0; 16]);
            continue;
        }
        let iscale = -127.0 / max;
        for (i, &v) in block.iter().enumerate() {
            let q = super::kernels::nearest(iscale * v).min(127.0);
            out.q[b * 256 + i] = q as i8;
        }
        out.d.push(1.0 / iscale);
        let q = &out.q[b * 256..(b + 1) * 256];
        out.bsums.extend(q.chunks_exact(16).map(|c| c.iter().map(|&v| v as i32).sum::<i32>()));
    }
    out
}

/// Row `r` of a Q4_K weight times one input: `gemm` fuses per pair of sub-blocks.
#[inline(always)]
fn q4_k(w: &GgmlKBlocks, r: usize, x: &Q8K, gemm: bool) -> f32 {
    let (mut acc, mut accm) = (0f32, 0f32);
    let group = if gemm { 2 } else { 8 };
    for b in 0..w.per_row {
        let at = (w.start + r) * w.per_row + b;
        let (wq, xq) = (&w.q[at * 256..at * 256 + 256], &x.q[b * 256..b * 256 + 256]);
        let (ds, dm) = (w.d[at] * x.d[b], w.dmin[at] * x.d[b]);
        for first in (0..8).step_by(group) {
            let (mut isc, mut imin) = (0i32, 0i32);
            for j in first..first + group {
                let dot: i32 = (j * 32..j * 32 + 32).map(|e| wq[e] as i32 * xq[e] as i32).sum();
                isc += w.sc[at * 8 + j] as i32 * dot;
                imin += w.mins[at * 8 + j] as i32 * (x.bsums[b * 16 + 2 * j] + x.bsums[b * 16 + 2 * j + 1]);
            }
            acc = (isc as f32).mul_add(ds, acc);
            accm = (imin as f32).mul_add(dm, accm);
        }
    }
    acc - accm
}

/// Row `r` of a Q6_K weight times one input: `tiled` from 8 positions on.
#[inline(always)]
fn q6_k(w: &GgmlKBlocks, r: usize, x: &Q8K, tiled: bool) -> f32 {
    let (mut lanes_acc, mut acc) = ([0f32; 8], 0f32);
    for b in 0..w.per_row {
        let at = (w.start + r) * w.per_row + b;
        let (wq, xq, sc) = (&w.q[at * 256..at * 256 + 256], &x.q[b * 256..b * 256 + 256], &w.sc[at * 16..at * 16 + 16]);
        if tiled {
            let s: i32 = (0..256).map(|e| sc[e / 16] as i32 * wq[e] as i32 * xq[e] as i32).sum();
            acc = (s as f32 * w.d[at]).mul_add(x.d[b], acc);
            continue;
        }
        let d = x.d[b] * w.d[at];
        let bs = &x.bsums[b * 16..b * 16 + 16];
        for (l, slot) in lanes_acc.iter_mut().enumerate() {
            let mut lane = 0i32;
            for g in 0..8 {
                for k in 0..4 {
                    let e = g * 32 + l * 4 + k;
                    lane += sc[e / 16] as i32 * (wq[e] as i32 + 32) * xq[e] as i32;
                }
            }
            lane -= 32 * (sc[2 * l] as i32 * bs[2 * l] + sc[2 * l + 1] as i32 * bs[2 * l + 1]);
            *slot = d.mul_add(lane as f32, *slot);
        }
    }
    if tiled {
        acc
    } else {
        hsum8(&lanes_acc)
    }
}

/// `x` (`[pos, in]`) times the weight's rows, `[pos, rows]`, as llama.cpp computes it; `None`
/// where its kernel is not known here (a Q4_K weight whose rows llama.cpp does not repack).
pub fn matmul(x: &Tensor, w: &GgmlKBlocks) -> Result<Option<Tensor>> {
    let (pos, width) = x.dims2()?;
    if width != w.per_row * 256 {
        return Err(anyhow!("internal: a {width}-wide input for {}-wide super-blocks", w.per_row * 256));
    }
    if !w.q6_k && !w.rows.is_multiple_of(8) {
        return Ok(None);
    }
    let values = x.flatten_all()?.to_vec1::<f32>()?;
    let inputs: Vec<Q8K> = values.chunks_exact(width).map(quantize).collect();
    let gemm_rows = pos - pos % 4;
    let part = |rows: std::ops::Range<usize>| -> Vec<f32> {
        super::kernels::fused_rows(rows.len() * pos, |out| {
            for r in rows.clone() {
                for (p, x) in inputs.iter().enumerate() {
                    out.push(if w.q6_k { q6_k(w, r, x, pos >= 8) } else { q4_k(w, r, x, p < gemm_rows) });
                }
            }
        })
    };
    let by_row = Tensor::from_vec(on_threads(w.rows, part)?, (w.rows, pos), x.device())?; // [rows, pos]
    Ok(Some(by_row.t()?.contiguous()?)) // [pos, rows]
}
