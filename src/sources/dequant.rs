//! GGUF blocks made f32 faster than candle's `to_float`, with the same bits: the same
//! operations in the same order (`q as f32 * d + m`, a product then a sum, never fused), in
//! loops over whole blocks that the compiler vectorizes, built a second time for AVX2 and
//! picked at run time (the release build targets baseline x86-64). candle's scalar loops
//! made a short trace of SmolLM2 Q4_1 spend ~150 ms converting its layers, most of the
//! command's time; the types here are the common simple ones, others go through candle.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use half::f16;
use std::mem::MaybeUninit;

/// `q` in f32, when its type is one of those handled here (else `None`: candle's own).
pub fn dequantize(q: &QTensor) -> candle_core::Result<Option<Tensor>> {
    let kind = match q.dtype() {
        GgmlDType::Q4_0 => Kind::Q4_0,
        GgmlDType::Q4_1 => Kind::Q4_1,
        GgmlDType::Q5_0 => Kind::Q5_0,
        GgmlDType::Q8_0 => Kind::Q8_0,
        _ => return Ok(None),
    };
    let bytes = q.data()?;
    let n = q.shape().elem_count();
    if bytes.len() != n / 32 * kind.size() || !n.is_multiple_of(32) {
        return Ok(None);
    }
    // Written once, not zeroed first (zeroing 430 MB of layers cost as much as converting them).
    let mut out: Vec<f32> = Vec::with_capacity(n);
    blocks(kind, &bytes, &mut out.spare_capacity_mut()[..n]);
    // SAFETY: `blocks` wrote all n values: n / 32 blocks of 32, `bytes` holding exactly n / 32
    // blocks (checked above).
    unsafe { out.set_len(n) };
    Ok(Some(Tensor::from_vec(out, q.shape(), &Device::Cpu)?))
}

#[derive(Clone, Copy)]
enum Kind {
    Q4_0,
    Q4_1,
    Q5_0,
    Q8_0,
}

impl Kind {
    /// Bytes per block of 32 values: an f16 scale (and Q4_1's f16 minimum), then the quants.
    fn size(self) -> usize {
        match self {
            Kind::Q4_0 => 18,
            Kind::Q4_1 => 20,
            Kind::Q5_0 => 22,
            Kind::Q8_0 => 34,
        }
    }
}

fn blocks(kind: Kind, bytes: &[u8], out: &mut [MaybeUninit<f32>]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { blocks_avx2(kind, bytes, out) };
    }
    blocks_plain(kind, bytes, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn blocks_avx2(kind: Kind, bytes: &[u8], out: &mut [MaybeUninit<f32>]) {
    blocks_plain(kind, bytes, out)
}

#[inline(always)]
fn blocks_plain(kind: Kind, bytes: &[u8], out: &mut [MaybeUninit<f32>]) {
    let half = |b: &[u8]| f16::from_le_bytes([b[0], b[1]]).to_f32();
    let pieces = bytes.chunks_exact(kind.size()).zip(out.chunks_exact_mut(32));
    match kind {
        // candle: x0 = (qs[j] & 0x0F) as i16 - 8; y = (x0 as f32) * d.
        Kind::Q4_0 => pieces.for_each(|(b, y)| {
            let d = half(b);
            let (lo, hi) = y.split_at_mut(16);
            for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(&b[2..18]) {
                l.write(((q & 0x0F) as i16 - 8) as f32 * d);
                h.write(((q >> 4) as i16 - 8) as f32 * d);
            }
        }),
        // candle: y = (x0 as f32) * d + m.
        Kind::Q4_1 => pieces.for_each(|(b, y)| {
            let (d, m) = (half(b), half(&b[2..]));
            let (lo, hi) = y.split_at_mut(16);
            for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(&b[4..20]) {
                l.write((q & 0x0F) as f32 * d + m);
                h.write((q >> 4) as f32 * d + m);
            }
        }),
        // candle: the fifth bits of the 32 values in qh; x0 = ((qs[j] & 0x0F) | xh_0) as i32 - 16.
        Kind::Q5_0 => pieces.for_each(|(b, y)| {
            let d = half(b);
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            let (lo, hi) = y.split_at_mut(16);
            for (j, ((l, h), &q)) in lo.iter_mut().zip(hi.iter_mut()).zip(&b[6..22]).enumerate() {
                let xh_0 = (((qh >> j) << 4) & 0x10) as u8;
                let xh_1 = ((qh >> (j + 12)) & 0x10) as u8;
                l.write((((q & 0x0F) | xh_0) as i32 - 16) as f32 * d);
                h.write((((q >> 4) | xh_1) as i32 - 16) as f32 * d);
            }
        }),
        // candle: y = qs[j] as f32 * d, the quants signed.
        Kind::Q8_0 => pieces.for_each(|(b, y)| {
            let d = half(b);
            for (v, &q) in y.iter_mut().zip(&b[2..34]) {
                v.write(q as i8 as f32 * d);
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::ggml_file::qtensor_from_ggml;

    /// Every type here gives candle's bits, for blocks of random bytes whose scales are
    /// ordinary, subnormal, zero, infinite and NaN f16 values.
    #[test]
    fn the_bits_are_candles() {
        let mut g = crate::torch_rng::TorchGenerator::new(7, crate::torch_rng::Kernel::Avx2);
        let mut byte = move || g.random() as u8;
        let specials: [u16; 6] = [0x3C00, 0x0001, 0x0000, 0x7C00, 0xFC00, 0x7E00];
        let kinds = [
            (GgmlDType::Q4_0, Kind::Q4_0),
            (GgmlDType::Q4_1, Kind::Q4_1),
            (GgmlDType::Q5_0, Kind::Q5_0),
            (GgmlDType::Q8_0, Kind::Q8_0),
        ];
        for (dtype, kind) in kinds {
            let blocks = 4096;
            let mut raw: Vec<u8> = (0..blocks * kind.size()).map(|_| byte()).collect();
            for (i, b) in raw.chunks_exact_mut(kind.size()).enumerate().take(2 * specials.len()) {
                let s = specials[i % specials.len()].to_le_bytes();
                b[(i / specials.len()) * 2..][..2].copy_from_slice(&s);
            }
            let q = qtensor_from_ggml(dtype, &raw, vec![blocks / 8, 256], &Device::Cpu).unwrap();
            let want = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let got = dequantize(&q).unwrap().unwrap();
            assert_eq!(got.dims(), q.shape().dims());
            let got = got.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let same = want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same && want.len() == got.len(), "{dtype:?}");
            let mut plain = vec![MaybeUninit::new(0f32); got.len()];
            blocks_plain(kind, &raw, &mut plain);
            // SAFETY: initialised above (and overwritten).
            let plain: Vec<f32> = plain.into_iter().map(|v| unsafe { v.assume_init() }).collect();
            assert!(plain.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()), "{dtype:?} without AVX2");
        }
    }
}
