//! The catalogue of step names and the aliases `--steps` accepts.
//!
//! Canonical ids are API (see README's step table); aliases are only ever input.

use crate::error::usage;
use anyhow::Result;
use std::collections::BTreeSet;

/// Steps outside any layer, in trace order.
pub const GLOBAL: &[&str] =
    &["tokens", "token_ids", "embed.token", "embed.position", "embed.token_type", "embed.sum", "embed.out", "output"];

/// Steps inside `layers.{i}`, in trace order (pre-norm adds `norm1.out` and `norm2.out`,
/// post-norm has `add_norm1.out` and `add_norm2.out`; `attn.mask` exists with --causal).
pub const LAYER: &[&str] = &[
    "norm1.out",
    "attn.q",
    "attn.k",
    "attn.v",
    "attn.raw_scores",
    "attn.mask",
    "attn.scores",
    "attn.weights",
    "attn.context",
    "attn.concat",
    "attn.out",
    "add_norm1.sum",
    "add_norm1.out",
    "norm2.out",
    "ffn.hidden",
    "ffn.act",
    "ffn.out",
    "add_norm2.sum",
    "add_norm2.out",
];

/// Alias → canonical names. Several seed notebooks' and TransformerLens's words are accepted.
const ALIASES: &[(&str, &[&str])] = &[
    ("ids", &["token_ids"]),
    ("embed", &["embed.token", "embed.position", "embed.token_type", "embed.sum", "embed.out"]),
    ("input", &["embed.out"]),
    ("q", &["attn.q"]),
    ("k", &["attn.k"]),
    ("v", &["attn.v"]),
    ("qkv", &["attn.q", "attn.k", "attn.v"]),
    ("raw_scores", &["attn.raw_scores"]),
    ("omega", &["attn.raw_scores"]),
    ("mask", &["attn.mask"]),
    ("scores", &["attn.scores"]),
    ("weights", &["attn.weights"]),
    ("pattern", &["attn.weights"]),
    ("probs", &["attn.weights"]),
    ("context", &["attn.context"]),
    ("z", &["attn.context"]),
    ("concat", &["attn.concat"]),
    ("attn_out", &["attn.out"]),
    (
        "attn",
        &[
            "attn.q",
            "attn.k",
            "attn.v",
            "attn.raw_scores",
            "attn.mask",
            "attn.scores",
            "attn.weights",
            "attn.context",
            "attn.concat",
            "attn.out",
        ],
    ),
    ("add_norm1", &["add_norm1.sum", "add_norm1.out"]),
    ("resid_mid", &["add_norm1.sum"]),
    ("ffn", &["ffn.hidden", "ffn.act", "ffn.out"]),
    ("mlp", &["ffn.hidden", "ffn.act", "ffn.out"]),
    ("add_norm2", &["add_norm2.sum", "add_norm2.out"]),
    ("resid_post", &["add_norm2.sum"]),
    ("norm", &["norm1.out", "add_norm1.out", "norm2.out", "add_norm2.out"]),
];

/// Parses `--steps a,b,…` into the set of canonical names and ids it selects.
pub fn parse(list: &str, layers: usize) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if item == "all" {
            out.extend(GLOBAL.iter().chain(LAYER).map(|s| s.to_string()));
        } else if GLOBAL.contains(&item) || LAYER.contains(&item) {
            out.insert(item.to_string());
        } else if let Some((_, names)) = ALIASES.iter().find(|(a, _)| *a == item) {
            out.extend(names.iter().map(|n| n.to_string()));
        } else if let (Some(l), name) = crate::trace::split_id(item) {
            if !LAYER.contains(&name) {
                return Err(unknown(item));
            }
            if l >= layers {
                return Err(usage(
                    "--steps",
                    format!("{item} names layer {l}, but the model has {layers}"),
                    format!("use a layer from 0 to {}", layers - 1),
                ));
            }
            out.insert(item.to_string());
        } else {
            return Err(unknown(item));
        }
    }
    if out.is_empty() {
        return Err(usage("--steps", "the list is empty", "name at least one step, e.g. --steps weights"));
    }
    Ok(out)
}

fn unknown(item: &str) -> anyhow::Error {
    let aliases: Vec<&str> = ALIASES.iter().map(|(a, _)| *a).collect();
    usage(
        "--steps",
        format!("unknown step {item:?}"),
        format!(
            "valid steps: all, {}; per layer (or as layers.N.name): {}; aliases: {}",
            GLOBAL.join(", "),
            LAYER.join(", "),
            aliases.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_expand_to_canonical_names() {
        let s = parse("weights, layers.1.ffn.out,tokens", 2).unwrap();
        assert!(s.contains("attn.weights") && s.contains("layers.1.ffn.out") && s.contains("tokens"));
        assert!(parse("softmax", 1).is_err());
        assert!(parse("layers.2.attn.q", 2).is_err());
        assert!(parse(" , ", 1).is_err());
    }
}
