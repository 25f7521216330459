//! What every family file reads alike: a norm and a linear layer by their checkpoint names,
//! and an activation by its config.json name. A leaf: it imports no family file.

use crate::params::{LayerNorm, Linear};
use crate::sources::store::TensorStore;
use anyhow::Result;

/// The activation a Hugging Face config names (transformers' `ACT2FN` keys that attn-trace
/// computes): decoders' `hidden_act`, BART's `activation_function`, T5's `feed_forward_proj`.
pub fn activation_named(name: &str) -> Option<crate::config::Activation> {
    use crate::config::Activation;
    match name {
        "silu" | "swish" => Some(Activation::Silu),
        "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Some(Activation::GeluTanh),
        "gelu" => Some(Activation::Gelu),
        "relu" => Some(Activation::Relu),
        _ => None,
    }
}

/// A norm's weight (and bias) under `prefix`, `d` wide.
pub(super) fn norm(store: &dyn TensorStore, prefix: &str, d: usize, bias: bool) -> Result<LayerNorm> {
    Ok(LayerNorm {
        weight: store.get(&format!("{prefix}.weight"), &[d])?,
        bias: if bias { Some(store.get(&format!("{prefix}.bias"), &[d])?) } else { None },
    })
}

/// The linear `{prefix}.weight` ([d_out, d_in]), with `{prefix}.bias` where the store holds
/// one (Llama-style checkpoints bias q/k/v, or everything, or nothing, by config).
pub(super) fn linear(store: &dyn TensorStore, prefix: &str, (d_in, d_out): (usize, usize)) -> Result<Linear> {
    let name = format!("{prefix}.weight");
    let weight = store.get(&name, &[d_out, d_in])?;
    Ok(Linear {
        weight,
        bias: store.bias(&format!("{prefix}.bias"), &[d_out])?,
        ggml: store.ggml_input(&name)?.map(std::sync::Arc::new),
    })
}
