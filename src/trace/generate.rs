//! A generation's record (`--generate`): the tokens it chose, why it stopped, and each decode
//! step's steps, which keep the usual ids behind the prefix `gen.{t}.` (docs/TRACE.md,
//! "Generation"). The prompt's own steps are the trace's, step 0.

use super::{Prediction, Step};
use crate::config::Strategy;

/// What a generation produced, beside the prompt's trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The prompt's length n: generated token i + 1 stands at position n + i.
    pub prompt_tokens: usize,
    /// Why it ended: `length`, `eos` or `positions` (the model's last position).
    pub stop: &'static str,
    pub strategy: Strategy,
    /// The generated tokens decoded together by the model's tokenizer.
    pub text: String,
    pub tokens: Vec<GenToken>,
    /// Decode step t at index t − 1.
    pub steps: Vec<DecodeStep>,
    /// `--baseline`: the same generation without the interventions.
    pub baseline: Option<Baseline>,
}

/// One generated token.
#[derive(Debug, Clone, PartialEq)]
pub struct GenToken {
    pub position: usize,
    /// The token, with its probability under softmax(logits) of the step that chose it.
    pub chosen: Prediction,
    /// That step's most probable tokens (`--top-k`), most probable first.
    pub candidates: Vec<Prediction>,
}

/// One decode step: the model run on generated token `step` at `position`.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeStep {
    pub step: usize,
    pub position: usize,
    /// Its steps, ids prefixed `gen.{step}.`.
    pub steps: Vec<Step>,
}

/// The generation without the interventions, and where the two part.
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    pub text: String,
    pub tokens: Vec<Prediction>,
    /// The index (into both token lists) of the first token where they differ; None when
    /// one is a prefix of the other.
    pub parted_at: Option<usize>,
    /// The probability the intervened run gave the baseline's token at `parted_at`.
    pub prob_there: Option<f32>,
}

/// The id prefix of decode step `t`'s steps.
pub fn prefix(t: usize) -> String {
    format!("gen.{t}.")
}

/// Splits `gen.3.layers.0.attn.q` into (3, `layers.0.attn.q`); None for other ids.
pub fn split_gen(id: &str) -> Option<(usize, &str)> {
    let (t, rest) = id.strip_prefix("gen.")?.split_once('.')?;
    Some((t.parse().ok()?, rest))
}

impl Generation {
    /// Every decode step's steps in order, as one list (what `diff` and the exports read).
    pub fn all_steps(&self) -> impl Iterator<Item = &Step> {
        self.steps.iter().flat_map(|d| d.steps.iter())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn gen_ids() {
        assert_eq!(super::split_gen("gen.12.layers.3.attn.weights"), Some((12, "layers.3.attn.weights")));
        assert_eq!(super::split_gen("layers.3.attn.weights"), None);
        assert_eq!(super::prefix(2), "gen.2.");
    }
}
