//! The step catalogue: every step's name, dims, TransformerLens names and meaning, and the
//! aliases `--steps` accepts.
//!
//! Canonical ids are API (docs/TRACE.md, the step table of docs/OUTPUT.md); aliases are only ever input.

pub use super::ids::{layer_id, parse_layer_id, stack_layer_id, Stack};
use super::Dim;
use crate::config::ModelConfig;

/// One step of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepDef {
    /// The canonical name: the full id for steps outside layers, the in-layer name (after
    /// `layers.{i}.`) for the others.
    pub name: &'static str,
    /// Whether the step belongs to a layer (`layers.{i}.name`).
    pub in_layer: bool,
    /// Dimension names, from TRACE.md's vocabulary. `d_k` and `d_v` read `d_head` in a trace
    /// whose query/key and value widths are equal ([`dims`]).
    pub dims: &'static [Dim],
    /// TransformerLens hook names for the same tensor (inside `blocks.{i}.` for layer steps).
    pub transformer_lens: &'static [&'static str],
    /// What the tensor is, in one line (the step table of docs/OUTPUT.md says the same).
    pub meaning: &'static str,
    /// Recorded only when `--steps` names it (its size is the vocabulary's).
    pub on_request: bool,
}

const fn global(
    name: &'static str,
    dims: &'static [Dim],
    tl: &'static [&'static str],
    meaning: &'static str,
) -> StepDef {
    StepDef { name, in_layer: false, dims, transformer_lens: tl, meaning, on_request: false }
}

const fn layer(
    name: &'static str,
    dims: &'static [Dim],
    tl: &'static [&'static str],
    meaning: &'static str,
) -> StepDef {
    StepDef { name, in_layer: true, dims, transformer_lens: tl, meaning, on_request: false }
}

const POS: &[Dim] = &["pos"];
const ROWS: &[Dim] = &["pos", "d_model"];
const QK: &[Dim] = &["head", "pos", "d_k"];
const VS: &[Dim] = &["head", "pos", "d_v"];
const MAP: &[Dim] = &["head", "query_pos", "key_pos"];
const FF: &[Dim] = &["pos", "d_ff"];
const EXPERTS: &[Dim] = &["pos", "expert"];
const RANKS: &[Dim] = &["pos", "rank"];
const CROSS_K: &[Dim] = &["head", "key_pos", "d_k"];
const CROSS_V: &[Dim] = &["head", "key_pos", "d_v"];

/// Every step, in trace order: the embeddings, one layer's steps (repeated per layer), then
/// `output`. The one list of step names: the model records by these names (with these dims),
/// `--steps` and `attn-trace diff` read them, and tests hold the JSON Schema and docs/OUTPUT.md's
/// step table to them. Which steps a run has depends on the model (pre-norm has `norm1.out`
/// and `norm2.out`, post-norm `add_norm1.out` and `add_norm2.out`; `attn.mask` exists with a
/// mask).
pub const CATALOGUE: &[StepDef] = &[
    global("tokens", POS, &[], "token strings"),
    global("token_ids", POS, &[], "vocabulary ids"),
    global("embed.token", ROWS, &["hook_embed", "embed.hook_embed"], "token-embedding rows"),
    global(
        "embed.token_scaled",
        ROWS,
        &[],
        "token rows × embed_scale, before positions are added (BART's scale_embedding)",
    ),
    global(
        "embed.position",
        ROWS,
        &["hook_pos_embed", "embed.hook_pos_embed"],
        "positional rows, learned or sinusoidal",
    ),
    global("embed.token_type", ROWS, &["hook_token_type_embed", "embed.hook_token_type_embed"], "segment rows (BERT)"),
    global("embed.sum", ROWS, &[], "token + position (+ token type)"),
    global("embed.out", ROWS, &["hook_full_embed"], "the first layer's input (BERT: LayerNorm of the sum)"),
    global(
        "position_bias",
        MAP,
        &[],
        "T5: the relative position bias added to every layer's scores (the first layer's table)",
    ),
    layer("norm1.out", ROWS, &[], "pre-norm: the norm of the layer input"),
    layer("attn.q", QK, &["attn.hook_q"], "x·W_Qᵀ (+ b), split into heads"),
    layer("attn.k", QK, &["attn.hook_k"], "x·W_Kᵀ (+ b), split into heads"),
    layer("attn.v", VS, &["attn.hook_v"], "x·W_Vᵀ (+ b), split into heads"),
    layer("attn.q_norm", QK, &["attn.hook_q_normed"], "q's RMSNorm per head, before rotary (Qwen3, Gemma 3)"),
    layer("attn.k_norm", QK, &["attn.hook_k_normed"], "k's RMSNorm per head, before rotary (Qwen3, Gemma 3)"),
    layer("attn.q_rot", QK, &["attn.hook_rot_q"], "rotary positions: q after the rotation (partial: its first dims)"),
    layer("attn.k_rot", QK, &["attn.hook_rot_k"], "rotary positions: k after the rotation (partial: its first dims)"),
    layer("attn.raw_scores", MAP, &[], "q·kᵀ, before scaling"),
    layer("attn.mask", &["query_pos", "key_pos"], &[], "true where the key is hidden"),
    layer(
        "attn.scores_uncapped",
        MAP,
        &[],
        "soft-capped models (Gemma 2): raw_scores × scale, −inf where masked, before the cap",
    ),
    layer(
        "attn.scores",
        MAP,
        &["attn.hook_attn_scores"],
        "raw_scores × scale (soft-capped if the model caps), −inf where masked",
    ),
    layer("attn.weights", MAP, &["attn.hook_pattern"], "softmax over key_pos; rows sum to 1"),
    layer("attn.context", VS, &["attn.hook_z"], "weights · v"),
    layer("attn.concat", &["pos", "heads·d_v"], &[], "heads side by side"),
    layer("attn.out", ROWS, &["hook_attn_out"], "concat·W_Oᵀ (+ b_O)"),
    layer("norm1_post.out", ROWS, &[], "sandwich norms (Gemma): the norm of attn.out, before the residual sum"),
    layer("add_norm1.sum", ROWS, &["hook_resid_mid"], "layer input + attn.out (norm1_post.out with sandwich norms)"),
    layer("add_norm1.out", ROWS, &["hook_normalized_resid_mid"], "post-norm: the norm of add_norm1.sum"),
    // An encoder–decoder's decoder layers attend to the encoder's output after their own tokens.
    layer("norm_cross.out", ROWS, &[], "pre-norm: the norm of add_norm1.sum, the cross-attention's input"),
    layer("cross_attn.q", QK, &[], "cross-attention: the decoder's x·W_Qᵀ (+ b), split into heads"),
    layer("cross_attn.k", CROSS_K, &[], "cross-attention: the encoder output·W_Kᵀ (+ b), split into heads"),
    layer("cross_attn.v", CROSS_V, &[], "cross-attention: the encoder output·W_Vᵀ (+ b), split into heads"),
    layer("cross_attn.raw_scores", MAP, &[], "cross-attention: q·kᵀ, before scaling (decoder pos × encoder pos)"),
    layer("cross_attn.scores", MAP, &[], "cross-attention: raw_scores × scale, −inf where masked"),
    layer("cross_attn.weights", MAP, &[], "cross-attention: softmax over the encoder's positions"),
    layer("cross_attn.context", VS, &[], "cross-attention: weights · v"),
    layer("cross_attn.concat", &["pos", "heads·d_v"], &[], "cross-attention: heads side by side"),
    layer("cross_attn.out", ROWS, &[], "cross-attention: concat·W_Oᵀ (+ b_O)"),
    layer("add_norm_cross.sum", ROWS, &[], "the self-attention's sum (post-norm: its norm) + cross_attn.out"),
    layer("add_norm_cross.out", ROWS, &[], "post-norm: the norm of add_norm_cross.sum"),
    layer("norm2.out", ROWS, &[], "pre-norm: the norm of add_norm1.sum (parallel: of the layer input)"),
    layer("ffn.hidden", FF, &["mlp.hook_pre"], "x·W1ᵀ + b1"),
    // TransformerLens calls the gate's output `mlp.hook_pre` too; diff maps that name to
    // ffn.hidden, so the two never clash in one file.
    layer("ffn.gate", FF, &[], "gated FFN: x·W_gateᵀ"),
    layer("ffn.up", FF, &["mlp.hook_pre_linear"], "gated FFN: x·W_upᵀ"),
    layer("ffn.act", FF, &["mlp.hook_post"], "act(hidden), or act(gate) ⊙ up when gated"),
    // A mixture of experts (config.experts) has these in place of ffn.hidden … ffn.act.
    layer("ffn.router.logits", EXPERTS, &[], "mixture of experts: x·W_routerᵀ, −inf for an ablated expert"),
    layer("ffn.router.probs", EXPERTS, &["mlp.hook_expert_weights"], "softmax of the router logits over experts"),
    layer("ffn.router.chosen", RANKS, &["mlp.hook_expert_indices"], "the top-k experts, most probable first"),
    layer("ffn.router.weights", RANKS, &[], "their probabilities, divided by their sum if norm_topk_prob"),
    layer("ffn.experts.out", &["pos", "rank", "d_model"], &[], "each chosen expert's FFN output, unweighted"),
    layer("ffn.experts.mixed", ROWS, &[], "Σ weights·experts.out in expert order (ffn.out without a shared expert)"),
    layer("ffn.shared.out", ROWS, &[], "the shared expert's FFN output (Qwen2-MoE)"),
    layer("ffn.shared.gate", &["pos", "1"], &[], "sigmoid(x·w_gateᵀ): the shared expert's share"),
    layer("ffn.out", ROWS, &["hook_mlp_out"], "act·W2ᵀ + b2"),
    layer("norm2_post.out", ROWS, &[], "sandwich norms (Gemma): the norm of ffn.out, before the residual sum"),
    layer(
        "add_norm2.sum",
        ROWS,
        &["hook_resid_post"],
        "the second residual sum (parallel: input + attn.out + ffn.out)",
    ),
    layer("add_norm2.out", ROWS, &["hook_normalized_resid_post"], "post-norm: the norm of add_norm2.sum"),
    global("final_norm.out", ROWS, &["ln_final.hook_normalized"], "the norm after the last layer (decoders)"),
    global("output", ROWS, &[], "the last hidden state (after the final norm if any)"),
    StepDef {
        name: "logits_uncapped",
        in_layer: false,
        dims: &["pos", "vocab"],
        transformer_lens: &[],
        meaning: "soft-capped models (Gemma 2): output·W_Uᵀ before the cap (recorded when named)",
        on_request: true,
    },
    StepDef {
        name: "logits",
        in_layer: false,
        dims: &["pos", "vocab"],
        transformer_lens: &[],
        meaning: "output·W_Uᵀ: next-token scores (recorded when named)",
        on_request: true,
    },
    // `--attribute` (direct logit attribution) records these two after the head.
    global(
        "attribution.heads",
        &["layer", "head"],
        &[],
        "--attribute: each head's direct share of the logit (difference)",
    ),
    global(
        "attribution.sources",
        &["layer", "head", "key_pos"],
        &[],
        "--attribute: each head's share by the key it read",
    ),
];

/// The catalogue entry of a canonical name (`attn.q`, `embed.sum`).
pub fn def(name: &str) -> Option<&'static StepDef> {
    CATALOGUE.iter().find(|d| d.name == name)
}

/// TransformerLens's hook for step `name` in a model with these `parts`: the catalogue's first,
/// except where its Gemma block puts the hook elsewhere. It folds √d_model into `W_E`, so its
/// `hook_embed` is attn-trace's `embed.out` (the raw rows have no hook), and it applies
/// `ln1_post`/`ln2_post` before `hook_attn_out`/`hook_mlp_out`, which are then
/// `norm1_post.out`/`norm2_post.out`. The one table `--names transformer-lens` writes by
/// (`export/tl.rs`) and `--steps` reads back (`aliases.rs`).
pub fn transformer_lens_hook(name: &str, parts: &crate::config::Parts) -> Option<&'static str> {
    match (name, parts.embed_scale.is_some(), parts.sandwich_norms) {
        ("embed.out", true, _) => Some("hook_embed"),
        ("embed.token", true, _) => None,
        ("norm1_post.out", _, true) => Some("hook_attn_out"),
        ("norm2_post.out", _, true) => Some("hook_mlp_out"),
        ("attn.out" | "ffn.out", _, true) => None,
        _ => def(name)?.transformer_lens.first().copied(),
    }
}

/// Names of steps outside any layer, in trace order.
pub fn global_names() -> impl Iterator<Item = &'static str> {
    CATALOGUE.iter().filter(|d| !d.in_layer).map(|d| d.name)
}

/// Names of steps inside `layers.{i}`, in trace order.
pub fn layer_names() -> impl Iterator<Item = &'static str> {
    CATALOGUE.iter().filter(|d| d.in_layer).map(|d| d.name)
}

pub(super) fn is_global(name: &str) -> bool {
    CATALOGUE.iter().any(|d| !d.in_layer && d.name == name)
}

pub(super) fn is_layer(name: &str) -> bool {
    CATALOGUE.iter().any(|d| d.in_layer && d.name == name)
}

/// A step's dims in a trace of `cfg`: the catalogue's, with `d_k` and `d_v` both written
/// `d_head` when they are equal (the usual case: TRACE.md's vocabulary).
/// With grouped-query attention, k and v (and k_rot) have `kv_head` first.
/// An attention-only block whose output is not d_model wide has `d_out` in `attn.out` and
/// `output`.
pub fn dims(name: &str, cfg: &ModelConfig) -> Vec<Dim> {
    let same = cfg.d_k == cfg.d_v;
    let grouped = cfg.kv_heads() != cfg.heads && matches!(name, "attn.k" | "attn.v" | "attn.k_norm" | "attn.k_rot");
    let d_out = cfg.parts.d_out.is_some() && matches!(name, "attn.out" | "output");
    raw_dims(name)
        .iter()
        .map(|&d| match d {
            "d_k" | "d_v" if same => "d_head",
            "head" if grouped => "kv_head",
            "d_model" if d_out => "d_out",
            d => d,
        })
        .collect()
}

/// A step's dims as the catalogue gives them (`d_k`, `d_v`), for files that carry only
/// numbers; an unknown name gets `[pos, d_model]`.
pub fn raw_dims(name: &str) -> &'static [Dim] {
    def(name).map_or(ROWS, |d| d.dims)
}

/// The step ids the `--focus` walkthrough of `layer` reads (the mask only exists with a mask).
pub fn focus_steps(layer: usize) -> Vec<String> {
    ["q", "k", "v", "q_rot", "k_rot", "raw_scores", "mask", "scores", "weights", "context"]
        .iter()
        .map(|n| layer_id(layer, &format!("attn.{n}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d_k_and_d_v_read_d_head_when_equal() {
        let cfg = ModelConfig::toy();
        assert_eq!(dims("attn.q", &cfg), ["head", "pos", "d_head"]);
        let cfg = ModelConfig { d_v: 3, ..cfg };
        assert_eq!(dims("attn.q", &cfg), ["head", "pos", "d_k"]);
        assert_eq!(dims("attn.concat", &cfg), ["pos", "heads·d_v"]);
    }
}
