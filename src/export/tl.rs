//! `--save-trace FILE --names transformer-lens`: the trace under TransformerLens's hook names
//! and in its layouts, so that a `HookedTransformer` cache (`run_with_cache`) and an
//! attn-trace trace can be compared key by key with numpy alone.
//!
//! The names are the step catalogue's (`trace/steps.rs`, `transformer_lens`, the first name
//! of each step; inside `blocks.{i}.` for layer steps). TransformerLens caches are
//! batch-first, so every tensor gains a leading batch dimension of 1, and it stores q, k, v
//! (and the rotated q, k) and z as `[batch, pos, head, d_head]`, where attn-trace has
//! `[head, pos, d_head]`. Its mixture of experts flattens the batch into the positions before
//! routing, so `mlp.hook_expert_weights` (`ffn.router.probs`) and `mlp.hook_expert_indices`
//! (`ffn.router.chosen`, int64) are `[batch·pos, …]`, written without a batch dimension.
//! Steps TransformerLens has no hook for (`tokens`, `token_ids`,
//! `embed.sum`, `attn.raw_scores`, `attn.mask`, `attn.concat`, `output`, …) are left out;
//! the token strings stay in the file's metadata. `attn-trace diff` reads such a file back
//! (diff/names.rs maps the names, diff/load.rs undoes the layouts).

use crate::config::Parts;
use crate::trace::{Step, Values};

/// In-layer steps TransformerLens stores position-first: `[batch, pos, head, d_head]`.
pub const POSITION_FIRST: [&str; 8] =
    ["attn.q", "attn.k", "attn.v", "attn.q_norm", "attn.k_norm", "attn.q_rot", "attn.k_rot", "attn.context"];

/// In-layer steps TransformerLens records on `[batch·pos, …]` rows: no batch dimension.
pub const BATCH_FLATTENED: [&str; 2] = ["ffn.router.probs", "ffn.router.chosen"];

/// The steps that have a TransformerLens hook, renamed and laid out as TransformerLens's cache
/// of a model with these `parts`.
pub fn steps(steps: &[Step], parts: &Parts) -> Vec<Step> {
    steps.iter().filter_map(|s| one(s, hook(&s.name, parts)?)).collect()
}

/// TransformerLens's hook for step `name` (the catalogue's table, with its Gemma exceptions).
fn hook(name: &str, parts: &Parts) -> Option<&'static str> {
    crate::trace::steps::transformer_lens_hook(name, parts)
}

fn one(step: &Step, hook: &str) -> Option<Step> {
    let id = match step.layer {
        Some(l) => format!("blocks.{l}.{hook}"),
        None => hook.to_string(),
    };
    let (mut shape, mut values, mut dims) = (step.shape.clone(), step.values.clone(), step.dims.clone());
    if POSITION_FIRST.contains(&step.name.as_str()) && shape.len() == 3 {
        let (h, p, d) = (shape[0], shape[1], shape[2]);
        if let Values::F32(v) = &step.values {
            // out[p][h][i] = in[h][p][i]
            let order = (0..p).flat_map(|pi| (0..h).flat_map(move |hi| (0..d).map(move |i| (hi * p + pi) * d + i)));
            values = Values::F32(order.map(|k| v[k]).collect());
        }
        shape = vec![p, h, d];
        dims.swap(0, 1);
    }
    if !BATCH_FLATTENED.contains(&step.name.as_str()) {
        shape.insert(0, 1);
        dims.insert(0, "batch");
    }
    Some(Step { id, layer: step.layer, name: hook.to_string(), dims, shape, heads: step.heads.clone(), values })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q_becomes_batch_pos_head_d() {
        // [head 2, pos 3, d 1] = [[0, 1, 2], [10, 11, 12]] → [1, pos 3, head 2, d 1].
        let q = Step {
            id: "layers.1.attn.q".into(),
            layer: Some(1),
            name: "attn.q".into(),
            dims: vec!["head", "pos", "d_head"],
            shape: vec![2, 3, 1],
            heads: None,
            values: Values::F32(vec![0., 1., 2., 10., 11., 12.]),
        };
        let mask = Step { id: "layers.1.attn.mask".into(), name: "attn.mask".into(), ..q.clone() };
        let out = steps(&[q, mask], &Parts::default());
        assert_eq!(out.len(), 1, "the mask has no hook");
        assert_eq!(out[0].id, "blocks.1.attn.hook_q");
        assert_eq!(out[0].shape, vec![1, 3, 2, 1]);
        assert_eq!(out[0].dims, vec!["batch", "pos", "head", "d_head"]);
        assert_eq!(out[0].values, Values::F32(vec![0., 10., 1., 11., 2., 12.]));
    }

    #[test]
    fn the_chosen_experts_keep_their_integers_and_have_no_batch_dimension() {
        let chosen = Step {
            id: "layers.0.ffn.router.chosen".into(),
            layer: Some(0),
            name: "ffn.router.chosen".into(),
            dims: vec!["pos", "rank"],
            shape: vec![3, 2],
            heads: None,
            values: Values::Int(vec![1, 0, 2, 3, 0, 1]),
        };
        let out = steps(std::slice::from_ref(&chosen), &Parts::default());
        assert_eq!(out[0].id, "blocks.0.mlp.hook_expert_indices");
        assert_eq!((&out[0].shape, &out[0].values), (&vec![3, 2], &chosen.values));
    }

    /// TransformerLens's Gemma: hook_embed after the √d scale, hook_attn_out and hook_mlp_out
    /// after the sandwich norms; the steps before them have no hook.
    #[test]
    fn gemma_hooks_follow_transformer_lens_block() {
        let gemma = Parts { embed_scale: Some(8.0), sandwich_norms: true, ..Default::default() };
        let plain = Parts::default();
        assert_eq!((hook("embed.out", &gemma), hook("embed.token", &gemma)), (Some("hook_embed"), None));
        assert_eq!((hook("norm1_post.out", &gemma), hook("attn.out", &gemma)), (Some("hook_attn_out"), None));
        assert_eq!((hook("norm2_post.out", &gemma), hook("ffn.out", &gemma)), (Some("hook_mlp_out"), None));
        assert_eq!(
            (hook("embed.token", &plain), hook("attn.out", &plain)),
            (Some("hook_embed"), Some("hook_attn_out"))
        );
        assert_eq!(hook("attn.scores", &gemma), Some("attn.hook_attn_scores"));
    }
}
