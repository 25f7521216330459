//! [`Selection`]: which steps a run keeps (`--steps`, `--layer`, `--head`, and `--save-trace`'s
//! own steps), asked of each step as the model records it.

use crate::config::tiles::{SQUARE_STEPS, WIDE_FFN_STEPS};
use std::collections::BTreeSet;

/// Which steps a run keeps. Steps that nobody asked for are never copied out of the model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// Canonical ids or names to keep; `None` keeps everything.
    pub steps: Option<BTreeSet<String>>,
    /// Keep only these layers' `layers.{i}.…` steps.
    pub layer: Option<Vec<usize>>,
    /// Narrow per-head steps to these heads (in increasing order).
    pub head: Option<Vec<usize>>,
}

impl Selection {
    /// Whether some layer's step as large as `[head, query, key]` is kept (then the memory
    /// estimate counts whole layers' scores, not tiles': `config::tiles`).
    pub fn keeps_square(&self) -> bool {
        self.keeps_any(&SQUARE_STEPS)
    }

    /// Whether some layer's `[pos, d_ff]` FFN step is kept (then the estimate counts whole
    /// layers' FFN intermediates, not tiles': `config::tiles`).
    pub fn keeps_wide_ffn(&self) -> bool {
        self.keeps_any(&WIDE_FFN_STEPS)
    }

    /// Whether a step of one of these names is kept in some layer (every step is, without a
    /// `--steps` list).
    fn keeps_any(&self, names: &[&str]) -> bool {
        let Some(steps) = &self.steps else { return true };
        steps.iter().any(|s| names.iter().any(|n| s == n || s.ends_with(&format!(".{n}"))))
    }

    /// What either selection keeps: every step the one keeps and every step the other keeps
    /// (a step as large as the vocabulary, kept only when named, stays kept where one names it).
    pub fn union(&self, other: &Selection) -> Selection {
        let steps = match (&self.steps, &other.steps) {
            (None, None) => None,
            (Some(a), Some(b)) => Some(a.union(b).cloned().collect()),
            (Some(named), None) | (None, Some(named)) => {
                let every = super::steps::CATALOGUE.iter().filter(|d| !d.on_request).map(|d| d.name.to_string());
                Some(every.chain(named.iter().cloned()).collect())
            }
        };
        let both = |a: &Option<Vec<usize>>, b: &Option<Vec<usize>>| match (a, b) {
            (Some(a), Some(b)) => {
                let mut all: Vec<usize> = a.iter().chain(b).copied().collect();
                all.sort_unstable();
                all.dedup();
                Some(all)
            }
            _ => None,
        };
        Selection { steps, layer: both(&self.layer, &other.layer), head: both(&self.head, &other.head) }
    }

    /// Narrows a per-head step recorded with every head to this selection's heads (a step
    /// recorded for a file as well as for the screen: `Trace::split_for_file`, JSON Lines).
    pub fn narrow_heads_of(&self, step: &mut super::Step) {
        if let (Some(hs), true) = (&self.head, step.is_per_head() && step.heads.is_none()) {
            super::narrow_heads(step, hs);
        }
    }

    pub fn wants(&self, id: &str, layer: Option<usize>, name: &str) -> bool {
        if let (Some(want), Some(l)) = (&self.layer, layer) {
            if !want.contains(&l) {
                return false;
            }
        }
        match &self.steps {
            None => true,
            Some(set) => set.contains(id) || set.contains(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_union_keeps_what_either_keeps() {
        let named = |s: &[&str]| Some(s.iter().map(|s| s.to_string()).collect());
        let shown = Selection { steps: named(&["tokens", "logits"]), layer: Some(vec![1]), head: Some(vec![0]) };
        let every = Selection::default();
        let u = shown.union(&every);
        assert!(u.wants("layers.0.attn.q", Some(0), "attn.q"), "every layer and step");
        assert!(u.wants("logits", None, "logits"), "a step kept only when named stays named");
        assert_eq!((u.layer, u.head), (None, None));
        let two = Selection { steps: named(&["attn.k"]), layer: Some(vec![0]), head: Some(vec![2]) };
        let u = shown.union(&two);
        assert_eq!(u.steps, named(&["tokens", "logits", "attn.k"]));
        assert_eq!((u.layer, u.head), (Some(vec![0, 1]), Some(vec![0, 2])));
    }

    #[test]
    fn step_and_layer_selection() {
        let sel = Selection {
            steps: Some(["attn.weights".to_string()].into_iter().collect()),
            layer: Some(vec![1]),
            head: None,
        };
        assert!(sel.wants("layers.1.attn.weights", Some(1), "attn.weights"));
        assert!(!sel.wants("layers.0.attn.weights", Some(0), "attn.weights"));
        assert!(!sel.wants("layers.1.attn.q", Some(1), "attn.q"));
    }
}
