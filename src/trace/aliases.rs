//! `--steps`: the aliases it accepts beside the catalogue's names (`steps::CATALOGUE`), and
//! the parsing of its list into the canonical names and ids it selects.

use super::steps::{global_names, is_global, is_layer, layer_id, layer_names, transformer_lens_hook, CATALOGUE};
use crate::config::{ModelConfig, Norm, Parts};
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

/// Parses `--steps a,b,…` into the set of canonical names and ids it selects, TransformerLens
/// hook names read as a model of default parts with pre-norm blocks would write them (`diff`).
pub fn parse(list: &str, layers: usize) -> Result<BTreeSet<String>> {
    parse_in(list, Model { layers, parts: &Parts::default(), norm: Norm::Pre })
}

/// [`parse`] against the model `cfg` describes: its layers, and the TransformerLens hook names
/// `--save-trace … --names transformer-lens` writes for it (Gemma's `hook_embed` is
/// `embed.out`). `none` selects no step (only the summary and the predictions are shown).
pub fn parse_for(list: &str, cfg: &ModelConfig) -> Result<BTreeSet<String>> {
    parse_in(list, Model { layers: cfg.layers, parts: &cfg.parts, norm: cfg.norm })
}

/// What the names are read against.
#[derive(Clone, Copy)]
struct Model<'a> {
    layers: usize,
    parts: &'a Parts,
    norm: Norm,
}

fn parse_in(list: &str, model: Model) -> Result<BTreeSet<String>> {
    let layers = model.layers;
    let items: Vec<&str> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if items.contains(&"none") {
        if items.len() > 1 {
            return Err(usage(
                "--steps",
                "none shows no step, and the list names others too",
                "pass --steps none alone, or drop none",
            ));
        }
        return Ok(BTreeSet::new());
    }
    let mut out = BTreeSet::new();
    for item in items {
        if item == "all" {
            out.extend(CATALOGUE.iter().map(|d| d.name.to_string()));
        } else if is_global(item) || is_layer(item) {
            out.insert(item.to_string());
        } else if let Some((_, names)) = ALIASES.iter().find(|(a, _)| *a == item) {
            out.extend(names.iter().map(|n| n.to_string()));
        } else if let Some(ids) = transformer_lens(item, model) {
            out.extend(ids?);
        } else if let (Some(l), name) = crate::trace::split_id(item) {
            if !is_layer(name) {
                return Err(unknown(item));
            }
            check_layer(item, l, layers)?;
            out.insert(item.to_string());
        } else {
            return Err(unknown(item));
        }
    }
    if out.is_empty() {
        return Err(usage("--steps", "the list is empty", "name at least one step, e.g. --steps weights, or none"));
    }
    Ok(out)
}

fn check_layer(item: &str, l: usize, layers: usize) -> Result<()> {
    if l < layers {
        return Ok(());
    }
    Err(usage(
        "--steps",
        format!("{item} names layer {l}, but the model has {layers}"),
        format!("use a layer from 0 to {}", layers.saturating_sub(1)),
    ))
}

/// TransformerLens's residual stream before block L: the embeddings' output before the first,
/// else the previous block's output (its residual sum pre-norm, the norm of it post-norm,
/// where TransformerLens's BERT block returns `hook_normalized_resid_post`).
const RESID_PRE: &str = "hook_resid_pre";

/// A TransformerLens hook name (`hook_embed`, `blocks.3.attn.hook_pattern`,
/// `ln_final.hook_normalized`) as the ids it names in this model, by the table
/// `--names transformer-lens` writes with ([`transformer_lens_hook`]); None when it is not one.
fn transformer_lens(item: &str, model: Model) -> Option<Result<Vec<String>>> {
    let (block, hook) = match item.strip_prefix("blocks.").and_then(|r| r.split_once('.')) {
        Some((n, rest)) => (Some(n.parse::<usize>().ok()?), rest),
        None => (None, item),
    };
    if let (Some(l), RESID_PRE) = (block, hook) {
        let id = match (l, model.norm) {
            (0, _) => "embed.out".to_string(),
            (_, Norm::Pre) => layer_id(l - 1, "add_norm2.sum"),
            (_, Norm::Post) => layer_id(l - 1, "add_norm2.out"),
        };
        return Some(check_layer(item, l, model.layers).map(|_| vec![id]));
    }
    let names: Vec<&str> = CATALOGUE
        .iter()
        .filter(|d| d.in_layer == block.is_some() && transformer_lens_hook(d.name, model.parts) == Some(hook))
        .map(|d| d.name)
        .collect();
    if names.is_empty() {
        return None;
    }
    Some(match block {
        None => Ok(names.iter().map(|n| n.to_string()).collect()),
        Some(l) => check_layer(item, l, model.layers).map(|_| names.iter().map(|n| layer_id(l, n)).collect()),
    })
}

/// Every name `--steps` accepts as written for `item`'s scope: a `layers.N.`/`blocks.N.` item
/// is compared with that layer's names, another with the global names, aliases and hooks.
fn known_like(item: &str) -> Vec<String> {
    let hooks = |in_layer: bool| {
        CATALOGUE
            .iter()
            .filter(move |d| d.in_layer == in_layer)
            .flat_map(|d| transformer_lens_hook(d.name, &Parts::default()))
    };
    if let Some((n, _)) = item.strip_prefix("layers.").and_then(|r| r.split_once('.')) {
        return layer_names().map(|name| format!("layers.{n}.{name}")).collect();
    }
    if let Some((n, _)) = item.strip_prefix("blocks.").and_then(|r| r.split_once('.')) {
        return hooks(true).chain([RESID_PRE]).map(|h| format!("blocks.{n}.{h}")).collect();
    }
    let words = ["all", "none"].into_iter().chain(global_names()).chain(layer_names());
    words.chain(ALIASES.iter().map(|(a, _)| *a)).chain(hooks(false)).map(String::from).collect()
}

/// The known name closest to a misspelt `item`, as clap suggests a flag (Jaro similarity
/// above 0.8).
fn closest(item: &str) -> Option<String> {
    let scored = known_like(item).into_iter().map(|k| (strsim::jaro(item, &k), k));
    let best = scored.filter(|(score, _)| *score > 0.8).max_by(|a, b| a.0.total_cmp(&b.0));
    best.map(|(_, k)| k)
}

fn unknown(item: &str) -> anyhow::Error {
    let aliases: Vec<&str> = ALIASES.iter().map(|(a, _)| *a).collect();
    let guess = closest(item).map_or(String::new(), |k| format!("did you mean {k}? "));
    usage(
        "--steps",
        format!("unknown step {}", crate::error::quote(item)),
        format!(
            "{guess}valid steps: all, none, {}; per layer (or as layers.N.name): {}; aliases: {}; TransformerLens hook \
             names (blocks.N.attn.hook_pattern)",
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
    fn hook_names_read_as_the_model_writes_them() {
        let plain = ModelConfig { layers: 2, ..ModelConfig::toy() };
        let gemma = ModelConfig {
            parts: Parts { embed_scale: Some(8.0), sandwich_norms: true, ..Parts::default() },
            ..plain.clone()
        };
        let one = |list: &str, cfg: &ModelConfig| parse_for(list, cfg).unwrap().into_iter().collect::<Vec<_>>();
        assert_eq!(one("hook_embed", &plain), ["embed.token"]);
        assert_eq!(one("hook_embed", &gemma), ["embed.out"], "TransformerLens folds √d_model into W_E");
        assert_eq!(one("blocks.1.hook_attn_out", &gemma), ["layers.1.norm1_post.out"]);
        assert_eq!(one("blocks.1.hook_attn_out", &plain), ["layers.1.attn.out"]);
        assert!(parse_for("blocks.2.hook_attn_out", &plain).is_err());
        assert_eq!(closest("wieghts").as_deref(), Some("weights"));
        assert_eq!(closest("qqqqqqqqqq"), None);
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
