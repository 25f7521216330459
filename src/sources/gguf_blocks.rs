//! A GGUF matrix's Q4_1 or Q8_0 blocks unpacked for llama.cpp's own products
//! (`--arithmetic ggml`, `model/ggml/blocks.rs`).

use anyhow::Result;
use candle_core::Tensor;

/// A Q4_1 (20-byte blocks: f16 `d`, f16 `m`, 16 bytes of nibbles, the low ones elements
/// 0..15) or Q8_0 (34 bytes: f16 `d`, 32 signed bytes) matrix's blocks, `[rows, bytes per row]`,
/// unpacked as `params::GgmlBlocks`.
pub fn unpack(bytes: &Tensor, q4_1: bool) -> Result<crate::params::GgmlBlocks> {
    let (rows, width) = bytes.dims2()?;
    let size = if q4_1 { 20 } else { 34 };
    let bytes = bytes.flatten_all()?.to_vec1::<u8>()?;
    let count = rows * width / size;
    let (mut d, mut m, mut q) = (Vec::with_capacity(count), Vec::new(), Vec::with_capacity(count * 32));
    let f16_at = |b: &[u8], i: usize| half::f16::from_le_bytes([b[i], b[i + 1]]).to_f32();
    for b in bytes.chunks_exact(size) {
        d.push(f16_at(b, 0));
        if q4_1 {
            m.push(f16_at(b, 2));
            q.extend(b[4..20].iter().map(|&x| (x & 15) as i8));
            q.extend(b[4..20].iter().map(|&x| (x >> 4) as i8));
        } else {
            q.extend(b[2..34].iter().map(|&x| x as i8));
        }
    }
    Ok(crate::params::GgmlBlocks { q4_1, per_row: width / size, d: d.into(), m: m.into(), q: q.into(), start: 0, rows })
}
