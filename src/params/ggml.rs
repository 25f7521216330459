//! What `--arithmetic ggml` needs of a weight beside its f32 values: the form llama.cpp
//! converts a product's input to for the weight's type, and the stored blocks its kernels
//! multiply (`model/ggml/`). The sources attach them (`TensorStore::ggml_input`).

use candle_core::Tensor;

/// How llama.cpp's CPU backend takes a product with one stored weight: the form it converts
/// the input to, and what the rounding of that form needs from the weight's blocks.
#[derive(Debug, Clone)]
pub struct GgmlInput {
    pub form: InputForm,
    /// Q4_1 and Q5_1 weights, `[out, in / 32]`: each block's offset `m`. llama.cpp multiplies
    /// it by the input block's sum as Q8_1 stores it (`s`, rounded to f16), not by the sum
    /// of the rounded inputs; `model/ggml.rs` adds the difference.
    pub mins: Option<Tensor>,
    /// Q4_1 and Q8_0 weights: the stored blocks, for the product llama.cpp's kernel takes
    /// (`model/ggml/blocks.rs`), bit for bit; other types are computed as `Σ w · x'`.
    pub blocks: Option<GgmlBlocks>,
    /// Q4_K and Q6_K weights: the stored super-blocks (`model/ggml/kquants.rs`).
    pub kblocks: Option<GgmlKBlocks>,
}

/// A Q4_K or Q6_K matrix as its file stores it, unpacked: per row `per_row` super-blocks of
/// 256, each with its scale `d` (and Q4_K's `dmin`), its sub-block scales `sc` (Q4_K: 8 of
/// 6 bits; Q6_K: 16 signed bytes) and Q4_K's sub-block mins (8), and its 256 integers (Q4_K's
/// 0..15, Q6_K's −32..31), rows `start .. start + rows` of the shared arrays.
#[derive(Debug, Clone)]
pub struct GgmlKBlocks {
    pub q6_k: bool,
    pub per_row: usize,
    pub d: std::sync::Arc<[f32]>,
    pub dmin: std::sync::Arc<[f32]>,
    pub sc: std::sync::Arc<[i16]>,
    pub mins: std::sync::Arc<[i16]>,
    pub q: std::sync::Arc<[i8]>,
    pub start: usize,
    pub rows: usize,
}

/// A Q4_1 or Q8_0 matrix as its file stores it, unpacked: per row `per_row` blocks of 32, each
/// with its scale `d` (and Q4_1's offset `m`) in f32 and its 32 integers (Q4_1's 0..15 or
/// Q8_0's −127..127), rows `start .. start + rows` of the shared arrays.
#[derive(Debug, Clone)]
pub struct GgmlBlocks {
    pub q4_1: bool,
    pub per_row: usize,
    pub d: std::sync::Arc<[f32]>,
    pub m: std::sync::Arc<[f32]>,
    pub q: std::sync::Arc<[i8]>,
    pub start: usize,
    pub rows: usize,
}

/// What llama.cpp's CPU backend converts a matrix product's input to for a weight of a given
/// type (ggml's `vec_dot_type`): the activations are quantized, or rounded to 16 bits, and the
/// product is taken with the weight's stored blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputForm {
    /// Rounded to f16 (F16 weights).
    F16,
    /// Rounded to bf16 (BF16 weights).
    Bf16,
    /// Blocks of 32, a scale each (Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 weights).
    Q8_0,
    /// Blocks of 32, a scale and the block's scaled sum each (Q4_1, Q5_1 weights).
    Q8_1,
    /// Blocks of 256, an f32 scale each (the k-quants and i-quants).
    Q8K,
}

impl GgmlInput {
    /// The form for rows `start .. start + len` of the weight.
    pub fn rows(&self, start: usize, len: usize) -> candle_core::Result<GgmlInput> {
        let mins = self.mins.as_ref().map(|m| m.narrow(0, start, len)).transpose()?;
        let blocks = self.blocks.clone().map(|b| GgmlBlocks { start: b.start + start, rows: len, ..b });
        let kblocks = self.kblocks.clone().map(|b| GgmlKBlocks { start: b.start + start, rows: len, ..b });
        Ok(GgmlInput { form: self.form, mins, blocks, kblocks })
    }
}

impl InputForm {
    /// The form llama.cpp uses for a weight stored as `dtype`; `None` for f32 weights.
    pub fn of(dtype: candle_core::quantized::GgmlDType) -> Option<InputForm> {
        use candle_core::quantized::GgmlDType as T;
        match dtype {
            T::F32 => None,
            T::F16 => Some(InputForm::F16),
            T::BF16 => Some(InputForm::Bf16),
            T::Q4_0 | T::Q5_0 | T::Q8_0 => Some(InputForm::Q8_0),
            T::Q4_1 | T::Q5_1 | T::Q8_1 => Some(InputForm::Q8_1),
            T::Q2K | T::Q3K | T::Q4K | T::Q5K | T::Q6K | T::Q8K => Some(InputForm::Q8K),
        }
    }
}
