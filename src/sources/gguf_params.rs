//! A GGUF tensor's table entry checked, and a few rows of a table read alone: how a GGUF
//! file's token table and head stay in the file (`params::Stored`, through `gguf_names.rs`),
//! the input's rows and the head a slice of the vocabulary at a time.

use super::gguf::Gguf;
use crate::error::usage;
use anyhow::Result;
use candle_core::Tensor;

impl Gguf {
    /// The tensor `name`'s table entry, checked to have `shape`.
    pub fn check(&self, name: &str, shape: &[usize]) -> Result<&candle_core::quantized::gguf_file::TensorInfo> {
        let info = self.info(name)?;
        if info.shape.dims() != shape {
            return Err(usage(
                &self.what,
                format!("tensor {name} has shape {:?} but the metadata implies {shape:?}", info.shape.dims()),
                "use a consistent GGUF file",
            ));
        }
        Ok(info)
    }

    /// Rows `start .. start + len` of the 2-D tensor `name`, dequantized to f32: the same
    /// numbers as those rows of [`get`](Self::get)'s (ggml quantizes each row in whole
    /// blocks, so a row's bytes are a slice of the tensor's).
    pub fn rows(&self, name: &str, start: usize, len: usize) -> Result<Tensor> {
        let info = self.info(name)?;
        let dims = info.shape.dims();
        let (rows, cols) = (dims[0], dims.get(1).copied().unwrap_or(1));
        let (block, size) = (info.ggml_dtype.block_size(), info.ggml_dtype.type_size());
        if dims.len() != 2 || start + len > rows || cols % block != 0 {
            return Err(usage(
                &self.what,
                format!("rows {start}..{} of tensor {name} {dims:?}", start + len),
                "use a consistent GGUF file",
            ));
        }
        let slice = candle_core::quantized::gguf_file::TensorInfo {
            ggml_dtype: info.ggml_dtype,
            shape: candle_core::Shape::from((len, cols)),
            offset: info.offset + (start * cols / block * size) as u64,
        };
        Ok(self.read(name, &slice)?.reshape((len, cols))?)
    }

    /// The offset `m` of every block of the Q4_1 or Q5_1 tensor `name`, in its shape with the
    /// last dimension counted in blocks of 32 (`params::GgmlInput::mins`); `None` for any
    /// other type. Each block starts with its f16 scale `d`, then its f16 `m`.
    pub fn block_mins(&self, name: &str) -> Result<Option<Tensor>> {
        use candle_core::quantized::GgmlDType;
        if !matches!(self.info(name)?.ggml_dtype, GgmlDType::Q4_1 | GgmlDType::Q5_1) {
            return Ok(None);
        }
        let (bytes, size, mut dims) = self.raw_blocks(name)?;
        if let Some(last) = dims.last_mut() {
            *last /= 32;
        }
        let mins: Vec<f32> =
            bytes.chunks_exact(size).map(|b| half::f16::from_le_bytes([b[2], b[3]]).to_f32()).collect();
        Ok(Some(Tensor::from_vec(mins, dims, &candle_core::Device::Cpu)?))
    }

    /// The Q4_1, Q5_0, Q8_0, Q4_K or Q6_K matrix `name`'s blocks as stored, `[rows, bytes per
    /// row]` (u8), with their type; `None` for any other type or shape.
    pub fn block_bytes(&self, name: &str) -> Result<Option<(Tensor, candle_core::quantized::GgmlDType)>> {
        use candle_core::quantized::GgmlDType as T;
        let info = self.info(name)?;
        let dtype = info.ggml_dtype;
        if !matches!(dtype, T::Q4_1 | T::Q5_0 | T::Q8_0 | T::Q4K | T::Q6K) || info.shape.dims().len() != 2 {
            return Ok(None);
        }
        let (bytes, _, dims) = self.raw_blocks(name)?;
        let per_row = bytes.len() / dims[0].max(1);
        Ok(Some((Tensor::from_vec(bytes, (dims[0], per_row), &candle_core::Device::Cpu)?, dtype)))
    }

    /// The bytes of tensor `name`'s blocks, the size of one block, and its shape (checked to
    /// be whole blocks of 32 or 256 along its last dimension).
    fn raw_blocks(&self, name: &str) -> Result<(Vec<u8>, usize, Vec<usize>)> {
        use std::io::{Read, Seek, SeekFrom};
        let info = self.info(name)?;
        let (block, size) = (info.ggml_dtype.block_size(), info.ggml_dtype.type_size());
        let dims = info.shape.dims().to_vec();
        let bad = |why: String| usage(&self.what, format!("tensor {name}: {why}"), "use a complete GGUF file");
        if !(block == 32 || block == 256) || dims.last().is_none_or(|c| c % block != 0) {
            return Err(bad(format!("{dims:?} is not in whole blocks of {block}")));
        }
        let mut bytes = vec![0u8; info.shape.elem_count() / block * size];
        let mut f = std::fs::File::open(&self.path).map_err(|e| bad(e.to_string()))?;
        f.seek(SeekFrom::Start(self.content.tensor_data_offset.saturating_add(info.offset)))
            .and_then(|_| f.read_exact(&mut bytes))
            .map_err(|e| bad(format!("its blocks cannot be read ({e})")))?;
        Ok((bytes, size, dims))
    }
}

#[cfg(test)]
mod tests {
    use super::Gguf;
    use std::path::Path;

    /// A stored table's rows are the same numbers as those rows of the whole tensor, for
    /// every type the fixtures hold (Q8_0, Q4_K… in tiny-llama.gguf, F32 in the f32 file).
    #[test]
    fn rows_read_alone_equal_the_rows_of_the_whole_tensor() {
        for file in ["tiny-llama.gguf", "tiny-llama-f32.gguf", "tiny-qwen2-f32.gguf"] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/gguf").join(file);
            let g = Gguf::open(&path, file).unwrap();
            for (name, info) in &g.content.tensor_infos {
                let dims = info.shape.dims().to_vec();
                if dims.len() != 2 {
                    continue;
                }
                let whole = g.get(name, &dims).unwrap();
                let (start, len) = (dims[0] / 3, (dims[0] / 2).max(1));
                let rows = g.rows(name, start, len).unwrap().to_vec2::<f32>().unwrap();
                assert_eq!(rows, whole.narrow(0, start, len).unwrap().to_vec2::<f32>().unwrap(), "{file} {name}");
            }
            assert!(g.rows("token_embd.weight", usize::MAX / 2, 2).is_err());
        }
    }
}
