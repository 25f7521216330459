//! LayerNorm over the last dimension (Ba et al. 2016), as PyTorch's `nn.LayerNorm`:
//! `(x − mean) / sqrt(var + eps) · weight + bias`, with the biased variance.
//!
//! Two passes on purpose: candle_nn's fused `ops::layer_norm` (0.11) computes the variance as
//! E[x²] − mean² in f32, which cancels catastrophically when a row's mean is large next to
//! its spread (we measured 3e-5 errors on ordinary traces). Centring first, as PyTorch does,
//! keeps every row within f32 rounding of the exact result.

use crate::config::ModelConfig;
use crate::params::LayerNorm;
use anyhow::Result;
use candle_core::{Tensor, D};

/// The block's norm: RMSNorm or LayerNorm, as the config says, with its eps.
pub fn norm(x: &Tensor, p: &LayerNorm, cfg: &ModelConfig) -> Result<Tensor> {
    if cfg.parts.rms_norm && super::kernels::ggml::on(cfg) {
        super::kernels::ggml::exact::rms_norm(x, &p.weight, cfg.eps) // llama.cpp's kernel
    } else if cfg.parts.rms_norm {
        rms_norm(x, p, cfg.eps)
    } else {
        layer_norm(x, p, cfg.eps)
    }
}

pub fn layer_norm(x: &Tensor, p: &LayerNorm, eps: f64) -> Result<Tensor> {
    let d = x.dim(D::Minus1)? as f64;
    let mean = (x.sum_keepdim(D::Minus1)? / d)?; // [pos, 1]
    let centred = x.broadcast_sub(&mean)?; // [pos, d_model]
    let var = (centred.sqr()?.sum_keepdim(D::Minus1)? / d)?; // [pos, 1]
    let inv_std = (var + eps)?.sqrt()?.recip()?; // [pos, 1]
    let normed = centred.broadcast_mul(&inv_std)?; // [pos, d_model]
    let scaled = normed.broadcast_mul(&p.weight)?;
    Ok(match &p.bias {
        Some(b) => scaled.broadcast_add(b)?,
        None => scaled,
    })
}

/// RMSNorm (Zhang & Sennrich 2019), as Hugging Face's LlamaRMSNorm: x / √(mean(x²) + eps),
/// times the weight; no centring and no bias.
pub fn rms_norm(x: &Tensor, p: &LayerNorm, eps: f64) -> Result<Tensor> {
    let d = x.dim(D::Minus1)? as f64;
    let mean_sq = (x.sqr()?.sum_keepdim(D::Minus1)? / d)?; // [pos, 1]
    let inv_rms = (mean_sq + eps)?.sqrt()?.recip()?; // [pos, 1]
    Ok(x.broadcast_mul(&inv_rms)?.broadcast_mul(&p.weight)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn by_hand_and_with_a_large_mean() {
        let dev = Device::Cpu;
        let p = LayerNorm {
            weight: Tensor::new(&[1f32, 1.0], &dev).unwrap(),
            bias: Some(Tensor::new(&[0f32, 0.0], &dev).unwrap()),
        };
        // [1, 3] → mean 2, var 1 → [-1, 1] (eps 0).
        let y = layer_norm(&Tensor::new(&[[1f32, 3.0]], &dev).unwrap(), &p, 0.0).unwrap();
        assert_eq!(y.to_vec2::<f32>().unwrap(), vec![vec![-1.0, 1.0]]);
        // The same row shifted by 1000: E[x²] − mean² would lose most digits here.
        let y = layer_norm(&Tensor::new(&[[1001f32, 1003.0]], &dev).unwrap(), &p, 0.0).unwrap();
        assert_eq!(y.to_vec2::<f32>().unwrap(), vec![vec![-1.0, 1.0]]);
    }
}
