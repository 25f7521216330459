//! Rotary position embedding (Su et al. 2021, "RoFormer"), in Hugging Face's layout: a head's
//! dimension i pairs with i + d/2 (`rotate_half`), and the pair rotates by position × θ_i,
//! where θ_i is `inv_freq[i]` (the config holds them after any `rope_scaling`). With partial
//! rotary (GPT-NeoX, Phi-4-mini) d is the rotary width, `2 · inv_freq.len()`, below the
//! head's: only the first d dimensions turn, the rest pass through.

use crate::config::Rope;
use anyhow::Result;
use candle_core::{Device, Tensor, D};

/// The cos and sin tables of `rope` for the `n` positions from `offset` on, `[pos, rotary
/// width]`, times its attention scaling where it has one (LongRoPE multiplies both, as
/// transformers does).
pub fn cos_sin(rope: &Rope, (offset, n): (usize, usize)) -> Result<(Tensor, Tensor)> {
    let (cos, sin) = tables(&rope.inv_freq, (offset, n))?; // [pos, rotary width] each
    Ok(match rope.attention_scaling {
        Some(s) => ((cos * s)?, (sin * s)?),
        None => (cos, sin),
    })
}

/// cos and sin of position × frequency for positions `offset..offset + n`, `[pos, d]`: each
/// frequency twice (`cat(freqs, freqs)`), computed in f32 as transformers computes them (a
/// position's row is the same whether it is computed alone or with the ones before it).
pub fn tables(inv_freq: &[f64], (offset, n): (usize, usize)) -> Result<(Tensor, Tensor)> {
    let half = inv_freq.len();
    let (mut cos, mut sin) = (Vec::with_capacity(n * 2 * half), Vec::with_capacity(n * 2 * half));
    for p in offset..offset + n {
        for _ in 0..2 {
            for &f in inv_freq {
                let angle = p as f32 * f as f32;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
    }
    let dev = &Device::Cpu;
    Ok((Tensor::from_vec(cos, (n, 2 * half), dev)?, Tensor::from_vec(sin, (n, 2 * half), dev)?))
}

/// x·cos + rotate_half(x)·sin for x of `[head, pos, d]`, where rotate_half([a, b]) = [−b, a],
/// on the first r dimensions of each head (r, the tables' width, is d unless the rotary is
/// partial); the other d − r are copied.
pub fn rotate(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let (d, r) = (x.dim(D::Minus1)?, cos.dim(D::Minus1)?);
    let turned = x.narrow(D::Minus1, 0, r)?; // [head, pos, r]
    let (a, b) = (turned.narrow(D::Minus1, 0, r / 2)?, turned.narrow(D::Minus1, r / 2, r / 2)?);
    let rotated = Tensor::cat(&[&b.neg()?, &a], D::Minus1)?; // [head, pos, r]
    let turned = (turned.broadcast_mul(cos)? + rotated.broadcast_mul(sin)?)?; // [head, pos, r]
    if r == d {
        return Ok(turned);
    }
    Ok(Tensor::cat(&[&turned, &x.narrow(D::Minus1, r, d - r)?], D::Minus1)?) // [head, pos, d]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarter_turn_by_hand() {
        // One pair, frequency π/2: position 1 turns (1, 0) into (0, 1).
        let (cos, sin) = tables(&[std::f64::consts::FRAC_PI_2], (0, 2)).unwrap();
        let x = Tensor::new(&[[[1f32, 0.0], [1.0, 0.0]]], &Device::Cpu).unwrap();
        let y = rotate(&x, &cos, &sin).unwrap().to_vec3::<f32>().unwrap();
        assert_eq!(y[0][0], vec![1.0, 0.0]);
        assert!(y[0][1][0].abs() < 1e-7 && (y[0][1][1] - 1.0).abs() < 1e-7, "{y:?}");
    }

    #[test]
    fn partial_rotary_turns_the_first_dims_and_copies_the_rest() {
        // Rotary width 2 of a head of 4: position 1 turns (1, 0) into (0, 1); 7 and 9 stay.
        let (cos, sin) = tables(&[std::f64::consts::FRAC_PI_2], (0, 2)).unwrap();
        let x = Tensor::new(&[[[1f32, 0.0, 7.0, 9.0], [1.0, 0.0, 7.0, 9.0]]], &Device::Cpu).unwrap();
        let y = rotate(&x, &cos, &sin).unwrap().to_vec3::<f32>().unwrap();
        assert_eq!(y[0][0], vec![1.0, 0.0, 7.0, 9.0]);
        assert!(y[0][1][0].abs() < 1e-7 && (y[0][1][1] - 1.0).abs() < 1e-7 && y[0][1][2..] == [7.0, 9.0], "{y:?}");
    }
}
