//! A GGUF matrix's blocks unpacked for llama.cpp's own products (`--arithmetic ggml`,
//! `model/ggml/blocks.rs` and `kquants.rs`), each in ggml's layout (`ggml-common.h`).

use crate::params::{GgmlBlocks, GgmlKBlocks};
use anyhow::{anyhow, Result};
use candle_core::quantized::GgmlDType;
use candle_core::Tensor;

/// A matrix's blocks, unpacked.
pub enum Unpacked {
    Blocks(GgmlBlocks),
    K(GgmlKBlocks),
}

fn f16_at(b: &[u8], i: usize) -> f32 {
    half::f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// `[rows, bytes per row]` of `dtype`'s blocks, unpacked: Q4_1 (20 bytes: f16 `d`, f16 `m`,
/// 16 bytes of nibbles, the low ones elements 0..15), Q5_0 (22: f16 `d`, 32 high bits, 16
/// bytes of nibbles; values − 16) and Q8_0 (34: f16 `d`, 32 signed bytes) as 32-blocks; Q4_K
/// and Q6_K as super-blocks of 256.
pub fn unpack(bytes: &Tensor, dtype: GgmlDType) -> Result<Unpacked> {
    let (rows, width) = bytes.dims2()?;
    let bytes = bytes.flatten_all()?.to_vec1::<u8>()?;
    let size = dtype.type_size();
    let per_row = width / size;
    if matches!(dtype, GgmlDType::Q4K | GgmlDType::Q6K) {
        return Ok(Unpacked::K(super_blocks(&bytes, dtype == GgmlDType::Q6K, (rows, per_row))));
    }
    let count = rows * per_row;
    let (mut d, mut m, mut q) = (Vec::with_capacity(count), Vec::new(), Vec::with_capacity(count * 32));
    for b in bytes.chunks_exact(size) {
        d.push(f16_at(b, 0));
        match dtype {
            GgmlDType::Q4_1 => {
                m.push(f16_at(b, 2));
                q.extend(b[4..20].iter().map(|&x| (x & 15) as i8));
                q.extend(b[4..20].iter().map(|&x| (x >> 4) as i8));
            }
            GgmlDType::Q5_0 => {
                let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
                let high = |j: usize| (((qh >> j) & 1) << 4) as i32;
                q.extend((0..16).map(|j| ((b[6 + j] & 15) as i32 | high(j)) as i8 - 16));
                q.extend((0..16).map(|j| ((b[6 + j] >> 4) as i32 | high(j + 16)) as i8 - 16));
            }
            GgmlDType::Q8_0 => q.extend(b[2..34].iter().map(|&x| x as i8)),
            other => return Err(anyhow!("internal: no kernel for {other:?} blocks")),
        }
    }
    let q4_1 = dtype == GgmlDType::Q4_1;
    Ok(Unpacked::Blocks(GgmlBlocks { q4_1, per_row, d: d.into(), m: m.into(), q: q.into(), start: 0, rows }))
}

/// Q4_K (144 bytes: f16 `d`, f16 `dmin`, 12 bytes of 6-bit scales and mins, 128 bytes of
/// nibbles, each 32 bytes' low nibbles one sub-block and high nibbles the next) or Q6_K (210:
/// 128 bytes of low nibbles, 64 of high bit pairs, 16 signed scales, f16 `d`).
fn super_blocks(bytes: &[u8], q6_k: bool, (rows, per_row): (usize, usize)) -> GgmlKBlocks {
    let size = if q6_k { 210 } else { 144 };
    let (mut d, mut dmin, mut sc, mut mins, mut q) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for b in bytes.chunks_exact(size) {
        if q6_k {
            let (ql, qh) = (&b[0..128], &b[128..192]);
            sc.extend(b[192..208].iter().map(|&x| x as i8 as i16));
            d.push(f16_at(b, 208));
            for n in 0..2 {
                let (l, h) = (&ql[64 * n..64 * n + 64], &qh[32 * n..32 * n + 32]);
                let six = |low: u8, shift: u32, i: usize| ((low | (((h[i] >> shift) & 3) << 4)) as i8) - 32;
                q.extend((0..32).map(|i| six(l[i] & 15, 0, i)));
                q.extend((0..32).map(|i| six(l[32 + i] & 15, 2, i)));
                q.extend((0..32).map(|i| six(l[i] >> 4, 4, i)));
                q.extend((0..32).map(|i| six(l[32 + i] >> 4, 6, i)));
            }
        } else {
            d.push(f16_at(b, 0));
            dmin.push(f16_at(b, 2));
            let s = &b[4..16];
            for j in 0..8 {
                let (scale, min) = if j < 4 {
                    (s[j] & 63, s[j + 4] & 63)
                } else {
                    ((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4))
                };
                sc.push(scale as i16);
                mins.push(min as i16);
            }
            for chunk in b[16..144].chunks_exact(32) {
                q.extend(chunk.iter().map(|&x| (x & 15) as i8));
                q.extend(chunk.iter().map(|&x| (x >> 4) as i8));
            }
        }
    }
    GgmlKBlocks {
        q6_k,
        per_row,
        d: d.into(),
        dmin: dmin.into(),
        sc: sc.into(),
        mins: mins.into(),
        q: q.into(),
        start: 0,
        rows,
    }
}
