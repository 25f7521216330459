//! ggml's CPU kernels, operation for operation, for `--arithmetic ggml` to give llama.cpp's
//! bits: the order of every sum, which products are fused, which values are f16 or f64. Each
//! recipe was found against llama.cpp's own tensors (llama-cpp-python 0.3.36 built for AVX2,
//! F16C and FMA; fixtures/oracle/llamacpp/) and is tested there bit for bit
//! (tests/it/ggml.rs). The names are ggml's.
//!
//! Fused multiply-adds are `f32::mul_add`: one rounding, as the FMA instruction. The row
//! functions are compiled for FMA where the machine has it (`with_fma!`); elsewhere `mul_add`
//! is the C library's `fmaf`, the same value, slower.

/// `hsum_float_8`: ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)), each add in f32.
#[inline(always)]
pub fn hsum8(v: &[f32; 8]) -> f32 {
    let r = [v[0] + v[4], v[1] + v[5], v[2] + v[6], v[3] + v[7]];
    (r[0] + r[2]) + (r[1] + r[3])
}

/// `ggml_v_expf` (its AVX2 + FMA form, lane by lane): ggml's exp, a polynomial that is not
/// correctly rounded (up to 2 ulp off), with its branches for |n| > 126 and > 192.
#[inline(always)]
pub fn v_expf(x: f32) -> f32 {
    let r = f32::from_bits(0x4b40_0000); // 0x1.8p23
    let z = x.mul_add(f32::from_bits(0x3fb8_aa3b), r);
    let n = z - r;
    let b = (-n).mul_add(f32::from_bits(0x35bf_be8e), (-n).mul_add(f32::from_bits(0x3f31_7200), x));
    let e = z.to_bits().wrapping_shl(23);
    let k = f32::from_bits(e.wrapping_add(1f32.to_bits()));
    let u = b * b;
    let j = f32::from_bits(0x3c07_2010)
        .mul_add(b, f32::from_bits(0x3d2b_9f17))
        .mul_add(u, f32::from_bits(0x3e2a_af33).mul_add(b, f32::from_bits(0x3eff_fedb)));
    let j = j.mul_add(u, f32::from_bits(0x3f7f_fff6) * b);
    if n.abs() <= 126.0 {
        return j.mul_add(k, k);
    }
    let g: u32 = if n <= 0.0 { 0x8200_0000 } else { 0 };
    let s1 = f32::from_bits(g.wrapping_add(0x7f00_0000));
    let s2 = f32::from_bits(e.wrapping_sub(g));
    if n.abs() > 192.0 {
        s1 * s1
    } else {
        s2.mul_add(j, s2) * s1
    }
}

/// `ggml_vec_silu_f32`'s value: x / (1 + exp(−x)), ggml's exp for the 8-wide part of a row
/// and the C library's `expf` for its tail.
#[inline(always)]
pub fn silu(x: f32, vector: bool) -> f32 {
    let e = if vector { v_expf(0.0 - x) } else { (-x).exp() };
    x / (1.0 + e)
}

/// `ggml_vec_soft_max_f32` over one row of scaled, masked scores, in place: the row's
/// maximum, ggml's exp of each difference, their sum in f64 one chunk of 8 at a time
/// (`hsum8` of each, f32), and each value times the f32 of 1/sum (in f64). llama.cpp's rows
/// are padded with masked keys to a multiple of 8, which add 0.
#[inline(always)]
pub fn soft_max_row(row: &mut [f32]) {
    // Plain loops, not closures: a closure would be compiled without the caller's FMA.
    let mut max = f32::NEG_INFINITY;
    for &v in row.iter() {
        max = max.max(v);
    }
    for v in row.iter_mut() {
        *v = v_expf(*v - max);
    }
    let mut sum = 0f64;
    for chunk in row.chunks(8) {
        let mut lanes = [0f32; 8];
        lanes[..chunk.len()].copy_from_slice(chunk);
        sum += hsum8(&lanes) as f64;
    }
    let inv = (1.0 / sum) as f32;
    for v in row.iter_mut() {
        *v *= inv;
    }
}

/// `ggml_compute_forward_rms_norm` and the weight's multiply: Σ x² in f64 (each square
/// rounded to f32 first, summed in order), the mean rounded to f32, scale = 1/√(mean + eps)
/// in f32, then x·scale and its product with the weight, each rounded.
pub fn rms_norm_row(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let sum: f64 = x.iter().map(|&v| (v * v) as f64).sum();
    let mean = (sum / x.len() as f64) as f32;
    let scale = 1.0 / (mean + eps).sqrt();
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(weight) {
        *o = (v * scale) * w;
    }
}

/// The rotation of one head's pair (x0, x1) by θ as `ggml_rope` computes it:
/// (fma(x0, c, −x1·s), fma(x0, s, x1·c)).
#[inline(always)]
pub fn rotate_pair(x0: f32, x1: f32, (c, s): (f32, f32)) -> (f32, f32) {
    (x0.mul_add(c, -(x1 * s)), x0.mul_add(s, x1 * c))
}

/// ggml's angles for one position: θ₀ = p and θᵢ₊₁ = θᵢ · θ_scale in f32, where
/// θ_scale = powf(base, −2/dims); (cos θᵢ, sin θᵢ) from the C library's `cosf`/`sinf`.
pub fn rope_angles(p: usize, base: f32, dims: usize) -> Vec<(f32, f32)> {
    let scale = base.powf(-2.0 / dims as f32);
    let mut theta = p as f32;
    (0..dims / 2)
        .map(|_| {
            let cs = (theta.cos(), theta.sin());
            theta *= scale;
            cs
        })
        .collect()
}

/// The dot product of two f16-valued rows as llama.cpp takes it. `single`: the pass has one
/// query (`ggml_vec_dot_f16`: 4 × 8 accumulators over chunks of 32, element i in
/// acc[(i/8) % 4][i % 8], reduced a0+a2, a1+a3, a0+a1, then halves and pairs); otherwise
/// llamafile's tinyBLAS (8 lanes, lane p summing elements p, p+8, …, then `hsum8`). Products
/// of f16 values are exact in f32, so fused or not they round once.
#[inline(always)]
pub fn dot_f16(a: &[f32], b: &[f32], single: bool) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        // SAFETY: the features were detected on this CPU.
        return unsafe { dot_f16_avx2(a, b, single) };
    }
    dot_f16_scalar(a, b, single)
}

/// [`dot_f16`] of every row of `a` with every row of `b` (rows `width` wide), row of `a` by
/// row of `a`, appended to `out`.
pub fn dots_f16(a: &[f32], b: &[f32], width: usize, single: bool, out: &mut Vec<f32>) {
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        // SAFETY: the features were detected on this CPU.
        return unsafe { dots_f16_avx2(a, b, width, single, out) };
    }
    for x in a.chunks_exact(width.max(1)) {
        out.extend(b.chunks_exact(width.max(1)).map(|y| dot_f16_scalar(x, y, single)));
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dots_f16_avx2(a: &[f32], b: &[f32], width: usize, single: bool, out: &mut Vec<f32>) {
    for x in a.chunks_exact(width.max(1)) {
        for y in b.chunks_exact(width.max(1)) {
            out.push(dot_f16_avx2(x, y, single));
        }
    }
}

/// [`dot_f16`] 8 products at a time, as ggml's AVX2 code takes them; the tail (fewer than 8
/// or 32 values) goes to the lanes its positions name, as zeros padding the row would.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn dot_f16_avx2(a: &[f32], b: &[f32], single: bool) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let step = if single { 32 } else { 8 };
    let whole = n - n % step;
    let mut acc = [_mm256_setzero_ps(); 4];
    for c in (0..whole).step_by(8) {
        let slot = if single { (c / 8) % 4 } else { 0 };
        let (x, y) = (_mm256_loadu_ps(a.as_ptr().add(c)), _mm256_loadu_ps(b.as_ptr().add(c)));
        acc[slot] = _mm256_fmadd_ps(x, y, acc[slot]);
    }
    let mut lanes = [[0f32; 8]; 4];
    for (slot, v) in acc.iter().enumerate() {
        _mm256_storeu_ps(lanes[slot].as_mut_ptr(), *v);
    }
    for i in whole..n {
        let slot = if single { (i / 8) % 4 } else { 0 };
        lanes[slot][i % 8] += a[i] * b[i];
    }
    if single {
        reduce4(&lanes)
    } else {
        hsum8(&lanes[0])
    }
}

/// `ggml_vec_dot_f16`'s reduction of its 4 × 8 accumulators.
#[inline(always)]
fn reduce4(acc: &[[f32; 8]; 4]) -> f32 {
    let mut a0 = [0f32; 8];
    for l in 0..8 {
        let (p, q) = (acc[0][l] + acc[2][l], acc[1][l] + acc[3][l]);
        a0[l] = p + q;
    }
    let t = [a0[0] + a0[4], a0[1] + a0[5], a0[2] + a0[6], a0[3] + a0[7]];
    (t[0] + t[1]) + (t[2] + t[3])
}

/// [`dot_f16`] one product at a time.
fn dot_f16_scalar(a: &[f32], b: &[f32], single: bool) -> f32 {
    if single {
        let mut acc = [[0f32; 8]; 4];
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            let slot = &mut acc[(i / 8) % 4][i % 8];
            *slot += x * y;
        }
        reduce4(&acc)
    } else {
        let mut acc = [0f32; 8];
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            acc[i % 8] += x * y;
        }
        hsum8(&acc)
    }
}

/// `part` of `0..count` split into one even run per thread of the current rayon pool (the
/// trace's own, `model/pool.rs`), computed on them and concatenated in order. Each value is
/// one kernel call, so the split changes no bit, whatever the number of cores. A panic in a
/// part is an error, not a panic of the trace.
pub fn on_threads(count: usize, part: impl Fn(std::ops::Range<usize>) -> Vec<f32> + Sync) -> anyhow::Result<Vec<f32>> {
    use rayon::prelude::*;
    let runs: Vec<(usize, usize)> =
        crate::config::tiles::even_tiles(count, count.div_ceil(rayon::current_num_threads())).collect();
    let parts = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runs.into_par_iter().map(|(first, len)| part(first..first + len)).collect::<Vec<_>>()
    }))
    .map_err(|_| anyhow::anyhow!("internal: a ggml kernel's thread failed"))?;
    Ok(parts.concat())
}

/// Whether this CPU has the FMA and AVX2 instructions ggml's kernels use.
pub fn has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("fma") && std::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `pub fn $name($args)` running `$body` compiled for FMA where the CPU has it (the hardware
/// instruction for every `mul_add` instead of a call to `fmaf`), else as it is: the same
/// values either way.
macro_rules! with_fma {
    ($(#[$doc:meta])* pub fn $name:ident($($arg:ident: $ty:ty),*) $body:block) => {
        $(#[$doc])*
        pub fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn plain($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "fma,avx2")]
            unsafe fn fused($($arg: $ty),*) {
                plain($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            if has_fma() {
                // SAFETY: the features were detected on this CPU.
                return unsafe { fused($($arg),*) };
            }
            plain($($arg),*)
        }
    };
}

/// `fill` run with a vector of `capacity`, compiled for FMA where the CPU has it: the
/// k-quants' row loops (`kquants.rs`), whose `mul_add`s are then instructions.
pub fn fused_rows(capacity: usize, fill: impl Fn(&mut Vec<f32>)) -> Vec<f32> {
    let mut out = Vec::with_capacity(capacity);
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        #[target_feature(enable = "fma,avx2")]
        unsafe fn fused(out: &mut Vec<f32>, fill: &impl Fn(&mut Vec<f32>)) {
            fill(out)
        }
        // SAFETY: the features were detected on this CPU.
        unsafe { fused(&mut out, &fill) };
        return out;
    }
    fill(&mut out);
    out
}

with_fma! {
    /// [`soft_max_row`] on every `keys`-long row of `v`.
    pub fn soft_max_rows(v: &mut [f32], keys: usize) {
        for row in v.chunks_exact_mut(keys.max(1)) {
            soft_max_row(row);
        }
    }
}

with_fma! {
    /// SiLU of every `width`-long row of `v` as `ggml_vec_swiglu_f32` computes it: ggml's
    /// exp on the row's first multiple of 8 values, the C library's on the rest.
    pub fn silu_rows(v: &mut [f32], width: usize) {
        let vector = width - width % 8;
        for row in v.chunks_exact_mut(width.max(1)) {
            for (i, e) in row.iter_mut().enumerate() {
                *e = silu(*e, i < vector);
            }
        }
    }
}

with_fma! {
    /// `row`'s pairs (i, i + half) turned by `angles`.
    pub fn rotate_row(row: &mut [f32], angles: &[(f32, f32)]) {
        let half = row.len() / 2;
        for (i, &cs) in angles.iter().enumerate() {
            (row[i], row[i + half]) = rotate_pair(row[i], row[i + half], cs);
        }
    }
}

/// `v` rounded to the nearest integer, halves to even (for |v| < 2²², as every value here
/// is): ggml's `nearest_int`, and what `_mm256_round_ps` gives, without a call to `rintf`.
#[inline]
pub fn nearest(v: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 · 2²³
    (v + MAGIC) - MAGIC
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v_expf_is_close_to_exp_and_zero_far_below() {
        for x in [-20.0f32, -3.5, -1.0, -0.1, 0.0, 0.5, 2.0] {
            let (a, b) = (v_expf(x), x.exp());
            assert!((a - b).abs() <= 3.0 * f32::EPSILON * b, "{x}: {a} vs {b}");
        }
        assert_eq!(v_expf(f32::NEG_INFINITY), 0.0);
        assert_eq!(v_expf(-200.0), 0.0);
    }

    #[test]
    fn softmax_rows_sum_to_one_and_masked_keys_get_nothing() {
        let mut row = [0.5f32, -1.0, f32::NEG_INFINITY, 2.0, 0.0, 1.0, 3.0, -2.0, 0.25];
        soft_max_row(&mut row);
        assert_eq!(row[2], 0.0);
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn both_dot_orders_sum_the_same_products() {
        // f16 values, as the callers pass: their products are exact in f32.
        let f16 = |v: f32| half::f16::from_f32(v).to_f32();
        let a: Vec<f32> = (0..64).map(|i| f16((i as f32 * 0.37).sin())).collect();
        let b: Vec<f32> = (0..64).map(|i| f16((i as f32 * 0.11).cos())).collect();
        let exact: f64 = a.iter().zip(&b).map(|(x, y)| (*x as f64) * (*y as f64)).sum();
        for single in [true, false] {
            assert!((dot_f16(&a, &b, single) as f64 - exact).abs() < 1e-5);
            // The machine's instructions and the scalar code give the same bits, tails too.
            for n in [64, 61, 7] {
                assert_eq!(dot_f16(&a[..n], &b[..n], single), dot_f16_scalar(&a[..n], &b[..n], single));
            }
        }
    }
}
