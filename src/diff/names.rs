//! Names a user's file may use for a step, mapped to attn-trace's canonical ids; the trace
//! order in which steps are compared; and each step's dimension names.
//!
//! Accepted besides the canonical ids (`layers.0.attn.weights`): the short aliases of
//! `--steps` that name one tensor (`layers.0.weights`, `layers.0.z`, `ids`, `input`),
//! `blocks.{i}.` for `layers.{i}.`, and TransformerLens hook names (`hook_embed`,
//! `blocks.0.attn.hook_pattern`, …). TransformerLens caches are batch-first and store q, k,
//! v and z as `[pos, head, d_head]`; [`Resolved::tl`] tells the loader to undo that.

use crate::trace::split_id;
use crate::trace::steps;
use crate::trace::steps::{global_names, layer_names, raw_dims, StepDef, CATALOGUE};

/// A file's name for a tensor, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The canonical step id.
    pub id: String,
    /// Named by a TransformerLens hook: the tensor may carry TL's batch dimension and, for
    /// q/k/v/z, TL's `[pos, head, d_head]` layout.
    pub tl: bool,
}

/// Maps a name from a file to a canonical step id, or `None` if it names no step. A
/// generation's decode step keeps its `gen.{t}.` prefix before the canonical id, and its
/// generated ids are the step `generation.token_ids`.
pub fn resolve(name: &str) -> Option<Resolved> {
    if name == GENERATED_IDS {
        return Some(Resolved { id: name.to_string(), tl: false });
    }
    if let Some((t, rest)) = crate::trace::generate::split_gen(name) {
        let r = resolve_one(rest)?;
        return Some(Resolved { id: format!("{}{}", crate::trace::generate::prefix(t), r.id), ..r });
    }
    resolve_one(name)
}

/// The step `diff` reads a generation's token ids as (`diff/json.rs`).
pub const GENERATED_IDS: &str = "generation.token_ids";

/// An encoder–decoder's steps carry their stack (`encoder.layers.0.attn.q`); TransformerLens's
/// `HookedEncoderDecoder` numbers the blocks right after it (`encoder.0.attn.hook_q`,
/// `decoder.0.cross_attn.hook_pattern`, whose hooks are the self-attention's).
fn resolve_one(name: &str) -> Option<Resolved> {
    for stack in [steps::Stack::Encoder, steps::Stack::Decoder] {
        let Some(rest) = name.strip_prefix(stack.prefix()) else { continue };
        let rest = match rest.starts_with(|c: char| c.is_ascii_digit()) {
            true => format!("layers.{rest}"),
            false => rest.to_string(),
        };
        let r = resolve_stackless(&rest).or_else(|| {
            let (before, after) = rest.split_once(".cross_attn.")?;
            let r = resolve_stackless(&format!("{before}.attn.{after}"))?;
            let (l, step) = (split_id(&r.id).0?, r.id.rsplit_once(".attn.")?.1.to_string());
            Some(Resolved { id: steps::layer_id(l, &format!("cross_attn.{step}")), ..r })
        })?;
        return Some(Resolved { id: format!("{}{}", stack.prefix(), r.id), ..r });
    }
    resolve_stackless(name)
}

fn resolve_stackless(name: &str) -> Option<Resolved> {
    let plain = |id: String| Some(Resolved { id, tl: false });
    if global_names().any(|g| g == name) {
        return plain(name.to_string());
    }
    let tl_name =
        |d: &&StepDef, in_layer: bool, hook: &str| d.in_layer == in_layer && d.transformer_lens.contains(&hook);
    if let Some(d) = CATALOGUE.iter().find(|d| tl_name(d, false, name)) {
        return Some(Resolved { id: d.name.to_string(), tl: true });
    }
    let layered = name.strip_prefix("layers.").or_else(|| name.strip_prefix("blocks."));
    if let Some((num, rest)) = layered.and_then(|r| r.split_once('.')) {
        let layer: usize = num.parse().ok()?;
        if let Some(d) = CATALOGUE.iter().find(|d| tl_name(d, true, rest)) {
            return Some(Resolved { id: steps::layer_id(layer, d.name), tl: true });
        }
        let n = single(rest).filter(|n| layer_names().any(|l| l == n))?;
        return plain(steps::layer_id(layer, &n));
    }
    single(name).filter(|n| global_names().any(|g| g == n)).and_then(plain)
}

/// A canonical name or a `--steps` alias that stands for exactly one step name.
fn single(name: &str) -> Option<String> {
    if CATALOGUE.iter().any(|d| d.name == name) {
        return Some(name.to_string());
    }
    // aliases::parse is the one list of aliases; `qkv` or `ffn` name several and do not count.
    let set = crate::trace::aliases::parse(name, usize::MAX).ok()?;
    (set.len() == 1).then(|| set.into_iter().next().unwrap_or_default())
}

/// The position of a step in a trace: the prompt's embeddings, then layer by layer, then
/// `output`; then a generation's token ids, then each decode step's steps in the same order.
pub fn rank(id: &str) -> (usize, u8, usize, usize) {
    if id == GENERATED_IDS {
        return (1, 0, 0, 0);
    }
    match crate::trace::generate::split_gen(id) {
        Some((t, rest)) => {
            let (a, b, c) = rank_one(rest);
            (t + 1, a, b, c)
        }
        None => {
            let (a, b, c) = rank_one(id);
            (0, a, b, c)
        }
    }
}

fn rank_one(id: &str) -> (u8, usize, usize) {
    // An encoder–decoder's encoder comes before its decoder.
    let after = match crate::trace::stack_of(id) {
        steps::Stack::Decoder => 3,
        _ => 0,
    };
    let (a, b, c) = rank_stackless(id);
    (a + after, b, c)
}

fn rank_stackless(id: &str) -> (u8, usize, usize) {
    match split_id(id) {
        (Some(l), name) => (1, l, layer_names().position(|n| n == name).unwrap_or(usize::MAX)),
        // Steps after the layers in the catalogue (final_norm.out, output, logits) come last.
        (None, name) => match CATALOGUE.iter().position(|d| d.name == name) {
            Some(i) if CATALOGUE[..i].iter().any(|d| d.in_layer) => (2, 0, i),
            Some(i) => (0, 0, i),
            None => (0, 0, usize::MAX),
        },
    }
}

/// The dimension names of a step, as the JSON document gives them (the step catalogue),
/// for files that carry only numbers.
pub fn dims(id: &str) -> Vec<String> {
    let id = crate::trace::generate::split_gen(id).map_or(id, |x| x.1);
    raw_dims(split_id(id).1).iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> Option<String> {
        resolve(name).map(|r| r.id)
    }

    #[test]
    fn stacks_and_transformer_lens_encoder_decoder_names() {
        assert_eq!(id("encoder.layers.1.attn.q").as_deref(), Some("encoder.layers.1.attn.q"));
        assert_eq!(id("decoder.layers.0.cross_attn.weights").as_deref(), Some("decoder.layers.0.cross_attn.weights"));
        assert_eq!(id("decoder.0.cross_attn.hook_pattern").as_deref(), Some("decoder.layers.0.cross_attn.weights"));
        assert_eq!(id("encoder.2.attn.hook_z").as_deref(), Some("encoder.layers.2.attn.context"));
        assert_eq!(id("decoder.logits").as_deref(), Some("decoder.logits"));
        assert!(rank("encoder.layers.5.ffn.out") < rank("decoder.embed.token"));
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
