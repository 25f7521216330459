//! The numbers behind the real-model summary table: per layer and head, the three strongest
//! links between ordinary tokens (query → key, weight), leaving out a token's attention to
//! itself and the [CLS]/[SEP]-style markers, and the mean weight the head puts on those
//! markers (BERT heads often park attention there, which would otherwise fill every
//! "strongest" list). For a mixture of experts, each layer also says which experts each
//! token went to, with their weights (`ffn.router.chosen`, `ffn.router.weights`).
//! `render::summary` lays them out.

use crate::trace::rows::{share, WeightRows};
use crate::trace::{steps, Recorder, Step, Trace, Values};
use std::sync::{Arc, Mutex};

/// Links shown per head.
const TOP: usize = 3;

pub fn is_marker(token: &str) -> bool {
    token.len() > 2
        && token.starts_with('[')
        && token.ends_with(']')
        && token[1..token.len() - 1].chars().all(|c| c.is_ascii_uppercase())
}

/// One head's row of the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadLinks {
    pub head: usize,
    /// The strongest links as (query, key, weight), strongest first.
    pub links: Links,
    /// The mean over queries of the weight on marker keys.
    pub on_markers: f32,
}

/// One layer's rows.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerLinks {
    pub layer: usize,
    pub heads: Vec<HeadLinks>,
    /// What the "markers" column measures: `markers` (BERT's [CLS]/[SEP]) or `position 0`
    /// (a decoder's first token, where many heads park attention: the attention sink of
    /// Xiao et al. 2023).
    pub marker: &'static str,
    /// A mixture of experts: per position, the experts the token went to with their
    /// weights, most probable first.
    pub routing: Option<Routing>,
}

/// Per position, (expert, weight) for each expert the token ran, most probable first.
pub type Routing = Vec<Vec<(usize, f32)>>;

/// The summary of every recorded `attn.weights` step, with its layer's routing if recorded.
pub fn summarize(trace: &Trace) -> Vec<LayerLinks> {
    let keys = trace.keys.as_ref().map(|k| k.tokens.as_slice());
    let mut reducer = Reducer::new(&trace.tokens, keys, trace.config.parts.lm_head.is_some());
    let mut rows: Vec<LayerLinks> =
        trace.steps.iter().filter(|s| s.name == "attn.weights").map(|step| reducer.layer(step)).collect();
    for row in &mut rows {
        let step = |name: &str| trace.get(&steps::layer_id(row.layer, name));
        if let (Some(chosen), Some(weights)) = (step("ffn.router.chosen"), step("ffn.router.weights")) {
            row.routing = routing(chosen, weights);
        }
    }
    rows
}

/// Each position's experts and weights from a layer's `ffn.router.chosen` and `.weights`.
fn routing(chosen: &Step, weights: &Step) -> Option<Routing> {
    let (Values::Int(ids), Some(w)) = (&chosen.values, weights.f32s()) else { return None };
    let k = *chosen.shape.last()?;
    (k > 0 && ids.len() == w.len())
        .then(|| ids.chunks(k).zip(w.chunks(k)).map(|(e, w)| e.iter().map(|&e| e as usize).zip(w.to_vec()).collect()))
        .map(Iterator::collect)
}

/// Summarizes `attn.weights` steps one at a time, or a layer's weights tile by tile as the model
/// computes them (`add_rows`: the summary table alone, `Plan::reduce_summary`), so that no
/// layer's weights need be held whole.
pub struct Reducer {
    markers: Markers,
    marker: &'static str,
    /// A layer's `ffn.router.chosen`, until its `ffn.router.weights` arrives.
    chosen: Option<Step>,
    /// The layer whose weights are arriving in tiles ([`Reducer::add_rows`]): each head's so far.
    tile: Vec<HeadRows>,
    /// `--head`: the heads kept, if narrowed.
    kept: Option<Vec<usize>>,
}

/// Which queries and which keys are markers; `keys` None when the keys are the queries'
/// tokens (a square map, where a token's attention to itself is not a link either).
struct Markers {
    queries: Vec<bool>,
    keys: Option<Vec<bool>>,
}

impl Reducer {
    /// For a run over `tokens` (and `keys`, the key tokens of non-square maps, `Trace::keys`);
    /// a decoder's marker is its first token, an encoder's its [CLS]/[SEP]-style tokens.
    pub fn new(tokens: &[String], keys: Option<&[String]>, decoder: bool) -> Self {
        let markers = |tokens: &[String]| -> Vec<bool> {
            if decoder {
                (0..tokens.len()).map(|i| i == 0).collect()
            } else {
                tokens.iter().map(|t| is_marker(t)).collect()
            }
        };
        let markers = Markers { queries: markers(tokens), keys: keys.map(markers) };
        let marker = if decoder { "position 0" } else { "markers" };
        Reducer { markers, marker, chosen: None, tile: Vec::new(), kept: None }
    }

    /// One `attn.weights` step's rows of the summary.
    pub fn layer(&mut self, step: &Step) -> LayerLinks {
        LayerLinks {
            marker: self.marker,
            layer: step.layer.unwrap_or(0),
            heads: heads(step, &self.markers)
                .into_iter()
                .map(|(head, links, on_markers)| HeadLinks { head, links, on_markers })
                .collect(),
            routing: None,
        }
    }

    /// Adds a tile of a layer's weights (`trace::rows`); its last tile makes the layer's row.
    pub fn add_rows(&mut self, tile: &WeightRows, rows: &mut Vec<LayerLinks>) {
        if tile.first == 0 {
            self.tile = vec![HeadRows::default(); tile.heads];
        }
        let (markers, size) = (&self.markers, (tile.first, tile.keys, tile.width));
        let mut heads: Vec<(usize, &mut HeadRows)> = self.tile.iter_mut().enumerate().collect();
        share(&mut heads, tile.values.len(), |(g, head)| head.add(tile.head(*g), size, markers));
        if tile.is_last() {
            let kept = |g: &usize| self.kept.as_ref().is_none_or(|hs| hs.contains(g));
            let heads = std::mem::take(&mut self.tile).into_iter().enumerate().filter(|(g, _)| kept(g));
            let heads = heads.map(|(head, h)| HeadLinks {
                head,
                links: h.links,
                on_markers: h.on_markers / tile.queries as f32,
            });
            rows.push(LayerLinks { marker: self.marker, layer: tile.layer, heads: heads.collect(), routing: None });
        }
    }

    /// Adds one recorded step to `rows`: an `attn.weights` step is a layer's row; a layer's
    /// router steps (after its weights) are its routing.
    pub fn add(&mut self, step: Step, rows: &mut Vec<LayerLinks>) {
        match step.name.as_str() {
            "attn.weights" => rows.push(self.layer(&step)),
            "ffn.router.chosen" => self.chosen = Some(step),
            "ffn.router.weights" => {
                let Some(chosen) = self.chosen.take().filter(|c| c.layer == step.layer) else { return };
                if let Some(row) = rows.iter_mut().rev().find(|r| Some(r.layer) == step.layer) {
                    row.routing = routing(&chosen, &step);
                }
            }
            _ => {}
        }
    }
}

/// Reduces each layer's weights as the model computes them, tile by tile (`trace::rows`), and
/// hands each router step `rec` records to the same [`Reducer`]: the summary's rows gather
/// in the returned list as the model runs (`Plan::reduce_summary`); `heads` is `--head`.
pub fn reduce_as_recorded(
    rec: &mut Recorder,
    tokens: &[String],
    decoder: bool,
    heads: Option<Vec<usize>>,
) -> Arc<Mutex<Vec<LayerLinks>>> {
    let links = Arc::new(Mutex::new(Vec::new()));
    let reducer = Arc::new(Mutex::new(Reducer { kept: heads, ..Reducer::new(tokens, None, decoder) }));
    let (sink, by_steps) = (links.clone(), reducer.clone());
    rec.stream(
        Box::new(move |step| {
            let mut rows = sink.lock().map_err(|_| std::io::Error::other("summary lock"))?;
            let mut reducer = by_steps.lock().map_err(|_| std::io::Error::other("summary lock"))?;
            reducer.add(step, &mut rows);
            Ok(())
        }),
        false,
    );
    let sink = links.clone();
    rec.read_rows(Box::new(move |tile| {
        if let (Ok(mut rows), Ok(mut reducer)) = (sink.lock(), reducer.lock()) {
            reducer.add_rows(tile, &mut rows);
        }
    }));
    links
}

/// A head's strongest links as (query, key, weight).
pub type Links = Vec<(usize, usize, f32)>;

/// For each head of an `attn.weights` step, `[head, query, key]` (keys of another sequence
/// when `markers.keys` is given): (head number, top links, mean weight on markers).
fn heads(step: &Step, markers: &Markers) -> Vec<(usize, Links, f32)> {
    let Some(v) = step.f32s() else { return Vec::new() };
    let [groups, rows, cols] = step.shape[..] else { return Vec::new() };
    (0..groups)
        .map(|g| {
            let mut head = HeadRows::default();
            head.add(&v[g * rows * cols..(g + 1) * rows * cols], (0, cols, cols), markers);
            let h = step.heads.as_ref().map_or(g, |hs| hs[g]);
            (h, head.links, head.on_markers / rows as f32)
        })
        .collect()
}

/// One head's strongest links and summed weight on markers over its queries so far.
#[derive(Default, Clone)]
struct HeadRows {
    links: Links,
    on_markers: f32,
}

impl HeadRows {
    /// Rows `m` of queries from `first` on, over `cols` keys: each row's first `width`
    /// weights (the rest are 0).
    fn add(&mut self, m: &[f32], (first, cols, width): (usize, usize, usize), markers: &Markers) {
        let key_markers = markers.keys.as_deref().unwrap_or(&markers.queries);
        let marked = |ms: &[bool], i: usize| ms.get(i).copied().unwrap_or(false);
        // A 0 adds nothing to a sum: the markers after `width` are left out.
        let marker_keys: Vec<usize> = (0..width).filter(|&k| marked(key_markers, k)).collect();
        let to_itself = markers.keys.is_none();
        for (i, row) in m.chunks_exact(width.max(1)).enumerate() {
            let q = first + i;
            self.on_markers += marker_keys.iter().map(|&k| row[k]).sum::<f32>();
            if marked(&markers.queries, q) {
                continue;
            }
            let weights = row.iter().copied().chain(std::iter::repeat_n(0.0, cols - width));
            for (k, w) in weights.enumerate() {
                // Most links lose to the weakest of a full list: one comparison each.
                let full = self.links.len() == TOP;
                if full && w.total_cmp(&self.links[TOP - 1].2) == std::cmp::Ordering::Less {
                    if k >= width {
                        break; // the rest are 0s too
                    }
                    continue;
                }
                if !(marked(key_markers, k) || to_itself && k == q) {
                    offer(&mut self.links, (q, k, w));
                }
            }
        }
    }
}

/// Puts `link` into `top` (at most `TOP` links, strongest first) if it is among the `TOP`
/// strongest so far; ties go to the earlier (query, key), so the choice is the same on every
/// machine. A short sorted list, rather than sorting all n² links of every head (MiniLM at
/// 256 tokens: 172 ms of sorting for a 17 KB table).
fn offer(top: &mut Links, link: (usize, usize, f32)) {
    let beats = |a: &(usize, usize, f32), b: &(usize, usize, f32)| {
        b.2.total_cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))) == std::cmp::Ordering::Less
    };
    if top.len() == TOP && !beats(&link, &top[TOP - 1]) {
        return;
    }
    let at = top.iter().position(|t| beats(&link, t)).unwrap_or(top.len());
    top.insert(at, link);
    top.truncate(TOP);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `TOP` largest of `links`, as [`offer`] keeps them.
    fn top_links(links: impl Iterator<Item = (usize, usize, f32)>) -> Links {
        let mut top: Links = Vec::with_capacity(TOP + 1);
        links.for_each(|link| offer(&mut top, link));
        top
    }

    #[test]
    fn top_links_match_a_full_sort() {
        // Ties, NaN and infinities included; the full sort is the definition.
        let values = [0.5, 0.1, 0.5, f32::NAN, 0.9, -1.0, 0.9, f32::INFINITY, 0.0, 0.5, 0.2, 0.9];
        for len in 0..=values.len() {
            let links: Links = values[..len].iter().enumerate().map(|(i, &v)| (i / 4, i % 4, v)).collect();
            let mut sorted = links.clone();
            sorted.sort_by(|a, b| b.2.total_cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
            sorted.truncate(TOP);
            let got = top_links(links.into_iter());
            let bits = |l: &Links| l.iter().map(|&(q, k, v)| (q, k, v.to_bits())).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&sorted), "first {len} links");
        }
    }

    #[test]
    fn links_of_a_non_square_map_run_from_queries_to_the_other_sequences_keys() {
        use crate::trace::{steps, KeyTokens, Values};
        let strs = |s: &[&str]| s.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        let trace = Trace {
            tokens: strs(&["a", "b"]),
            keys: Some(KeyTokens { tokens: strs(&["[CLS]", "x", "y"]), ..Default::default() }),
            steps: vec![Step {
                id: steps::layer_id(0, "attn.weights"),
                layer: Some(0),
                name: "attn.weights".into(),
                dims: vec!["head", "query_pos", "key_pos"],
                shape: vec![1, 2, 3],
                heads: None,
                values: Values::F32(vec![0.5, 0.3, 0.2, 0.1, 0.6, 0.3]),
            }],
            ..Default::default()
        };
        let head = &summarize(&trace)[0].heads[0];
        // Query 1 → key 1 is a link (another sequence's token), the [CLS] key a marker.
        assert_eq!(head.links, vec![(1, 1, 0.6), (0, 1, 0.3), (1, 2, 0.3)]);
        assert!((head.on_markers - 0.3).abs() < 1e-6);
    }

    #[test]
    fn markers() {
        assert!(super::is_marker("[CLS]") && super::is_marker("[SEP]"));
        assert!(!super::is_marker("[x]") && !super::is_marker("shoes") && !super::is_marker("[]"));
    }
}
