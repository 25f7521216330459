//! What each generated token looked at: for the token chosen at step s (step 0's last
//! position for the first, decode step i's one position for token i + 1), the attention row
//! of that position in every recorded layer, averaged over the recorded heads, and its
//! strongest earlier positions. Also the generated tokens × every position map of each layer
//! that the heatmap and SVG draw, and every head's row of every layer ([`rows`]) that the HTML
//! page's generation view draws.

use super::grid::Grid;
use crate::trace::generate::{prefix, Generation};
use crate::trace::{Step, Trace};

/// The positions a generated token's step attended to most in one layer.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerSources {
    pub layer: usize,
    /// (position, weight averaged over the recorded heads), strongest first.
    pub top: Vec<(usize, f32)>,
}

/// One generated token's sources, per recorded layer.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenSources {
    /// Its index in `Generation::tokens`.
    pub token: usize,
    pub layers: Vec<LayerSources>,
    /// The strongest positions of the row averaged over every recorded layer and head,
    /// leaving out position 0 when there are others: most heads of a trained model park
    /// their attention on the first token (an "attention sink"), which would top every row.
    pub overall: Vec<(usize, f32)>,
}

/// One layer's attention of the steps that chose the generated tokens, averaged over the
/// recorded heads, as a grid: row i is the step that chose token i, over every position
/// before it (`prompt + i` keys; later keys are 0, as a causal mask makes them).
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationMap {
    pub layer: usize,
    /// Generated tokens down (`position label`), every position across, 0 to the largest.
    pub grid: Grid,
}

/// The attention rows of the steps that chose the generated tokens, each head's and their
/// means: what the HTML page's generation view colours the earlier tokens by.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationRows {
    /// The recorded layers, in order.
    pub layers: Vec<usize>,
    /// The recorded heads' numbers (all of them, or those `--head` kept).
    pub heads: Vec<usize>,
    /// One entry per generated token, None when a layer's weights of its step are missing.
    pub tokens: Vec<Option<TokenRows>>,
}

/// The rows of the step that chose one generated token (index i): every row has `prompt + i`
/// weights, one per earlier position.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenRows {
    /// `[layer][head]`: each recorded head's row, as recorded.
    pub heads: Vec<Vec<Vec<f32>>>,
    /// `[layer]`: the mean over the recorded heads (as the table's sources and the maps).
    pub mean_heads: Vec<Vec<f32>>,
    /// The mean of those over the recorded layers.
    pub mean: Vec<f32>,
}

/// Every generated token's rows in every recorded layer; None without a generation or
/// without recorded weights.
pub fn rows(trace: &Trace) -> Option<GenerationRows> {
    let g = trace.generation.as_ref()?;
    let layers = layers_of(trace);
    let heads = head_rows(trace, g, 0, *layers.first()?)?.0;
    let tokens = (0..g.tokens.len())
        .map(|i| {
            let heads: Vec<Vec<Vec<f32>>> =
                layers.iter().map(|&l| Some(head_rows(trace, g, i, l)?.1)).collect::<Option<_>>()?;
            let mean_heads: Vec<Vec<f32>> = heads.iter().map(|h| mean(h)).collect();
            let mean = mean(&mean_heads);
            Some(TokenRows { heads, mean_heads, mean })
        })
        .collect();
    Some(GenerationRows { layers, heads, tokens })
}

/// Every generated token's strongest `top` sources per recorded layer; None without a
/// generation or without the weights of the steps that chose its tokens.
pub fn sources(trace: &Trace, top: usize) -> Option<Vec<TokenSources>> {
    let g = trace.generation.as_ref()?;
    let rows: Vec<TokenSources> = (0..g.tokens.len())
        .map(|i| {
            let rows: Vec<(usize, Vec<f32>)> =
                layers_of(trace).into_iter().filter_map(|l| Some((l, mean_row(trace, g, i, l)?))).collect();
            let layers = rows.iter().map(|(l, row)| LayerSources { layer: *l, top: strongest(row, top) }).collect();
            let all = mean(&rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>());
            let skip = usize::from(all.len() > 1);
            let overall = strongest(&all[skip..], top).into_iter().map(|(k, v)| (k + skip, v)).collect();
            TokenSources { token: i, layers, overall }
        })
        .collect();
    rows.iter().any(|r| !r.layers.is_empty()).then_some(rows)
}

/// The `top` largest entries of `row` as (index, value), largest first, ties by lower index.
fn strongest(row: &[f32], top: usize) -> Vec<(usize, f32)> {
    let mut order: Vec<usize> = (0..row.len()).collect();
    order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
    order.into_iter().take(top).map(|k| (k, row[k])).collect()
}

/// Each recorded layer's map of the generated tokens over every position.
pub fn maps(trace: &Trace) -> Vec<GenerationMap> {
    let Some(g) = trace.generation.as_ref() else { return Vec::new() };
    let keys = g.prompt_tokens + g.tokens.len().saturating_sub(1);
    let labels = labels(trace);
    let cols: Vec<String> = (0..keys).map(|k| format!("{k} {}", labels[k])).collect();
    let rows: Vec<String> =
        (0..g.tokens.len()).map(|i| format!("{} {}", g.prompt_tokens + i, labels[g.prompt_tokens + i])).collect();
    layers_of(trace)
        .into_iter()
        .filter_map(|l| {
            let mut values = vec![0f32; g.tokens.len() * keys];
            for i in 0..g.tokens.len() {
                let row = mean_row(trace, g, i, l)?;
                values[i * keys..i * keys + row.len()].copy_from_slice(&row);
            }
            let hi = values.iter().copied().fold(0f32, f32::max);
            let grid = Grid {
                down: "generated tokens",
                signed: false,
                across: "positions",
                rows: rows.clone(),
                cols: cols.clone(),
                values,
                lo: 0.0,
                hi: if hi > 0.0 { hi } else { 1.0 },
            };
            Some(GenerationMap { layer: l, grid })
        })
        .collect()
}

/// How the renderers title a layer's generation map.
pub fn title(layer: usize) -> String {
    format!("generation · layer {layer} · mean over heads")
}

/// The layers whose prompt weights were recorded.
fn layers_of(trace: &Trace) -> Vec<usize> {
    trace.steps.iter().filter(|s| s.name == "attn.weights").filter_map(|s| s.layer).collect()
}

/// Layer `l`'s attention row of the step that chose generated token `i`, averaged over the
/// recorded heads: `[prompt + i]`.
fn mean_row(trace: &Trace, g: &Generation, i: usize, l: usize) -> Option<Vec<f32>> {
    Some(mean(&head_rows(trace, g, i, l)?.1))
}

/// Layer `l`'s step that chose generated token `i` (the prompt's for the first, decode step
/// `i`'s for the others) and the row of it that did: `[head, prompt + i]`, with the
/// recorded heads' numbers.
fn head_rows(trace: &Trace, g: &Generation, i: usize, l: usize) -> Option<(Vec<usize>, Vec<Vec<f32>>)> {
    let (step, row): (&Step, usize) = if i == 0 {
        let s = trace.steps.iter().find(|s| s.name == "attn.weights" && s.layer == Some(l))?;
        (s, g.prompt_tokens - 1)
    } else {
        let id = format!("{}layers.{l}.attn.weights", prefix(i));
        (g.steps.get(i - 1)?.steps.iter().find(|s| s.id == id)?, 0)
    };
    let [heads, queries, keys] = step.shape[..] else { return None };
    let v = step.f32s()?;
    let rows = (0..heads).map(|h| v[(h * queries + row) * keys..][..keys].to_vec()).collect();
    Some((step.heads.clone().unwrap_or_else(|| (0..heads).collect()), rows))
}

/// The mean of rows of one length, each divided by their count and summed in order.
fn mean(rows: &[Vec<f32>]) -> Vec<f32> {
    let mut out = vec![0f32; rows.first().map_or(0, Vec::len)];
    for row in rows {
        for (o, x) in out.iter_mut().zip(row) {
            *o += x / rows.len() as f32;
        }
    }
    out
}

/// The label of every position of the generated sequence: the prompt's, then the generated
/// tokens' (as the predictions label them).
pub fn labels(trace: &Trace) -> Vec<String> {
    let mut out = trace.labels();
    if let Some(g) = &trace.generation {
        out.extend(g.tokens.iter().map(|t| t.chosen.label().unwrap_or_else(|| format!("#{}", t.chosen.id))));
    }
    out
}
