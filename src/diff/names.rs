//! Names a user's file may use for a step, mapped to attn-trace's canonical ids; the trace
//! order in which steps are compared; and each step's dimension names.
//!
//! Accepted besides the canonical ids (`layers.0.attn.weights`): the short aliases of
//! `--steps` that name one tensor (`layers.0.weights`, `layers.0.z`, `ids`, `input`),
//! `blocks.{i}.` for `layers.{i}.`, and TransformerLens hook names (`hook_embed`,
//! `blocks.0.attn.hook_pattern`, …). TransformerLens caches are batch-first and store q, k,
//! v and z as `[pos, head, d_head]`; [`Resolved::tl`] tells the loader to undo that.

use crate::steps::{GLOBAL, LAYER};
use crate::trace::split_id;

/// A file's name for a tensor, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The canonical step id.
    pub id: String,
    /// Named by a TransformerLens hook: the tensor may carry TL's batch dimension and, for
    /// q/k/v/z, TL's `[pos, head, d_head]` layout.
    pub tl: bool,
}

/// TransformerLens hook names outside blocks → canonical ids. `embed.hook_*` and
/// `hook_full_embed` are HookedEncoder's (BERT) spelling; `hook_embed` HookedTransformer's.
const TL_GLOBAL: &[(&str, &str)] = &[
    ("hook_embed", "embed.token"),
    ("embed.hook_embed", "embed.token"),
    ("hook_pos_embed", "embed.position"),
    ("embed.hook_pos_embed", "embed.position"),
    ("hook_token_type_embed", "embed.token_type"),
    ("embed.hook_token_type_embed", "embed.token_type"),
    ("hook_full_embed", "embed.out"),
];

/// TransformerLens hook names inside `blocks.{i}.` → in-layer names.
const TL_LAYER: &[(&str, &str)] = &[
    ("attn.hook_q", "attn.q"),
    ("attn.hook_k", "attn.k"),
    ("attn.hook_v", "attn.v"),
    ("attn.hook_attn_scores", "attn.scores"),
    ("attn.hook_pattern", "attn.weights"),
    ("attn.hook_z", "attn.context"),
    ("hook_attn_out", "attn.out"),
    ("hook_resid_mid", "add_norm1.sum"),
    ("hook_normalized_resid_mid", "add_norm1.out"),
    ("mlp.hook_pre", "ffn.hidden"),
    ("mlp.hook_post", "ffn.act"),
    ("hook_mlp_out", "ffn.out"),
    ("hook_resid_post", "add_norm2.sum"),
    ("hook_normalized_resid_post", "add_norm2.out"),
];

/// Maps a name from a file to a canonical step id, or `None` if it names no step.
pub fn resolve(name: &str) -> Option<Resolved> {
    let plain = |id: String| Some(Resolved { id, tl: false });
    if GLOBAL.contains(&name) {
        return plain(name.to_string());
    }
    if let Some((_, id)) = TL_GLOBAL.iter().find(|(n, _)| *n == name) {
        return Some(Resolved { id: id.to_string(), tl: true });
    }
    let layered = name.strip_prefix("layers.").or_else(|| name.strip_prefix("blocks."));
    if let Some((num, rest)) = layered.and_then(|r| r.split_once('.')) {
        let layer: usize = num.parse().ok()?;
        if let Some((_, n)) = TL_LAYER.iter().find(|(h, _)| *h == rest) {
            return Some(Resolved { id: format!("layers.{layer}.{n}"), tl: true });
        }
        let n = single(rest).filter(|n| LAYER.contains(&n.as_str()))?;
        return plain(format!("layers.{layer}.{n}"));
    }
    single(name).filter(|n| GLOBAL.contains(&n.as_str())).and_then(plain)
}

/// A canonical name or a `--steps` alias that stands for exactly one step name.
fn single(name: &str) -> Option<String> {
    if LAYER.contains(&name) || GLOBAL.contains(&name) {
        return Some(name.to_string());
    }
    // steps::parse is the one list of aliases; `qkv` or `ffn` name several and do not count.
    let set = crate::steps::parse(name, usize::MAX).ok()?;
    (set.len() == 1).then(|| set.into_iter().next().unwrap_or_default())
}

/// The position of a step in a trace: embeddings, then layer by layer, then `output`.
pub fn rank(id: &str) -> (u8, usize, usize) {
    match split_id(id) {
        (Some(l), name) => (1, l, LAYER.iter().position(|n| *n == name).unwrap_or(LAYER.len())),
        (None, "output") => (2, 0, 0),
        (None, name) => (0, 0, GLOBAL.iter().position(|n| *n == name).unwrap_or(GLOBAL.len())),
    }
}

/// The dimension names of a step, as the JSON document gives them (README's step table),
/// for files that carry only numbers.
pub fn dims(id: &str) -> Vec<String> {
    let (_, name) = split_id(id);
    let d: &[&str] = match name {
        "tokens" | "token_ids" => &["pos"],
        "attn.q" | "attn.k" => &["head", "pos", "d_k"],
        "attn.v" | "attn.context" => &["head", "pos", "d_v"],
        "attn.raw_scores" | "attn.scores" | "attn.weights" => &["head", "query_pos", "key_pos"],
        "attn.mask" => &["query_pos", "key_pos"],
        "attn.concat" => &["pos", "heads·d_v"],
        "ffn.hidden" | "ffn.act" => &["pos", "d_ff"],
        _ => &["pos", "d_model"],
    };
    d.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> Option<String> {
        resolve(name).map(|r| r.id)
    }

    #[test]
    fn canonical_aliases_and_transformer_lens() {
        assert_eq!(id("layers.0.attn.weights").as_deref(), Some("layers.0.attn.weights"));
        assert_eq!(id("layers.2.pattern").as_deref(), Some("layers.2.attn.weights"));
        assert_eq!(id("blocks.1.z").as_deref(), Some("layers.1.attn.context"));
        assert_eq!(id("ids").as_deref(), Some("token_ids"));
        assert_eq!(id("hook_embed").as_deref(), Some("embed.token"));
        assert_eq!(id("blocks.3.hook_resid_post").as_deref(), Some("layers.3.add_norm2.sum"));
        assert!(resolve("blocks.0.attn.hook_q").unwrap().tl);
        assert_eq!(id("layers.0.qkv"), None);
        assert_eq!(id("weights"), None, "an in-layer name needs its layer");
        assert_eq!(id("layers.x.attn.q"), None);
    }

    #[test]
    fn trace_order() {
        let mut ids = vec!["output", "layers.1.attn.q", "layers.0.ffn.out", "embed.sum", "layers.0.attn.q"];
        ids.sort_by_key(|i| rank(i));
        assert_eq!(ids, ["embed.sum", "layers.0.attn.q", "layers.0.ffn.out", "layers.1.attn.q", "output"]);
    }
}
