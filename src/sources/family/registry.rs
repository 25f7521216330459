//! The families by name: the one list that `--model` dispatch, GGUF architectures and the "not
//! supported" messages all read, so they cannot disagree.

use super::traits::Family;
use super::{bart, gemma, gpt2, gpt_neox, llama, phi3, seq2seq, t5};

/// Model families whose checkpoints have BERT's layout and arithmetic.
pub const BERT: &[&str] = &["bert"];

/// The decoder families, in the order messages list them.
pub static DECODERS: &[&dyn Family] = &[
    &gpt2::Gpt2,
    &llama::LLAMA,
    &llama::QWEN2,
    &llama::MISTRAL,
    &llama::QWEN3,
    &gemma::GEMMA2,
    &gemma::GEMMA3,
    &gpt_neox::GptNeoX,
    &phi3::Phi3,
    &llama::MIXTRAL,
    &llama::QWEN2_MOE,
    &llama::QWEN3_MOE,
];

/// The encoder–decoder families.
pub static ENCODER_DECODERS: &[&dyn seq2seq::EncoderDecoder] = &[&t5::T5, &bart::Bart];

/// The encoder–decoder family of `model_type`.
pub fn encoder_decoder(model_type: &str) -> Option<&'static dyn seq2seq::EncoderDecoder> {
    ENCODER_DECODERS.iter().copied().find(|f| f.model_type() == model_type)
}

/// The decoder family of `model_type`.
pub fn decoder(model_type: &str) -> Option<&'static dyn Family> {
    DECODERS.iter().copied().find(|f| f.model_type() == model_type)
}

/// Every `model_type` a Hugging Face folder may name: BERT's, the decoders' and the
/// encoder–decoders'.
pub fn model_types() -> Vec<&'static str> {
    let seq2seq = ENCODER_DECODERS.iter().map(|f| f.model_type());
    BERT.iter().copied().chain(DECODERS.iter().map(|f| f.model_type())).chain(seq2seq).collect()
}

/// The family reading GGUF architecture `arch`, whose metadata says whether it has `experts`
/// (llama.cpp writes Mixtral as `llama` with an `expert_count`).
pub fn gguf(arch: &str, experts: bool) -> Option<&'static dyn Family> {
    let mut of_arch = DECODERS.iter().copied().filter(|f| f.gguf_arch() == Some(arch));
    of_arch.clone().find(|f| f.experts() == experts).or_else(|| of_arch.next())
}

/// Every GGUF architecture a family reads, once each.
pub fn gguf_archs() -> Vec<&'static str> {
    let mut archs: Vec<&str> = Vec::new();
    for a in DECODERS.iter().filter_map(|f| f.gguf_arch()) {
        if !archs.contains(&a) {
            archs.push(a);
        }
    }
    archs
}
