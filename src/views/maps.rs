//! The attention maps the heatmap, the HTML page and the SVG draw: each head's
//! `attn.weights`, or a derived form (word pieces merged into words, heads averaged).
//! Derived maps are new numbers next to the trace, never a change to a step's values.

use crate::trace::Trace;

/// Merging word pieces: Clark et al. (2019), "What Does BERT Look At?", §2, add up the
/// attention *to* a word's pieces and average the attention *from* them, so rows still sum to 1.
pub const MERGE_RULE: &str =
    "word pieces (\"##…\") merged into words: sum over a word's key pieces, mean over its query pieces";

/// The attention maps to draw, all over the same query (row) and key (column) labels. A map
/// is square (`keys` None, queries and keys the same tokens) except where a trace's keys are
/// another sequence's ([`Trace::keys`]: an encoder–decoder's cross-attention, queries of the
/// decoder's tokens and keys of the encoder's); every renderer draws `rows()` × `cols()`.
#[derive(Debug, Clone, PartialEq)]
pub struct Maps {
    /// Row (query) labels: the tokens' labels (`Trace::label`), or the words with
    /// --merge-pieces; also the column labels of square maps.
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
    /// The columns, when the keys are not the queries' tokens; see [`Maps::key_labels`].
    pub keys: Option<Axis>,
    /// `--show-positions`: the position each row stands for, when the rows were cut
    /// (`views::positions`); None: row i is position (or word) i.
    pub positions: Option<Vec<usize>>,
}

/// The key side of non-square maps, built from [`Trace::keys`] as `Maps`' own fields are
/// from the queries' tokens: labels, spellings, word pieces and pads.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub labels: Vec<String>,
    pub spelled: Vec<String>,
    pub pieces: Option<Vec<Vec<usize>>>,
    pub pad: Vec<bool>,
}

/// One `[query, key]` matrix of weights (rows sum to 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Map {
    pub layer: usize,
    /// The head, or None for the mean over heads.
    pub head: Option<usize>,
    /// Row-major, [`Maps::rows`] × [`Maps::cols`] (query labels × key labels): the weight of
    /// query q on key k is `values[q * cols + k]`.
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

    /// The column (key) labels: the keys' own, else the row labels.
    pub fn key_labels(&self) -> &[String] {
        self.keys.as_ref().map_or(&self.labels, |k| &k.labels)
    }

    /// The key tokens exactly as spelled, as [`Maps::spelled`].
    pub fn spelled_keys(&self) -> &[String] {
        self.keys.as_ref().map_or(&self.spelled, |k| &k.spelled)
    }

    /// Whether each column is a pad, as [`Maps::pad`].
    pub fn key_pad(&self) -> &[bool] {
        self.keys.as_ref().map_or(&self.pad, |k| &k.pad)
    }

    /// Rows (queries) of every map.
    pub fn rows(&self) -> usize {
        self.labels.len()
    }

    /// Row i's label as the tables write it: its position (or word) number, then its label.
    pub fn row_label(&self, i: usize, label: &str) -> String {
        let at = self.positions.as_ref().and_then(|p| p.get(i).copied()).unwrap_or(i);
        format!("{at} {label}")
    }

    /// Columns (keys) of every map.
    pub fn cols(&self) -> usize {
        self.key_labels().len()
    }
}

/// The maps of every recorded `attn.weights` step, merged and averaged as asked. A step's
/// query and key counts are its own shape's, `[head, query, key]`: the trace's tokens down
/// and its key tokens ([`Trace::key_tokens`]) across; a step of other counts has no labels
/// to be drawn with and is left out.
pub fn maps(trace: &Trace, merge: bool, average: bool) -> Maps {
    let query_mask = trace.config.parts.padding.as_ref().map(|p| p.attention_mask.as_slice());
    let queries = axis(&trace.tokens, trace.labels(), merge, query_mask);
    let keys = trace.keys.as_ref().map(|k| axis(&k.tokens, trace.key_labels(), merge, k.attention_mask.as_deref()));
    let (rows, cols) = (trace.tokens.len(), trace.key_tokens().len());
    let words = queries.pieces.as_deref().map(|q| (q, keys.as_ref().and_then(|k| k.pieces.as_deref()).unwrap_or(q)));
    let mut rules = Vec::new();
    if merge {
        rules.push(MERGE_RULE.to_string());
    }
    let mut out = Vec::new();
    let mut averaged = None;
    for step in trace.steps.iter().filter(|s| s.name == "attn.weights") {
        let (Some(v), Some(layer)) = (step.f32s(), step.layer) else { continue };
        if step.shape.len() != 3 || step.shape[1..] != [rows, cols] {
            continue;
        }
        let (groups, size) = (step.shape[0], rows * cols);
        let heads: Vec<usize> = (0..groups).map(|g| step.heads.as_ref().map_or(g, |hs| hs[g])).collect();
        let mut layer_maps: Vec<Map> = (0..groups)
            .map(|g| {
                let m = &v[g * size..(g + 1) * size];
                let values = match words {
                    Some(ws) => merge_pieces(m, cols, ws),
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
    let Axis { labels, spelled, pieces, pad } = queries;
    Maps { labels, spelled, pieces, averaged, rules, maps: out, pad, keys, positions: None }
}

/// One side of the maps from its tokens and their labels: words with --merge-pieces, and
/// which are pads by `mask` (an `attention_mask`).
fn axis(tokens: &[String], labels: Vec<String>, merge: bool, mask: Option<&[u8]>) -> Axis {
    let pieces = merge.then(|| words(tokens));
    let join = |all: Vec<String>| match &pieces {
        Some(ws) => ws.iter().map(|w| w.iter().map(|&p| all[p].trim_start_matches("##")).collect()).collect(),
        None => all,
    };
    let (labels, spelled): (Vec<String>, Vec<String>) = (join(labels), join(tokens.to_vec()));
    let pad = padding(mask, pieces.as_deref(), labels.len());
    Axis { labels, spelled, pieces, pad }
}

/// Which labels are pads: a token whose `attention_mask` is 0, or a word all of whose pieces
/// are.
fn padding(mask: Option<&[u8]>, pieces: Option<&[Vec<usize>]>, n: usize) -> Vec<bool> {
    let Some(mask) = mask else { return vec![false; n] };
    let is_pad = |i: usize| mask.get(i) == Some(&0);
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

/// Word-level weights: W'[a][b] = mean over query pieces q of a of Σ over key pieces k of b of
/// W[q][k], for `m` of `cols` columns: rows merged by the query words, columns by the key words.
fn merge_pieces(m: &[f32], cols: usize, (queries, keys): (&[Vec<usize>], &[Vec<usize>])) -> Vec<f32> {
    let mut out = Vec::with_capacity(queries.len() * keys.len());
    for qa in queries {
        for kb in keys {
            let sum: f64 = qa.iter().flat_map(|&q| kb.iter().map(move |&k| m[q * cols + k] as f64)).sum();
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
        let ws = [vec![0, 1], vec![2]];
        let w = merge_pieces(&m, 3, (&ws, &ws));
        let want = [(0.75 + 0.4) / 2.0, (0.25 + 0.6) / 2.0, 1.0, 0.0];
        for (a, b) in w.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{w:?}");
        }
        assert_eq!(span(&[0, 1, 2]), "0–2");
        assert_eq!(span(&[3]), "3");
    }

    /// A trace whose maps are 3 queries × 4 keys of another sequence, its last key a pad, and
    /// a square step that such a trace cannot label.
    fn non_square() -> Trace {
        use crate::trace::{steps, KeyTokens, Step, Values};
        let strs = |s: &[&str]| s.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        let step = |shape: Vec<usize>, values: Vec<f32>| Step {
            id: steps::layer_id(0, "attn.weights"),
            layer: Some(0),
            name: "attn.weights".into(),
            dims: vec!["head", "query_pos", "key_pos"],
            shape,
            heads: None,
            values: Values::F32(values),
        };
        let w = vec![0.1, 0.2, 0.3, 0.4, 0.25, 0.25, 0.25, 0.25, 0.0, 0.5, 0.5, 0.0];
        Trace {
            tokens: strs(&["le", "chat", "##on"]),
            keys: Some(KeyTokens {
                tokens: strs(&["the", "kit", "##ten", "[PAD]"]),
                texts: None,
                attention_mask: Some(vec![1, 1, 1, 0]),
                ids: None,
            }),
            steps: vec![step(vec![1, 3, 4], w), step(vec![1, 3, 3], vec![0.0; 9])],
            ..Default::default()
        }
    }

    #[test]
    fn non_square_maps_take_rows_from_queries_and_columns_from_keys() {
        let m = maps(&non_square(), false, false);
        assert_eq!((m.rows(), m.cols(), m.maps.len()), (3, 4, 1), "the 3 × 3 step has no labels");
        assert_eq!(m.labels, ["le", "chat", "##on"]);
        assert_eq!(m.key_labels(), ["the", "kit", "##ten", "[PAD]"]);
        assert_eq!((m.pad.as_slice(), m.key_pad()), (&[false; 3][..], &[false, false, false, true][..]));
        assert_eq!(m.maps[0].values[4..8], [0.25; 4]);
        // Merged: rows by the query words (le, chaton), columns by the key words.
        let m = maps(&non_square(), true, true);
        assert_eq!(m.labels, ["le", "chaton"]);
        assert_eq!(m.key_labels(), ["the", "kitten", "[PAD]"]);
        assert_eq!(m.keys.as_ref().and_then(|k| k.pieces.clone()), Some(vec![vec![0], vec![1, 2], vec![3]]));
        assert_eq!(m.key_pad(), [false, false, true]);
        let want = [0.1, 0.5, 0.4, 0.125, 0.75, 0.125];
        assert!(m.maps[0].values.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6), "{:?}", m.maps[0].values);
        // A square trace has no key side: the columns are the rows' labels.
        let square = Trace { keys: None, tokens: non_square().tokens, ..non_square() };
        let m = maps(&square, false, false);
        assert_eq!((m.keys.is_none(), m.cols(), m.maps.len()), (true, 3, 1));
    }
}
