//! `--knockout L[.H]:Q->K`: a knocked-out edge's score becomes −inf before the softmax (its
//! weight exactly 0, the row renormalised over the rest), a hook at each knocked layer's
//! `attn.scores`, so the recorded scores show the change and everything after follows.
//!
//! A query whose every key is hidden (by knockouts, with the causal mask, a sliding window or
//! pads) has a softmax over nothing, 0/0: its weights are defined as 0, so its context is 0
//! (as PyTorch's `scaled_dot_product_attention` does since 2.5 with its `_safe_softmax`;
//! `torch.softmax` and `nn.MultiheadAttention` give NaN there). The forward pass finds those
//! rows in the scores it is given (`model::mask::blind_in`); [`Knockout::blinded`] lists the
//! ones a knockout caused, for the run's note.

use crate::config::{self, ModelConfig};
use crate::hook::{Hook, Site};
use crate::model::mask;
use anyhow::Result;
use candle_core::{Device, Tensor};
use std::collections::BTreeSet;

/// The run's knocked-out edges, in the order given.
#[derive(Debug, Clone, Default)]
pub struct Knockout {
    pub edges: Vec<config::Knockout>,
}

impl Hook for Knockout {
    /// Adds −inf at this layer's knocked-out [head, query, key] entries of `scores` ([head,
    /// query, key] for the queries from position `site.offset` on; a decode step has one).
    fn at(&self, site: &Site, _: &ModelConfig, scores: Tensor) -> Result<Tensor> {
        let (layer, offset) = (site.layer.unwrap_or(0), site.offset);
        let (h, n, keys) = scores.dims3()?;
        let edges: Vec<_> = self
            .edges
            .iter()
            .filter(|k| k.layer == layer && (offset..offset + n).contains(&k.query) && k.key < keys)
            .collect();
        if edges.is_empty() {
            return Ok(scores);
        }
        let mut bias = vec![0f32; h * n * keys];
        for k in edges {
            for head in (0..h).filter(|&g| k.head.is_none_or(|x| x == g)) {
                bias[(head * n + k.query - offset) * keys + k.key] = f32::NEG_INFINITY;
            }
        }
        Ok((scores + Tensor::from_vec(bias, (h, n, keys), &Device::Cpu)?)?)
    }
}

impl Knockout {
    /// The layers with a knocked-out edge, each once, in order.
    pub fn layers(&self) -> BTreeSet<usize> {
        self.edges.iter().map(|k| k.layer).collect()
    }

    /// Layer `layer`'s knocked-out `(head, query, key)` edges over `h` heads, each once.
    fn knocked(&self, layer: usize, h: usize) -> BTreeSet<(usize, usize, usize)> {
        let edges = self.edges.iter().filter(|k| k.layer == layer);
        edges
            .flat_map(|k| (0..h).filter(move |&g| k.head.is_none_or(|x| x == g)).map(move |g| (g, k.query, k.key)))
            .collect()
    }

    /// The `(layer, head, query)` rows of an `n`-token run that see no key because of a
    /// knockout (rows the mask alone hides, a left pad under the causal mask, are not
    /// listed): the rows whose weights are 0 by definition rather than by a softmax.
    pub fn blinded(&self, cfg: &ModelConfig, n: usize) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        for l in self.layers() {
            // Each layer's own mask: a window may be local to some layers.
            let hidden = mask::hidden_keys(cfg, l, (0, n));
            let hidden = hidden.as_deref();
            let by_mask = |q: usize| hidden.is_some_and(|m| m[q * n..(q + 1) * n].iter().all(|&x| x));
            let edges = self.knocked(l, cfg.heads);
            let Some(rows) = mask::blind_rows(hidden, (cfg.heads, 0, n), (n, &edges)) else { continue };
            let new = rows.iter().enumerate().filter(|&(i, &b)| b == 1 && !by_mask(i % n));
            out.extend(new.map(|(i, _)| (l, i / n, i % n)));
        }
        out
    }

    /// The run's note when knockouts leave a query of an `n`-token run (labelled by `tokens`)
    /// without any key: which rows, and that their weights and context are 0 by definition.
    pub fn note(&self, cfg: &ModelConfig, tokens: &[String]) -> Option<String> {
        if self.edges.is_empty() {
            return None;
        }
        let rows = self.blinded(cfg, tokens.len());
        let shown: Vec<String> = rows
            .iter()
            .take(4)
            // Spelled as the tables label it (`·capital`, not `Ġcapital`).
            .map(|&(l, h, q)| {
                let token = crate::trace::label::label(&tokens[q], None);
                format!("layer {l} head {h} query {q} {}", crate::error::quote(&token))
            })
            .collect();
        let more = if rows.len() > 4 { format!(" and {} more", rows.len() - 4) } else { String::new() };
        (!rows.is_empty()).then(|| {
            format!(
                "--knockout hides every key from {}{more}: a softmax over no key is 0/0, so these rows' attention \
                 weights are 0 and their context is 0 (as PyTorch's scaled_dot_product_attention; torch.softmax gives NaN)",
                shown.join(", ")
            )
        })
    }
}
