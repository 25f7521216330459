//! Which steps a diff compares and requires (`--only`, `--skip`, `--require`), and "did you
//! mean" for names that are close to a step id.
//!
//! A list item is a full step id or any name the diff reads ([`super::names::resolve`]:
//! `layers.0.attn.q`, `blocks.0.attn.hook_q`, `layers.0.pattern`), or a name that stands for
//! every layer's step (`attn.scores`, `scores`, and `--steps` aliases such as `qkv`).

use super::names::resolve;
use crate::error::{quote, usage};
use crate::trace::split_id;
use crate::trace::steps::{self, global_names, layer_names};
use anyhow::Result;
use std::collections::BTreeSet;

/// A set of steps named on the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    /// Full ids (`layers.0.attn.q`, `embed.sum`) and in-layer names that match every layer.
    names: BTreeSet<String>,
}

impl Selector {
    /// Parses `flag`'s comma-separated list; an unknown name is a usage error with the
    /// closest step name.
    pub fn parse(flag: &str, list: &str) -> Result<Selector> {
        let mut names = BTreeSet::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if let Some(r) = resolve(item) {
                names.insert(r.id);
            } else if let Ok(set) = crate::trace::aliases::parse(item, usize::MAX) {
                names.extend(set);
            } else {
                let near = suggest(item, known_names()).map(|s| format!("did you mean {s}? ")).unwrap_or_default();
                return Err(usage(
                    flag,
                    format!("{} is not a step name", quote(item)),
                    format!("{near}name step ids such as layers.0.attn.weights, or attn.weights for every layer"),
                ));
            }
        }
        if names.is_empty() {
            return Err(usage(flag, "the list is empty", "name at least one step, e.g. attn.scores"));
        }
        Ok(Selector { names })
    }

    /// Whether the step `id` is in the set.
    pub fn matches(&self, id: &str) -> bool {
        let (layer, name) = split_id(id);
        self.names.contains(id) || (layer.is_some() && self.names.contains(name))
    }
}

/// Every step name without a layer number, for suggestions on the command line.
fn known_names() -> Vec<String> {
    global_names().chain(layer_names()).map(String::from).collect()
}

/// The candidate closest to `name` by edit distance, if it is close enough to be a typo:
/// at most 1 edit per 4 characters of the name (and at least 1, at most 4 edits).
pub fn suggest(name: &str, candidates: impl IntoIterator<Item = String>) -> Option<String> {
    let limit = (name.chars().count() / 4).clamp(1, 4);
    let mut best: Option<(usize, String)> = None;
    for c in candidates {
        let d = distance(name, &c);
        if d > 0 && d <= limit && best.as_ref().is_none_or(|(bd, _)| d < *bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// The step ids a misspelled file name may have meant: those of both sides, and every
/// in-layer step of the layer the name gives.
pub fn candidates<'a>(name: &str, ids: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut out: BTreeSet<String> = ids.cloned().collect();
    out.extend(global_names().map(String::from));
    let rest = name.strip_prefix("layers.").or_else(|| name.strip_prefix("blocks."));
    if let Some(layer) = rest.and_then(|r| r.split('.').next()).and_then(|n| n.parse::<usize>().ok()) {
        out.extend(layer_names().map(|n| steps::layer_id(layer, n)));
    }
    out.into_iter().collect()
}

/// Levenshtein distance over characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_and_suggestions() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        let ids = candidates("layers.0.attn.weight", std::iter::empty());
        assert_eq!(suggest("layers.0.attn.weight", ids).as_deref(), Some("layers.0.attn.weights"));
        assert_eq!(suggest("blocks.0.hook_not_a_step", candidates("blocks.0.x", std::iter::empty())), None);
        assert_eq!(suggest("embed.sun", known_names()).as_deref(), Some("embed.sum"));
    }

    #[test]
    fn selectors_match_ids_and_every_layer() {
        let s = Selector::parse("--only", "attn.scores, layers.1.attn.q,embed.sum").unwrap();
        assert!(s.matches("layers.0.attn.scores") && s.matches("layers.7.attn.scores"));
        assert!(s.matches("layers.1.attn.q") && !s.matches("layers.0.attn.q") && s.matches("embed.sum"));
        assert!(Selector::parse("--only", "qkv").unwrap().matches("layers.2.attn.v"));
        let e = Selector::parse("--skip", "attn.weighs").unwrap_err().to_string();
        assert!(e.contains("did you mean attn.weights?"), "{e}");
        assert!(Selector::parse("--only", " , ").is_err());
    }
}
