//! Per-head statistics (`--stats`) and attention rollout (`--rollout`), derived from the
//! trace's own `attn.weights` — or, for the statistics of a run that does not record them,
//! from each tile of weights as the model computes it ([`StatsRows`], `trace::rows`), with
//! the same sums in the same order. Definitions, for one head's weights w[q][k] over n tokens
//! (each row sums to 1), averaged over the queries q:
//!
//! - entropy: −Σ_k w[q][k]·ln w[q][k] (nats; 0 when a row is one-hot, ln n when uniform);
//! - mean distance: Σ_k w[q][k]·|q − k| (how far back or ahead a head looks, in tokens);
//! - first token: w[q][0] (the "attention sink" of decoders; BERT's [CLS]);
//! - previous token: w[q][q−1], over q ≥ 1 (1 for a pure previous-token head).
//!
//! Rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", §3): per
//! layer l, Ā_l is the mean of the heads' weights and A_l = ½·Ā_l + ½·I (the residual
//! connection as an identity, rows still summing to 1); the rollout to layer l is
//! R_l = A_l·R_{l−1} with R_0 = A_0. R_l[q][k] says how much of token k reaches position q.
//!
//! Both are square by nature (a distance q − k, a previous token, a product of layers' maps
//! all need queries and keys to be the same tokens), so they read square maps only: a
//! non-square map (keys of another sequence, `Trace::keys`) is left out of them.

use crate::trace::rows::{share, WeightRows};
use crate::trace::{Step, Trace};

/// The rule, stated in the output beside the numbers.
pub const ROLLOUT_RULE: &str =
    "rollout (Abnar & Zuidema 2020): A_l = ½·mean over heads + ½·I, R_l = A_l·R_(l−1), R_0 = A_0";

/// One head's statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadStats {
    pub layer: usize,
    pub head: usize,
    pub entropy: f64,
    pub mean_distance: f64,
    pub first_token: f64,
    /// None for a single token (there is no previous one).
    pub previous_token: Option<f64>,
    /// With `--induction N`: the mean weight from each token of the second repeat to the
    /// token after its first occurrence (Olsson et al. 2022).
    pub induction: Option<f64>,
}

/// The weights of each recorded square `attn.weights` step as (layer, head, n×n row-major
/// f64).
fn maps(trace: &Trace) -> Vec<(usize, usize, Vec<f64>)> {
    squares(trace)
        .flat_map(|(step, layer, n)| {
            let v = step.f32s().unwrap_or_default();
            (0..step.shape[0]).map(move |g| {
                let head = step.heads.as_ref().map_or(g, |hs| hs[g]);
                (layer, head, v[g * n * n..(g + 1) * n * n].iter().map(|&x| x as f64).collect())
            })
        })
        .collect()
}

/// The recorded square `attn.weights` steps, with their layer and size.
fn squares(trace: &Trace) -> impl Iterator<Item = (&Step, usize, usize)> {
    let square = trace.keys.is_none();
    trace.steps.iter().filter(|s| s.name == "attn.weights").filter_map(move |step| {
        let (Some(_), Some(layer)) = (step.f32s(), step.layer) else { return None };
        let n = step.shape[1];
        (square && step.shape[2] == n).then_some((step, layer, n))
    })
}

/// The heads ranked by the statistic that names a head's job: the induction score with
/// `--induction`, else the previous-token score (heads of a single token have none).
#[derive(Debug, Clone, PartialEq)]
pub struct RankedHeads {
    /// The statistic's name, as the table's column says it, and in words.
    pub by: &'static str,
    pub said: &'static str,
    /// (layer, head, score), largest score first (ties in the table's order).
    pub heads: Vec<(usize, usize, f64)>,
}

/// [`RankedHeads`] of `stats`; None when no head has the statistic.
pub fn ranked(stats: &[HeadStats]) -> Option<RankedHeads> {
    let induction = stats.iter().any(|s| s.induction.is_some());
    let score = |s: &HeadStats| if induction { s.induction } else { s.previous_token };
    let (by, said) = if induction { ("induction", "induction score") } else { ("prev tok", "previous-token score") };
    let mut heads: Vec<(usize, usize, f64)> = stats.iter().filter_map(|s| Some((s.layer, s.head, score(s)?))).collect();
    heads.sort_by(|x, y| y.2.total_cmp(&x.2));
    (!heads.is_empty()).then_some(RankedHeads { by, said, heads })
}

/// Every recorded head's statistics, in trace order.
pub fn stats(trace: &Trace) -> Vec<HeadStats> {
    let mut sums = StatsRows::new(None, trace.config.interventions.induction);
    for (step, layer, n) in squares(trace) {
        let v = step.f32s().unwrap_or_default();
        for g in 0..step.shape[0] {
            let head = step.heads.as_ref().map_or(g, |hs| hs[g]);
            sums.head_rows((layer, head), (0, n, n), &v[g * n * n..(g + 1) * n * n]);
        }
    }
    sums.finish()
}

/// `--stats` gathered from weights a tile of queries at a time (`trace::rows`): each head's
/// sums over its queries so far, in the order the heads' first rows came.
pub struct StatsRows {
    /// `--head`: the heads kept, if narrowed.
    heads: Option<Vec<usize>>,
    /// `--induction N`.
    induction: Option<usize>,
    sums: Vec<((usize, usize), Sums)>,
}

/// One head's sums over its queries of each statistic, and the size of its map.
#[derive(Default)]
struct Sums {
    n: usize,
    entropy: f64,
    distance: f64,
    first: f64,
    previous: f64,
    induction: f64,
}

impl Sums {
    /// Rows `first..` of an n×n map: `w` holds each row's first `width` weights, the rest
    /// being 0 (which add nothing to any sum); `induction` is `--induction`'s r.
    fn add(&mut self, w: &[f32], (first, n, width): (usize, usize, usize), induction: Option<usize>) {
        for (i, row) in w.chunks_exact(width).enumerate() {
            let q = first + i;
            let wide = || row.iter().map(|&x| x as f64);
            self.entropy += wide().filter(|&x| x > 0.0).map(|x| -x * x.ln()).sum::<f64>();
            self.distance += wide().enumerate().map(|(k, x)| x * (q as f64 - k as f64).abs()).sum::<f64>();
            self.first += row[0] as f64;
            if q >= 1 {
                self.previous += row[q - 1] as f64;
            }
            // With `--induction r`, the input is a prefix, then r tokens, then the same r again.
            if let Some(r) = induction.filter(|&r| q + r >= n) {
                self.induction += row[q + 1 - r] as f64;
            }
        }
    }
}

impl StatsRows {
    pub fn new(heads: Option<Vec<usize>>, induction: Option<usize>) -> Self {
        StatsRows { heads, induction, sums: Vec::new() }
    }

    /// A tile of a layer's weights, every head; a non-square map is left out.
    pub fn add(&mut self, tile: &WeightRows) {
        if tile.keys != tile.queries {
            return;
        }
        let kept: Vec<usize> =
            (0..tile.heads).filter(|g| self.heads.as_ref().is_none_or(|hs| hs.contains(g))).collect();
        for &g in &kept {
            self.entry((tile.layer, g), tile.queries);
        }
        let (induction, size) = (self.induction, (tile.first, tile.queries, tile.width));
        let mut heads: Vec<(usize, &mut Sums)> = (self.sums.iter_mut())
            .filter(|(id, _)| id.0 == tile.layer && kept.contains(&id.1))
            .map(|(id, s)| (id.1, s))
            .collect();
        share(&mut heads, tile.values.len(), |(g, s)| s.add(tile.head(*g), size, induction));
    }

    /// Rows `first..` of head (layer, head)'s n×n map (see [`Sums::add`]).
    fn head_rows(&mut self, id: (usize, usize), (first, n, width): (usize, usize, usize), w: &[f32]) {
        let at = self.entry(id, n);
        let induction = self.induction;
        self.sums[at].1.add(w, (first, n, width), induction);
    }

    /// Where head `id`'s sums are, made for an n×n map if new.
    fn entry(&mut self, id: (usize, usize), n: usize) -> usize {
        match self.sums.iter().position(|(x, _)| *x == id) {
            Some(at) => at,
            None => {
                self.sums.push((id, Sums { n, ..Default::default() }));
                self.sums.len() - 1
            }
        }
    }

    /// Each head's statistics: the sums over its queries as means.
    pub fn finish(self) -> Vec<HeadStats> {
        let induction = self.induction;
        self.sums
            .into_iter()
            .map(|((layer, head), s)| {
                let mean = |sum: f64, count: usize| if count > 0 { sum / count as f64 } else { 0.0 };
                HeadStats {
                    layer,
                    head,
                    entropy: mean(s.entropy, s.n),
                    mean_distance: mean(s.distance, s.n),
                    first_token: mean(s.first, s.n),
                    previous_token: (s.n > 1).then(|| s.previous / (s.n - 1) as f64),
                    induction: induction.map(|r| s.induction / r as f64),
                }
            })
            .collect()
    }
}

/// The rollout after every recorded layer: (layer, n×n row-major), from the first layer.
/// Needs every head of each layer (refused with `--head`).
pub fn rollout(trace: &Trace) -> Vec<(usize, Vec<f64>)> {
    let all = maps(trace);
    let mut layers: Vec<usize> = all.iter().map(|(l, _, _)| *l).collect();
    layers.dedup();
    let mut out: Vec<(usize, Vec<f64>)> = Vec::new();
    for l in layers {
        let heads: Vec<&Vec<f64>> = all.iter().filter(|(x, _, _)| *x == l).map(|(_, _, w)| w).collect();
        let len = heads[0].len();
        let n = (len as f64).sqrt() as usize;
        let a: Vec<f64> = (0..len)
            .map(|i| {
                let mean = heads.iter().map(|w| w[i]).sum::<f64>() / heads.len() as f64;
                0.5 * mean + if i / n == i % n { 0.5 } else { 0.0 }
            })
            .collect();
        let r = match out.last() {
            None => a,
            Some((_, prev)) => (0..len)
                .map(|i| {
                    let (q, k) = (i / n, i % n);
                    (0..n).map(|m| a[q * n + m] * prev[m * n + k]).sum()
                })
                .collect(),
        };
        out.push((l, r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{steps, Step, Values};

    fn trace(w: Vec<f32>, heads: usize, n: usize, layers: usize) -> Trace {
        let steps = (0..layers)
            .map(|l| Step {
                id: steps::layer_id(l, "attn.weights"),
                layer: Some(l),
                name: "attn.weights".into(),
                dims: vec!["head", "query_pos", "key_pos"],
                shape: vec![heads, n, n],
                heads: None,
                values: Values::F32(w.clone()),
            })
            .collect();
        Trace { tokens: vec!["a".into(); n], steps, ..Default::default() }
    }

    #[test]
    fn a_previous_token_head_by_hand() {
        // Query 0 sees itself; query 1 looks only at 0.
        let t = trace(vec![1.0, 0.0, 1.0, 0.0], 1, 2, 1);
        let s = &stats(&t)[0];
        assert_eq!((s.entropy, s.mean_distance, s.first_token, s.previous_token), (0.0, 0.5, 1.0, Some(1.0)));
        // Uniform over two keys: entropy ln 2.
        let u = &stats(&trace(vec![0.5; 4], 1, 2, 1))[0];
        assert!((u.entropy - 2f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn non_square_maps_are_left_out() {
        let mut t = trace(vec![0.5; 6], 1, 2, 1);
        t.steps[0].shape = vec![1, 2, 3];
        assert!(stats(&t).is_empty() && rollout(&t).is_empty());
    }

    #[test]
    fn rollout_of_two_identity_layers_is_the_identity() {
        let r = rollout(&trace(vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0], 2, 2, 2));
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].1, vec![1.0, 0.0, 0.0, 1.0]);
        // One layer attending only to token 0: A = [[1, 0], [½, ½]]; two of them: R = A·A.
        let r = rollout(&trace(vec![1.0, 0.0, 1.0, 0.0], 1, 2, 2));
        assert_eq!(r[0].1, vec![1.0, 0.0, 0.5, 0.5]);
        assert_eq!(r[1].1, vec![1.0, 0.0, 0.75, 0.25]);
    }
}
