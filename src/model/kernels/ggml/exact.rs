//! The steps of a pass under `--arithmetic ggml` that llama.cpp computes with its own kernels
//! (`kernels.rs`), on candle tensors: RMSNorm, the rotation, q·kᵀ, the softmax, the weights'
//! product with the values and SiLU. Each gives llama.cpp's bits (tests/it/ggml.rs).

use super::kernels::{self, dots_f16, rms_norm_row, rope_angles, rotate_row, soft_max_rows};
use crate::config::Rope;
use anyhow::Result;
use candle_core::{Tensor, D};
use half::f16;

fn values(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.flatten_all()?.to_vec1::<f32>()?)
}

/// RMSNorm of every row of `x` (its last dimension) with `weight`.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    let (v, w) = (values(x)?, values(weight)?);
    let width = x.dim(D::Minus1)?;
    let mut out = vec![0f32; v.len()];
    for (row, o) in v.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        rms_norm_row(row, &w, eps as f32, o);
    }
    Ok(Tensor::from_vec(out, x.shape(), x.device())?)
}

/// Whether ggml's rotation is this rope: every dimension turning by base^(−2i/d) alone (no
/// scaling of any kind), so that its angles are ggml's.
pub fn plain(rope: &Rope, d: usize) -> bool {
    rope.scaling.is_none()
        && rope.attention_scaling.is_none()
        && rope.longrope.is_none()
        && rope.dims.is_none_or(|dims| dims == d)
}

/// `x` (`[head, pos, d]`, Hugging Face's layout: dimension i pairs with i + d/2) turned for
/// positions `offset..` as `ggml_rope` turns them.
pub fn rotate(x: &Tensor, rope: &Rope, offset: usize) -> Result<Tensor> {
    let (heads, n, d) = x.dims3()?;
    let mut v = values(x)?;
    for p in 0..n {
        let angles = rope_angles(offset + p, rope.theta as f32, d);
        for h in 0..heads {
            rotate_row(&mut v[(h * n + p) * d..(h * n + p + 1) * d], &angles);
        }
    }
    Ok(Tensor::from_vec(v, (heads, n, d), x.device())?)
}

/// `t`'s rows of width `d` in f16, their dimensions in llama.cpp's order: a permuted family's
/// (`interleaved`) dimension i of the file is Hugging Face's i/2, or d/2 + i/2 when odd.
fn rows_f16(t: &Tensor, interleaved: bool) -> Result<(Vec<f32>, usize)> {
    rows_f16_scaled(t, interleaved, 1.0)
}

/// [`rows_f16`] of `t · scale`, the product rounded to f32 first.
fn rows_f16_scaled(t: &Tensor, interleaved: bool, scale: f32) -> Result<(Vec<f32>, usize)> {
    let d = t.dim(D::Minus1)?;
    let mut v = values(t)?;
    if scale != 1.0 {
        v.iter_mut().for_each(|x| *x *= scale);
    }
    let order: Vec<usize> = (0..d).map(|i| if interleaved { i / 2 + (i % 2) * (d / 2) } else { i }).collect();
    let mut out = Vec::with_capacity(v.len());
    for row in v.chunks_exact(d.max(1)) {
        for &i in &order {
            out.push(f16::from_f32(row[i]).to_f32());
        }
    }
    Ok((out, d))
}

/// q·kᵀ per head (`[head, pos, d]` × `[kv_head, keys, d]` → `[head, pos, keys]`), in f16
/// (llama.cpp's KV cache and q converted for the product), query head h reading key head
/// h / (heads / kv_heads). `q_scale`: a power of two llama.cpp multiplies q by before its
/// rounding (Gemma); the products are divided by it again (exactly), so that the step is still
/// q·kᵀ and its scaling the scores' `scale`.
pub fn scores(q: &Tensor, k: &Tensor, interleaved: bool, q_scale: Option<f32>) -> Result<Tensor> {
    let ((heads, n, _), (kv_heads, keys, _)) = (q.dims3()?, k.dims3()?);
    let s = q_scale.unwrap_or(1.0);
    let ((qv, d), (kv, _)) = (rows_f16_scaled(q, interleaved, s)?, rows_f16(k, interleaved)?);
    let single = n == 1;
    let out = by_heads(heads, |h| {
        let g = h / (heads / kv_heads);
        let mut out = Vec::with_capacity(n * keys);
        dots_f16(&qv[h * n * d..(h + 1) * n * d], &kv[g * keys * d..(g + 1) * keys * d], d, single, &mut out);
        if s != 1.0 {
            out.iter_mut().for_each(|x| *x /= s);
        }
        out
    })?;
    Ok(Tensor::from_vec(out, (heads, n, keys), q.device())?)
}

/// `head(h)` for every head, the heads split between the pool's threads, in head order.
fn by_heads(heads: usize, head: impl Fn(usize) -> Vec<f32> + Sync) -> Result<Vec<f32>> {
    kernels::on_threads(heads, |hs| hs.flat_map(&head).collect())
}

/// The softmax of every row of the scaled, masked scores.
pub fn softmax(scores: &Tensor) -> Result<Tensor> {
    let keys = scores.dim(D::Minus1)?;
    let mut v = values(scores)?;
    soft_max_rows(&mut v, keys);
    Ok(Tensor::from_vec(v, scores.shape(), scores.device())?)
}

/// The weights' product with the values (`[head, pos, keys]` × `[kv_head, keys, d]`), both in
/// f16 as llama.cpp multiplies them, summed over the keys in its order.
pub fn context(weights: &Tensor, v: &Tensor) -> Result<Tensor> {
    let ((heads, n, keys), (kv_heads, _, d)) = (weights.dims3()?, v.dims3()?);
    let (w, _) = rows_f16(weights, false)?;
    // Each value column as a row over the keys.
    let (vt, _) = rows_f16(&v.transpose(1, 2)?.contiguous()?, false)?; // [kv_head, d, keys]
    let single = n == 1;
    let out = by_heads(heads, |h| {
        let g = h / (heads / kv_heads);
        let mut out = Vec::with_capacity(n * d);
        dots_f16(&w[h * n * keys..(h + 1) * n * keys], &vt[g * d * keys..(g + 1) * d * keys], keys, single, &mut out);
        out
    })?;
    Ok(Tensor::from_vec(out, (heads, n, d), weights.device())?)
}

/// SiLU of every row of `x` (`[pos, width]`) as `ggml_vec_swiglu_f32` computes it: ggml's exp
/// on the row's first multiple of 8 values, the C library's on the rest.
pub fn silu_rows(x: &Tensor) -> Result<Tensor> {
    let width = x.dim(D::Minus1)?;
    let mut v = values(x)?;
    kernels::silu_rows(&mut v, width);
    Ok(Tensor::from_vec(v, x.shape(), x.device())?)
}
