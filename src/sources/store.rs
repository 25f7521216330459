//! One tensor store for every file a decoder family reads: a Hugging Face checkpoint
//! (safetensors, shards, `.bin`: `hf/checkpoint.rs`) and a GGUF file (`gguf_names.rs`, which
//! maps llama.cpp's `blk.N.*` names onto the family's Hugging Face names in one place). A
//! family file (`family/`) names tensors once, as its Hugging Face checkpoint does, and
//! reads them through this trait whatever holds them.

use crate::params::GgmlInput;
use anyhow::Result;
use candle_core::Tensor;

pub trait TensorStore: Send + Sync + std::fmt::Debug {
    /// The model as messages name it (`--model PATH`).
    fn what(&self) -> &str;
    /// Whether the store holds `name`.
    fn has(&self, name: &str) -> bool;
    /// The stored shape of `name` (rows first), without reading it.
    fn shape(&self, name: &str) -> Option<Vec<usize>>;
    /// The tensor `name` as f32, checked to have `shape`.
    fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor>;
    /// Whether the 2-D tensor `name` of shape `shape` can be read a few rows at a time.
    fn has_rows(&self, name: &str, shape: &[usize]) -> bool;
    /// Rows `start .. start + len` of the 2-D tensor `name` as f32: the same numbers as those
    /// rows of [`get`](Self::get)'s.
    fn rows(&self, name: &str, start: usize, len: usize) -> Result<Tensor>;

    /// Whether the tensors are as llama.cpp's converter wrote them (a GGUF file): beyond the
    /// names and Q/K rows that `gguf_names.rs` maps back, it changed some families' values
    /// (Gemma's norm weights hold their `+ 1`), which the family file then reads as they are.
    fn is_gguf(&self) -> bool {
        false
    }

    /// `name` under the first of `prefixes` the store has it under (GPT-2 checkpoints name
    /// their tensors with or without `transformer.`).
    fn prefixed(&self, prefixes: &[&str], name: &str) -> String {
        prefixes.iter().map(|p| format!("{p}{name}")).find(|n| self.has(n)).unwrap_or_else(|| name.to_string())
    }

    /// The `count` experts' matrices named `pattern` with `{e}` for the expert's number
    /// (`model.layers.0.mlp.experts.{e}.up_proj.weight`), each of `shape`, in expert order. A
    /// Hugging Face checkpoint stores one tensor per expert; a GGUF file one 3-D tensor for all.
    fn experts(&self, pattern: &str, count: usize, shape: &[usize]) -> Result<Vec<Tensor>> {
        (0..count).map(|e| self.get(&pattern.replace("{e}", &e.to_string()), shape)).collect()
    }

    /// `--arithmetic ggml`: how llama.cpp takes a product with the matrix `name`; `None` when
    /// it is f32 (or the arithmetic is f32).
    fn ggml_input(&self, _name: &str) -> Result<Option<GgmlInput>> {
        Ok(None)
    }

    /// [`ggml_input`](Self::ggml_input) for each of the `count` experts of [`experts`](Self::experts).
    fn ggml_experts(&self, _pattern: &str, count: usize) -> Result<Vec<Option<GgmlInput>>> {
        Ok(vec![None; count])
    }

    /// `name`'s bias, if the store holds one of `shape`.
    fn bias(&self, name: &str, shape: &[usize]) -> Result<Option<Tensor>> {
        self.has(name).then(|| self.get(name, shape)).transpose()
    }
}

impl TensorStore for super::hf::checkpoint::Checkpoint {
    fn what(&self) -> &str {
        self.what()
    }
    fn has(&self, name: &str) -> bool {
        self.has(name)
    }
    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        self.shape(name)
    }
    fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        self.get(name, shape)
    }
    fn has_rows(&self, name: &str, shape: &[usize]) -> bool {
        self.has_rows(name, shape)
    }
    fn rows(&self, name: &str, start: usize, len: usize) -> Result<Tensor> {
        self.rows(name, start, len)
    }
}
