//! `--steps`: the aliases it accepts beside the catalogue's names (`steps::CATALOGUE`), and
//! the parsing of its list into the canonical names and ids it selects.

use super::steps::{global_names, is_global, is_layer, layer_names, CATALOGUE};
use crate::error::usage;
use anyhow::Result;
use std::collections::BTreeSet;

/// Every FFN step, dense or mixture of experts.
const FFN: &[&str] = &[
    "ffn.hidden",
    "ffn.gate",
    "ffn.up",
    "ffn.act",
    "ffn.router.logits",
    "ffn.router.probs",
    "ffn.router.chosen",
    "ffn.router.weights",
    "ffn.experts.out",
    "ffn.experts.mixed",
    "ffn.shared.out",
    "ffn.shared.gate",
    "ffn.out",
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
            "attn.q_rot",
            "attn.k_rot",
            "attn.raw_scores",
            "attn.mask",
            "attn.scores_uncapped",
            "attn.scores",
            "attn.weights",
            "attn.context",
            "attn.concat",
            "attn.out",
        ],
    ),
    (
        "cross_attn",
        &[
            "cross_attn.q",
            "cross_attn.k",
            "cross_attn.v",
            "cross_attn.raw_scores",
            "cross_attn.scores",
            "cross_attn.weights",
            "cross_attn.context",
            "cross_attn.concat",
            "cross_attn.out",
        ],
    ),
    ("add_norm1", &["add_norm1.sum", "add_norm1.out"]),
    ("resid_mid", &["add_norm1.sum"]),
    ("ffn", FFN),
    ("mlp", FFN),
    ("router", &["ffn.router.logits", "ffn.router.probs", "ffn.router.chosen", "ffn.router.weights"]),
    ("experts", &["ffn.router.chosen", "ffn.router.weights", "ffn.experts.out", "ffn.experts.mixed"]),
    ("rot", &["attn.q_rot", "attn.k_rot"]),
    ("q_rot", &["attn.q_rot"]),
    ("k_rot", &["attn.k_rot"]),
    ("gate", &["ffn.gate"]),
    ("up", &["ffn.up"]),
    ("add_norm2", &["add_norm2.sum", "add_norm2.out"]),
    ("resid_post", &["add_norm2.sum"]),
    (
        "norm",
        &[
            "norm1.out",
            "norm1_post.out",
            "add_norm1.out",
            "norm2.out",
            "norm2_post.out",
            "add_norm2.out",
            "final_norm.out",
        ],
    ),
    ("unembed", &["logits_uncapped", "logits"]),
    ("attribution", &["attribution.heads", "attribution.sources"]),
];

/// Parses `--steps a,b,…` into the set of canonical names and ids it selects.
pub fn parse(list: &str, layers: usize) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if item == "all" {
            out.extend(CATALOGUE.iter().map(|d| d.name.to_string()));
        } else if is_global(item) || is_layer(item) {
            out.insert(item.to_string());
        } else if let Some((_, names)) = ALIASES.iter().find(|(a, _)| *a == item) {
            out.extend(names.iter().map(|n| n.to_string()));
        } else if let (Some(l), name) = crate::trace::split_id(item) {
            if !is_layer(name) {
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
        format!("unknown step {}", crate::error::quote(item)),
        format!(
            "valid steps: all, {}; per layer (or as layers.N.name): {}; aliases: {}",
            global_names().collect::<Vec<_>>().join(", "),
            layer_names().collect::<Vec<_>>().join(", "),
            aliases.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::steps::def;

    #[test]
    fn aliases_expand_to_canonical_names() {
        let s = parse("weights, layers.1.ffn.out,tokens", 2).unwrap();
        assert!(s.contains("attn.weights") && s.contains("layers.1.ffn.out") && s.contains("tokens"));
        assert!(parse("softmax", 1).is_err());
        assert!(parse("layers.2.attn.q", 2).is_err());
        assert!(parse(" , ", 1).is_err());
    }

    #[test]
    fn aliases_name_catalogue_steps_and_names_are_unique() {
        for (alias, names) in ALIASES {
            for n in *names {
                assert!(def(n).is_some(), "alias {alias} names {n}, which is not in the catalogue");
            }
        }
        let mut names: Vec<&str> = CATALOGUE.iter().map(|d| d.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), CATALOGUE.len());
    }
}
