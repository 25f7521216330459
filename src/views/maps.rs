//! The attention maps the heatmap, the HTML page and the SVG draw: each head's
//! `attn.weights`, or a derived form (word pieces merged into words, heads averaged).
//! Derived maps are new numbers next to the trace, never a change to a step's values.

use crate::trace::Trace;

/// Merging word pieces: Clark et al. (2019), "What Does BERT Look At?", §2, add up the
/// attention *to* a word's pieces and average the attention *from* them, so rows still sum to 1.
pub const MERGE_RULE: &str =
    "word pieces (\"##…\") merged into words: sum over a word's key pieces, mean over its query pieces";

/// The attention maps to draw, all over the same labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Maps {
    /// Row and column labels: the tokens' labels (`Trace::label`), or the words with
    /// --merge-pieces.
    pub labels: Vec<String>,
    /// The same, from the tokens exactly as spelled (JSON's `views.labels`).
    pub spelled: Vec<String>,
    /// With --merge-pieces: each word's token positions.
    pub pieces: Option<Vec<Vec<usize>>>,
    /// With --average-heads: the heads each mean is over.
    pub averaged: Option<Vec<usize>>,
    /// One sentence per transformation applied, for the output to state.
    pub rules: Vec<String>,
    /// In trace order: by layer, then head.
    pub maps: Vec<Map>,
    /// With `--pad-to`: whether each label is padding (every one of its pieces is a pad,
    /// `attention_mask` 0), drawn as such; all false without padding.
    pub pad: Vec<bool>,
}

/// One `[query, key]` matrix of weights (rows sum to 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Map {
    pub layer: usize,
    /// The head, or None for the mean over heads.
    pub head: Option<usize>,
    /// Row-major, `labels.len()` × `labels.len()`.
    pub values: Vec<f32>,
}

impl Map {
    /// "head 3" or "mean over heads".
    pub fn head_label(&self) -> String {
        self.head.map_or("mean over heads".to_string(), |h| format!("head {h}"))
    }
}

impl Maps {
    /// The maps of one layer.
    pub fn layer(&self, layer: usize) -> Vec<&Map> {
        self.maps.iter().filter(|m| m.layer == layer).collect()
    }

    /// The layers that have maps, in order.
    pub fn layers(&self) -> Vec<usize> {
        let mut ls: Vec<usize> = self.maps.iter().map(|m| m.layer).collect();
        ls.dedup();
        ls
    }
}

/// The maps of every recorded `attn.weights` step, merged and averaged as asked.
pub fn maps(trace: &Trace, merge: bool, average: bool) -> Maps {
    let n = trace.tokens.len();
    let pieces = merge.then(|| words(&trace.tokens));
    let join = |all: Vec<String>| match &pieces {
        Some(ws) => ws.iter().map(|w| w.iter().map(|&p| all[p].trim_start_matches("##")).collect()).collect(),
        None => all,
    };
    let (labels, spelled): (Vec<String>, Vec<String>) = (join(trace.labels()), join(trace.tokens.clone()));
    let mut rules = Vec::new();
    if merge {
        rules.push(MERGE_RULE.to_string());
    }
    let mut out = Vec::new();
    let mut averaged = None;
    for step in trace.steps.iter().filter(|s| s.name == "attn.weights") {
        let (Some(v), Some(layer)) = (step.f32s(), step.layer) else { continue };
        let groups = step.shape[0];
        let heads: Vec<usize> = (0..groups).map(|g| step.heads.as_ref().map_or(g, |hs| hs[g])).collect();
        let mut layer_maps: Vec<Map> = (0..groups)
            .map(|g| {
                let m = &v[g * n * n..(g + 1) * n * n];
                let values = match &pieces {
                    Some(ws) => merge_pieces(m, n, ws),
                    None => m.to_vec(),
                };
                Map { layer, head: Some(heads[g]), values }
            })
            .collect();
        if average {
            layer_maps = vec![Map { layer, head: None, values: mean(&layer_maps) }];
            averaged = Some(heads);
        }
        out.extend(layer_maps);
    }
    if let Some(hs) = &averaged {
        rules.push(format!("mean over heads {}", span(hs)));
    }
    let pad = padding(trace, pieces.as_deref(), labels.len());
    Maps { labels, spelled, pieces, averaged, rules, maps: out, pad }
}

/// Which labels are pads: a token whose `attention_mask` is 0, or a word all of whose pieces
/// are.
fn padding(trace: &Trace, pieces: Option<&[Vec<usize>]>, n: usize) -> Vec<bool> {
    let Some(p) = &trace.config.parts.padding else { return vec![false; n] };
    let is_pad = |i: usize| p.attention_mask.get(i) == Some(&0);
    match pieces {
        Some(ws) => ws.iter().map(|w| w.iter().all(|&i| is_pad(i))).collect(),
        None => (0..n).map(is_pad).collect(),
    }
}

/// "0–11" for a run of heads, else a comma list.
fn span(hs: &[usize]) -> String {
    match hs {
        [one] => one.to_string(),
        [a, .., b] if b - a + 1 == hs.len() => format!("{a}–{b}"),
        _ => hs.iter().map(|h| h.to_string()).collect::<Vec<_>>().join(", "),
    }
}

/// Groups token positions into words: a token starting with "##" joins the one before it.
pub fn words(tokens: &[String]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        match out.last_mut() {
            Some(w) if t.starts_with("##") => w.push(i),
            _ => out.push(vec![i]),
        }
    }
    out
}

/// Word-level weights: W'[a][b] = mean over query pieces q of a of Σ over key pieces k of b of W[q][k].
fn merge_pieces(m: &[f32], n: usize, words: &[Vec<usize>]) -> Vec<f32> {
    let mut out = Vec::with_capacity(words.len() * words.len());
    for qa in words {
        for kb in words {
            let sum: f64 = qa.iter().flat_map(|&q| kb.iter().map(move |&k| m[q * n + k] as f64)).sum();
            out.push((sum / qa.len() as f64) as f32);
        }
    }
    out
}

/// The element-wise mean of the maps.
fn mean(maps: &[Map]) -> Vec<f32> {
    let len = maps.first().map_or(0, |m| m.values.len());
    (0..len).map(|i| (maps.iter().map(|m| m.values[i] as f64).sum::<f64>() / maps.len() as f64) as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_join_the_word_before() {
        let t: Vec<String> = ["[CLS]", "em", "##bed", "##ding", "s", "[SEP]"].iter().map(|s| s.to_string()).collect();
        assert_eq!(words(&t), vec![vec![0], vec![1, 2, 3], vec![4], vec![5]]);
    }

    #[test]
    fn merged_rows_still_sum_to_one() {
        // Tokens a ##b c; query rows [.5 .25 .25], [.2 .2 .6], [0 1 0]: the word "ab" takes
        // the mean of the first two rows' sums over key pieces.
        let m = [0.5, 0.25, 0.25, 0.2, 0.2, 0.6, 0.0, 1.0, 0.0];
        let w = merge_pieces(&m, 3, &[vec![0, 1], vec![2]]);
        let want = [(0.75 + 0.4) / 2.0, (0.25 + 0.6) / 2.0, 1.0, 0.0];
        for (a, b) in w.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{w:?}");
        }
        assert_eq!(span(&[0, 1, 2]), "0–2");
        assert_eq!(span(&[3]), "3");
    }
}
