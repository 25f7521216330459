//! Model families: one file per family maps a checkpoint onto the one configurable block
//! (`config::Parts`, run by `model/`), as TransformerLens keeps one weight-conversion file per
//! family. A decoder family ([`Family`]) says what its `config.json` (or GGUF metadata) leaves
//! out, which block options it sets, and what its checkpoint names each tensor; it reads
//! them through [`TensorStore`], so a Hugging Face checkpoint and a GGUF file share it.
//!
//! | file | families | block |
//! |---|---|---|
//! | `bert.rs`, `bert_weights.rs` | `bert` | post-norm encoder, learned positions, token types |
//! | `gpt2.rs` | `gpt2` | pre-norm LayerNorm, learned positions, fused `Conv1D` q/k/v |
//! | `llama.rs` | `llama`, `qwen2`, `mistral`, `qwen3` | pre-norm RMSNorm, rotary, gated FFN, GQA; Qwen3's q/k norms |
//! | `gpt_neox.rs` | `gpt_neox` | parallel (or sequential) LayerNorm block, partial rotary, fused per-head q/k/v |
//! | `phi3.rs` | `phi3` | the Llama block with fused `qkv_proj` and `gate_up_proj`, LongRoPE, partial rotary |
//! | `llama.rs`, `moe.rs` | `mixtral`, `qwen2_moe`, `qwen3_moe` | as Mistral, Qwen2, Qwen3, with a mixture of experts for an FFN |
//! | `t5.rs` | `t5` (v1.0, v1.1, Flan-T5) | encoder–decoder: pre-norm RMS, relative position bias, ReLU or gated GELU, cross-attention |
//! | `bart.rs` | `bart` | encoder–decoder: post-norm LayerNorm, learned positions (offset 2), GELU, cross-attention |
//! | `gemma.rs` | `gemma2`, `gemma3_text` | Llama's, with sandwich norms, (1 + w) norms, GeGLU, √d embeddings, local/global layers, soft-caps (2), q/k norms (3) |
//!
//! `decoder.rs` reads a decoder's `config.json` into [`DecoderConfig`] and builds its
//! [`Params`] from the family's names; `rope.rs` turns `rope_theta`/`rope_scaling` into
//! frequencies. [`DECODERS`] (`registry.rs`) is the registry: `--model` dispatch, the GGUF architectures and
//! the "not supported" messages all read it.

pub mod bart;
pub mod bert;
pub mod bert_weights;
mod blocks;
mod config;
pub mod decoder;
mod gemma;
mod gpt2;
mod gpt_neox;
mod llama;
mod moe;
mod phi3;
mod registry;
pub mod rope;
pub mod seq2seq;
pub mod t5;
mod traits;

pub use blocks::activation_named;
pub use config::DecoderConfig;
pub use registry::{decoder, encoder_decoder, gguf, gguf_archs, model_types, DECODERS, ENCODER_DECODERS};
pub use traits::{Family, GgufKey, GgufKind};
