//! `--arithmetic ggml`: the arithmetic of llama.cpp's CPU backend for a GGUF file, in place
//! of f32 on dequantized weights (transformers' arithmetic, the default).
//!
//! llama.cpp does not multiply f32 activations by f32 weights. For a weight stored as Q4_1 it
//! first quantizes each row of the input to Q8_1 (blocks of 32 values: an f16 scale `d`, 32
//! integers `q = round(x · 127 / max|x|)`, and the block's sum `s`), then takes integer dot
//! products with the weight's blocks (ggml's `vec_dot_type`: `params::InputForm::of`). Every
//! product is `Σ_blocks d_w · d_x · Σ q_w q_x (+ m_w · s_x)`, which is exactly `Σ w · x'`
//! with `w` the dequantized weight and `x' = d_x · q_x` the quantized input dequantized — so
//! this module rounds the input as llama.cpp quantizes it and the product stays candle's
//! f32 one on the dequantized weight: the two sums differ only in f32 rounding (~1e-7
//! relative), and every other step (recording, patching, attribution) keeps its f32 weight.
//! The one term that is not a product of rounded inputs, Q8_1's stored sum `s = f16(d · Σq)`,
//! enters as a correction, `(s − d_f16 · Σq) · m_w`, a product with each block's offset.
//!
//! The rounding follows ggml's x86 code (`ggml-cpu/arch/x86/quants.c`, and `ggml-quants.c`
//! for Q8_K): Q8_0 and Q8_1 round half to even (`_mm256_round_ps`), `d = max / 127` stored as
//! f16 and the multiplier `127 / max` in f32; Q8_K (blocks of 256) scales by `−127 / x_max`
//! with the signed value of largest magnitude, rounds half to even (`nearest_int`), keeps
//! `d = 1 / iscale` in f32 and clamps at 127. F16 and BF16 weights take the input rounded to
//! 16 bits.
//!
//! Where llama.cpp's kernel is known operation for operation, the step is computed with it
//! and gives llama.cpp's bits (`kernels.rs`, `exact.rs`, `blocks.rs`, `kquants.rs`): the
//! products with Q4_1, Q5_0, Q8_0, Q4_K and Q6_K weights, RMSNorm, the plain rotation, the
//! attention — its KV cache holds keys and
//! values in f16 (llama.cpp's default), q·kᵀ takes q in f16, the weights are converted to f16
//! for their product with the values, flash attention off — SwiGLU's SiLU and GELU's table.
//! The rounding above is the rest: the products with the other weight types (Q4_0, Q5_1,
//! Q2_K, Q3_K, Q5_K, f16, …), whose sums are candle's in f32.

pub mod blocks;
pub mod exact;
pub mod kernels;
pub mod kquants;

use crate::config::{Arithmetic, ModelConfig};
use crate::params::{GgmlInput, InputForm};
use anyhow::{anyhow, Result};
use candle_core::Tensor;
use half::{bf16, f16};

/// `x` (`[pos, in]`) as llama.cpp hands it to the product with a weight of `g`'s form, and
/// for Q8_1 the correction per block (`[pos, in / 32]`) that multiplies the weight's offsets.
pub fn rounded_input(x: &Tensor, g: &GgmlInput) -> Result<(Tensor, Option<Tensor>)> {
    let (pos, width) = x.dims2()?;
    let mut values = x.flatten_all()?.to_vec1::<f32>()?;
    let block = match g.form {
        InputForm::F16 | InputForm::Bf16 => 1,
        InputForm::Q8_0 | InputForm::Q8_1 => 32,
        InputForm::Q8K => 256,
    };
    if width % block != 0 {
        return Err(anyhow!("internal: a {width}-wide input cannot be quantized in blocks of {block}"));
    }
    // The quantized values dequantized, `d · q`, from the kernels' own quantizers; for Q8_1 the
    // stored sum's difference from the rounded values' sum, `s − d · Σq` (exact in f32: `d`
    // has 11 significant bits and |Σq| ≤ 4064).
    let mut deltas = Vec::new();
    for row in values.chunks_mut(width.max(1)) {
        match g.form {
            InputForm::F16 => row.iter_mut().for_each(|v| *v = f16::from_f32(*v).to_f32()),
            InputForm::Bf16 => row.iter_mut().for_each(|v| *v = bf16::from_f32(*v).to_f32()),
            InputForm::Q8_0 | InputForm::Q8_1 => {
                let quantized = blocks::quantize(row);
                for (b, chunk) in row.chunks_mut(32).enumerate() {
                    let (d, q) = (quantized.d[b], &quantized.q[b * 32..b * 32 + 32]);
                    chunk.iter_mut().zip(q).for_each(|(v, &q)| *v = d * q as f32);
                    let sum: i32 = q.iter().map(|&q| q as i32).sum();
                    deltas.push(quantized.s[b] - d * sum as f32);
                }
            }
            InputForm::Q8K => {
                let quantized = kquants::quantize(row);
                for (b, chunk) in row.chunks_mut(256).enumerate() {
                    let (d, q) = (quantized.d[b], &quantized.q[b * 256..b * 256 + 256]);
                    chunk.iter_mut().zip(q).for_each(|(v, &q)| *v = d * q as f32);
                }
            }
        }
    }
    let rounded = Tensor::from_vec(values, (pos, width), x.device())?; // [pos, in]
    let correction = match (&g.mins, g.form) {
        (Some(_), InputForm::Q8_1) => Some(Tensor::from_vec(deltas, (pos, width / block), x.device())?), // [pos, blocks]
        _ => None,
    };
    Ok((rounded, correction))
}

/// `y` (`[pos, out]`) with Q8_1's sums in place of the rounded inputs' (`correction`,
/// `[pos, blocks]`) in the offsets' term (`mins`, `[out, blocks]`).
pub fn corrected(y: Tensor, correction: Option<Tensor>, g: &GgmlInput) -> Result<Tensor> {
    match (correction, &g.mins) {
        (Some(c), Some(m)) => Ok((y + crate::model::kernels::product::matmul(&c, &m.t()?)?)?), // [pos, out]
        _ => Ok(y),
    }
}

/// Whether the pass computes as llama.cpp does.
pub fn on(cfg: &ModelConfig) -> bool {
    cfg.parts.arithmetic == Arithmetic::Ggml
}

/// The scale llama.cpp multiplies q by before the scores (Gemma's), where it is a power of
/// two, so that dividing the products by it again is exact.
pub fn q_scale(cfg: &ModelConfig, run: &crate::config::RunConfig) -> Option<f32> {
    let s = cfg.scale as f32;
    let power_of_two = s > 0.0 && s.is_normal() && s.to_bits() & 0x007f_ffff == 0;
    (run.ggml_scales_q && power_of_two).then_some(s)
}

/// GELU's tanh form as ggml's CPU backend computes it (`GGML_GELU_FP16`): looked up in a
/// table of its f16 values at every f16 input, so the input is rounded to f16 and so is the
/// output; x ≤ −10 gives 0 and x ≥ 10 gives x, as there. The table's entries are
/// `0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²)))` in f32, the inner sum fused (as GCC
/// compiles it): this reproduces llama.cpp's `ffn_geglu` for Gemma 3 bit for bit
/// (fixtures/oracle/README.md).
pub fn gelu_table(x: &Tensor) -> Result<Tensor> {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let values: Vec<f32> = x
        .flatten_all()?
        .to_vec1::<f32>()?
        .into_iter()
        .map(|v| {
            if v <= -10.0 {
                0.0
            } else if v >= 10.0 {
                v
            } else {
                let h = f16::from_f32(v).to_f32();
                // `1 + A·x·x` as the compiler builds ggml's table: one fused multiply-add.
                let g = 0.5 * h * (1.0 + (SQRT_2_OVER_PI * h * (0.044715 * h).mul_add(h, 1.0)).tanh());
                f16::from_f32(g).to_f32()
            }
        })
        .collect();
    Ok(Tensor::from_vec(values, x.shape(), x.device())?)
}

/// A gated GELU as `ggml_vec_geglu_f32` computes it: `table(gate) · up`, exactly 0 where the
/// gate is at most −10 (not −0 for a negative `up`) and `gate · up` from 10 on.
pub fn geglu(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    let (g, u) = (gate.flatten_all()?.to_vec1::<f32>()?, up.flatten_all()?.to_vec1::<f32>()?);
    let table = gelu_table(gate)?.flatten_all()?.to_vec1::<f32>()?;
    let out: Vec<f32> =
        g.iter().zip(&u).zip(&table).map(|((&g, &u), &t)| if g <= -10.0 { 0.0 } else { t * u }).collect();
    Ok(Tensor::from_vec(out, gate.shape(), gate.device())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounded(values: &[f32], form: InputForm) -> Vec<f32> {
        let x = Tensor::from_vec(values.to_vec(), (1, values.len()), &candle_core::Device::Cpu).unwrap();
        let g = GgmlInput { form, mins: None, blocks: None, kblocks: None };
        rounded_input(&x, &g).unwrap().0.flatten_all().unwrap().to_vec1().unwrap()
    }

    #[test]
    fn q8_0_keeps_the_block_maximum_and_rounds_the_rest_to_its_127th() {
        let mut x = vec![0.0f32; 32];
        x[0] = 1.27;
        x[1] = 0.015; // 1.5 steps of 0.01: half to even gives 2
        x[2] = -0.025; // 2.5 steps: 2
        let r = rounded(&x, InputForm::Q8_0);
        let d = f16::from_f32(0.01).to_f32();
        assert_eq!(r[0], 127.0 * d);
        assert_eq!(r[1], 2.0 * d);
        assert_eq!(r[2], -2.0 * d);
        assert!(r[3..].iter().all(|&v| v == 0.0));
    }

    #[test]
    fn nearest_rounds_halves_to_even_as_rint_does() {
        for v in [0.5f32, 1.5, 2.5, -0.5, -1.5, -2.5, 126.49, -126.51, 3.0000002, 0.0, -0.0] {
            assert_eq!(kernels::nearest(v), v.round_ties_even(), "{v}");
        }
    }

    #[test]
    fn gelu_is_ggmls_table_entry() {
        // llama.cpp's `ffn_geglu` on Gemma 3 at x = −1.999: the entry built with a fused
        // multiply-add (without it the table holds the next f16, −0.04547).
        let x = Tensor::new(&[-1.999f32, -10.5, 12.0], &candle_core::Device::Cpu).unwrap();
        let y = gelu_table(&x).unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(y, vec![f16::from_f32(-0.04550).to_f32(), 0.0, 12.0]);
        assert_ne!(y[0], f16::from_f32(-0.04547).to_f32());
    }

    #[test]
    fn q8_k_scales_by_the_signed_largest_value() {
        let mut x = vec![0.5f32; 256];
        x[7] = -2.0;
        let r = rounded(&x, InputForm::Q8K);
        // iscale = 63.5: 0.5 → −31.75 → −32, times d = 1/63.5.
        let d = 1.0f32 / 63.5;
        assert_eq!(r[7], d * -127.0);
        assert_eq!(r[0], d * 32.0);
    }

    #[test]
    fn q8_1_reports_the_difference_of_its_stored_sum() {
        let x: Vec<f32> = (0..32).map(|i| (i as f32 - 10.3) * 0.37).collect();
        let xt = Tensor::from_vec(x, (1, 32), &candle_core::Device::Cpu).unwrap();
        let mins = Tensor::ones((1, 1), candle_core::DType::F32, &candle_core::Device::Cpu).unwrap();
        let g = GgmlInput { form: InputForm::Q8_1, mins: Some(mins), blocks: None, kblocks: None };
        let (r, c) = rounded_input(&xt, &g).unwrap();
        let sum: f32 = r.flatten_all().unwrap().to_vec1::<f32>().unwrap().iter().sum();
        let c = c.unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap()[0];
        // s is the f16 of d·Σq: within an f16 step of the rounded values' sum.
        assert!(c.abs() <= sum.abs() / 1024.0, "{c} vs {sum}");
    }
}
