//! How a GGUF file reads under Hugging Face names (`gguf::GgufStore`, a
//! [`TensorStore`](super::store::TensorStore)): llama.cpp's converter renames
//! every tensor (`model.layers.3.self_attn.q_proj.weight` is `blk.3.attn_q.weight`) and, for
//! the architectures whose family says so, permutes the rows of each Q and K weight for its
//! rotary kernel (pairs (2i, 2i+1) instead of Hugging Face's (i, i + d/2)). Both are undone
//! here, in one place, as transformers' GGUF loader does (`TENSOR_PROCESSORS`,
//! `reverse_permute_weights`), so a family file reads a GGUF file by the same names as its
//! checkpoint and the trace shows Hugging Face's layout. So is the converter's reordering of
//! GPT-NeoX's fused `query_key_value` from per-head `[q_h | k_h | v_h]` into `[q | k | v]`
//! ([`per_head_qkv`]). Messages name the file's own names.

use anyhow::Result;
use candle_core::Tensor;

/// Hugging Face's names (after `model.layers.{i}.`) and llama.cpp's (after `blk.{i}.`), as in
/// gguf-py's `TENSOR_MAPPING`. A family that adds a tensor adds its row here.
const LAYER: &[(&str, &str)] = &[
    ("input_layernorm", "attn_norm"),
    ("post_attention_layernorm", "ffn_norm"),
    ("self_attn.q_proj", "attn_q"),
    ("self_attn.k_proj", "attn_k"),
    ("self_attn.v_proj", "attn_v"),
    ("self_attn.o_proj", "attn_output"),
    ("self_attn.q_norm", "attn_q_norm"),
    ("self_attn.k_norm", "attn_k_norm"),
    ("mlp.gate_proj", "ffn_gate"),
    ("mlp.up_proj", "ffn_up"),
    ("mlp.down_proj", "ffn_down"),
    // Phi-3: fused q/k/v and gate/up, stored as the checkpoint stores them.
    ("self_attn.qkv_proj", "attn_qkv"),
    ("mlp.gate_up_proj", "ffn_up"),
    // GPT-NeoX (`gpt_neox.layers.{i}.`); its query_key_value is reordered (`per_head_qkv`).
    ("attention.query_key_value", "attn_qkv"),
    ("attention.dense", "attn_output"),
    ("mlp.dense_h_to_4h", "ffn_up"),
    ("mlp.dense_4h_to_h", "ffn_down"),
    // Mixtures of experts: the router, Qwen2-MoE's shared expert and its gate.
    ("block_sparse_moe.gate", "ffn_gate_inp"),
    ("mlp.gate", "ffn_gate_inp"),
    ("mlp.shared_expert_gate", "ffn_gate_inp_shexp"),
    ("mlp.shared_expert.gate_proj", "ffn_gate_shexp"),
    ("mlp.shared_expert.up_proj", "ffn_up_shexp"),
    ("mlp.shared_expert.down_proj", "ffn_down_shexp"),
];

/// Each expert's projections (after `model.layers.{i}.` and before `.weight`, `{e}` the
/// expert) and the 3-D tensor llama.cpp stacks them into (`blk.{i}.…`).
const EXPERTS: &[(&str, &str)] = &[
    ("block_sparse_moe.experts.{e}.w1", "ffn_gate_exps"),
    ("block_sparse_moe.experts.{e}.w3", "ffn_up_exps"),
    ("block_sparse_moe.experts.{e}.w2", "ffn_down_exps"),
    ("mlp.experts.{e}.gate_proj", "ffn_gate_exps"),
    ("mlp.experts.{e}.up_proj", "ffn_up_exps"),
    ("mlp.experts.{e}.down_proj", "ffn_down_exps"),
];

/// The prefixes of layer `i`'s Hugging Face names (Llama-like, GPT-NeoX).
const LAYER_PREFIXES: &[&str] = &["model.layers.", "gpt_neox.layers."];

/// Gemma 2 and 3's norms, which llama.cpp names by place: the norm after the attention is
/// `post_attention_norm` (Hugging Face calls it `post_attention_layernorm`, the name Llama gives
/// the norm before its FFN, which llama.cpp calls `ffn_norm`), the norm before the FFN is
/// `ffn_norm` and the one after it `post_ffw_norm`. A family with these norms reads through
/// these rows before [`LAYER`]'s (`Family::gguf_layer_names`).
pub const SANDWICH: &[(&str, &str)] = &[
    ("post_attention_layernorm", "post_attention_norm"),
    ("pre_feedforward_layernorm", "ffn_norm"),
    ("post_feedforward_layernorm", "post_ffw_norm"),
];

/// The model's tensors outside the layers.
const GLOBAL: &[(&str, &str)] = &[
    ("model.embed_tokens", "token_embd"),
    ("model.norm", "output_norm"),
    ("lm_head", "output"),
    ("gpt_neox.embed_in", "token_embd"),
    ("gpt_neox.final_layer_norm", "output_norm"),
    ("embed_out", "output"),
];

/// The GGUF name of the Hugging Face tensor `name` (`….weight` or `….bias`); `None` for a
/// name llama.cpp does not store.
pub fn gguf_name(name: &str) -> Option<String> {
    gguf_name_in(name, &[])
}

/// [`gguf_name`], with a family's rows (`first`, such as [`SANDWICH`]) read before [`LAYER`]'s.
pub fn gguf_name_in(name: &str, first: &[(&str, &str)]) -> Option<String> {
    let (module, suffix) = name.rsplit_once('.')?;
    if let Some((_, g)) = GLOBAL.iter().find(|(hf, _)| *hf == module) {
        return Some(format!("{g}.{suffix}"));
    }
    let rest = LAYER_PREFIXES.iter().find_map(|p| module.strip_prefix(p))?;
    let (i, part) = rest.split_once('.')?;
    let (_, g) = first.iter().chain(LAYER).find(|(hf, _)| *hf == part)?;
    Some(format!("blk.{i}.{g}.{suffix}"))
}

/// The GGUF name of the 3-D tensor that holds every expert of the Hugging Face pattern
/// `model.layers.{i}.…experts.{e}.….weight`; `None` for another name.
pub fn gguf_experts_name(pattern: &str) -> Option<String> {
    let rest = pattern.strip_prefix("model.layers.")?.strip_suffix(".weight")?;
    let (i, part) = rest.split_once('.')?;
    let (_, g) = EXPERTS.iter().find(|(hf, _)| *hf == part)?;
    Some(format!("blk.{i}.{g}.weight"))
}

/// Undoes llama.cpp's row permutation of a Q or K weight (or bias) with `heads` heads:
/// transformers' `reverse_permute_weights`: rows viewed as [heads, d/2, 2] become [heads, 2, d/2].
pub fn unpermute(t: &Tensor, heads: usize) -> Result<Tensor> {
    let dims = t.dims().to_vec();
    let rows = dims[0];
    let half = rows / heads / 2;
    let rest: usize = dims[1..].iter().product();
    let t = t.reshape((heads, half, 2, rest))?.transpose(1, 2)?.contiguous()?;
    Ok(t.reshape(dims)?)
}

/// Whether `name` is GPT-NeoX's fused q/k/v (weight or bias), which llama.cpp's converter
/// stores as `[q | k | v]` blocks where the checkpoint interleaves them per head.
pub fn is_per_head_qkv(name: &str) -> bool {
    name.starts_with("gpt_neox.layers.")
        && name.rsplit_once('.').is_some_and(|(m, _)| m.ends_with(".attention.query_key_value"))
}

/// Undoes the converter's reordering of GPT-NeoX's `query_key_value` (`GPTNeoXModel.modify_tensors`):
/// rows viewed as [3, heads, d_head] (q, k and v blocks) become [heads, 3, d_head], each head's
/// q, k and v side by side, as transformers views its output.
pub fn per_head_qkv(t: &Tensor, heads: usize) -> Result<Tensor> {
    let dims = t.dims().to_vec();
    let rest: usize = dims[1..].iter().product();
    let t = t.reshape((3, heads, dims[0] / 3 / heads, rest))?.transpose(0, 1)?.contiguous()?;
    Ok(t.reshape(dims)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn unpermute_turns_interleaved_pairs_into_halves() {
        // One head of width 4: llama.cpp's rows are [r0, r2, r1, r3] (pairs (0,2),(1,3) side
        // by side); Hugging Face's are [r0, r1, r2, r3].
        let t = Tensor::new(&[[0f32], [2.0], [1.0], [3.0]], &Device::Cpu).unwrap();
        let u = unpermute(&t, 1).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(u, vec![0.0, 1.0, 2.0, 3.0]);
    }

    #[test]
    fn names_map_onto_llama_cpp_names() {
        assert_eq!(gguf_name("model.layers.12.self_attn.q_proj.bias").as_deref(), Some("blk.12.attn_q.bias"));
        assert_eq!(gguf_name("model.layers.0.mlp.down_proj.weight").as_deref(), Some("blk.0.ffn_down.weight"));
        assert_eq!(gguf_name("model.embed_tokens.weight").as_deref(), Some("token_embd.weight"));
        assert_eq!(gguf_name("lm_head.weight").as_deref(), Some("output.weight"));
        assert_eq!(gguf_name("model.layers.0.mlp.experts.weight"), None);
        assert_eq!(gguf_name("gpt_neox.layers.1.attention.dense.bias").as_deref(), Some("blk.1.attn_output.bias"));
        assert_eq!(gguf_name("embed_out.weight").as_deref(), Some("output.weight"));
        assert_eq!(gguf_name("model.layers.0.self_attn.qkv_proj.weight").as_deref(), Some("blk.0.attn_qkv.weight"));
        // Gemma's sandwich: Hugging Face's post-attention norm is not llama.cpp's ffn_norm.
        let gemma = |n: &str| gguf_name_in(n, SANDWICH);
        assert_eq!(
            gemma("model.layers.3.post_attention_layernorm.weight").as_deref(),
            Some("blk.3.post_attention_norm.weight")
        );
        assert_eq!(gemma("model.layers.3.pre_feedforward_layernorm.weight").as_deref(), Some("blk.3.ffn_norm.weight"));
        assert_eq!(
            gemma("model.layers.3.post_feedforward_layernorm.weight").as_deref(),
            Some("blk.3.post_ffw_norm.weight")
        );
        assert_eq!(gemma("model.layers.3.input_layernorm.weight").as_deref(), Some("blk.3.attn_norm.weight"));
    }

    #[test]
    fn per_head_qkv_interleaves_the_blocks_again() {
        // Two heads of width 1: the file's rows [q0, q1, k0, k1, v0, v1] become
        // [q0, k0, v0, q1, k1, v1].
        let t = Tensor::new(&[0f32, 1.0, 10.0, 11.0, 20.0, 21.0], &Device::Cpu).unwrap();
        let u = per_head_qkv(&t, 2).unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(u, vec![0.0, 10.0, 20.0, 1.0, 11.0, 21.0]);
        assert!(is_per_head_qkv("gpt_neox.layers.3.attention.query_key_value.bias"));
        assert!(!is_per_head_qkv("model.layers.3.self_attn.qkv_proj.weight"));
    }

    #[test]
    fn expert_names_map_onto_llama_cpp_names() {
        assert_eq!(gguf_name("model.layers.3.mlp.gate.weight").as_deref(), Some("blk.3.ffn_gate_inp.weight"));
        let w1 = gguf_experts_name("model.layers.2.block_sparse_moe.experts.{e}.w1.weight");
        assert_eq!(w1.as_deref(), Some("blk.2.ffn_gate_exps.weight"));
        assert_eq!(gguf_experts_name("model.layers.2.mlp.gate.weight"), None);
    }
}
