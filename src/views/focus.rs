//! The single-token walkthrough behind `--focus`: for one query token, one layer and each
//! head, every number that turns its query into its context vector, taken from the trace's
//! own steps so that it agrees with them to the last digit: the query row of `attn.q`, each
//! key row of `attn.k` and the products q_i·k_i that sum to `attn.raw_scores`, the scaled
//! score, the mask (−inf for a hidden key), the row max subtracted before `exp` (for
//! numerical stability; it cancels in the ratio), each exp and their sum, the `attn.weights`
//! row, and the terms w_j·v_j that sum to the `attn.context` row.
//!
//! The derived numbers (products, exps, terms) are computed in f64 from the trace's f32s;
//! the sums they add up to are the trace's own values. Renderers only format a [`Focus`].

use crate::trace::steps;
use crate::trace::{Step, Trace, Values};
use anyhow::{anyhow, Result};

/// One token's walkthrough in one layer.
#[derive(Debug, Clone, PartialEq)]
pub struct Focus {
    /// The query token's position and text.
    pub position: usize,
    pub token: String,
    pub layer: usize,
    /// The factor applied to q·k (the config's `scale`, 1/√d_k unless --scale says otherwise).
    pub scale: f64,
    /// Every key token, exactly as spelled (JSON's `key_tokens`).
    pub keys: Vec<String>,
    /// Every key token's label (`Trace::label`), as the tables show them.
    pub labels: Vec<String>,
    pub heads: Vec<FocusHead>,
    /// Whether q and k are the rotated `attn.q_rot`/`attn.k_rot` (rotary positions).
    pub rotated: bool,
    /// When the focus word was split into word pieces: their positions (the focus is the first).
    pub pieces: Option<std::ops::Range<usize>>,
    /// When only the strongest head is kept ([`Focus::strongest`]): how many heads it was
    /// chosen from.
    pub chosen_from: Option<usize>,
}

impl Focus {
    /// Keeps only the head whose largest weight from the focus token is the highest (the
    /// first, on a tie): the head that attends most decidedly.
    pub fn strongest(mut self) -> Focus {
        let peak = |h: &FocusHead| h.weights.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let best =
            (0..self.heads.len()).fold(0, |b, g| if peak(&self.heads[g]) > peak(&self.heads[b]) { g } else { b });
        self.chosen_from = Some(self.heads.len());
        self.heads = self.heads.into_iter().nth(best).into_iter().collect();
        self
    }
}

/// The arithmetic of one head for the focus token `i`; vectors are indexed by key position j.
#[derive(Debug, Clone, PartialEq)]
pub struct FocusHead {
    pub head: usize,
    /// q_i, a row of `attn.q`.
    pub query: Vec<f32>,
    /// k_j, the rows of `attn.k`.
    pub keys: Vec<Vec<f32>>,
    /// q_i[d]·k_j[d]: the terms of each dot product.
    pub products: Vec<Vec<f64>>,
    /// q_i·k_j, the row of `attn.raw_scores`.
    pub raw_scores: Vec<f32>,
    /// raw × scale, as the model computes it in f32 (equal to `scores` where not masked).
    pub scaled: Vec<f32>,
    /// With --causal: true where key j is hidden (−inf added), from `attn.mask`.
    pub masked: Option<Vec<bool>>,
    /// The row of `attn.scores` (−inf where masked).
    pub scores: Vec<f32>,
    /// The largest visible score, subtracted before exp.
    pub max_score: f32,
    /// score − max (−inf where masked).
    pub shifted: Vec<f64>,
    /// exp(score − max) (0 where masked).
    pub exps: Vec<f64>,
    pub exp_sum: f64,
    /// The row of `attn.weights`; equals exps / exp_sum to f32 rounding.
    pub weights: Vec<f32>,
    /// v_j, the rows of `attn.v`.
    pub values: Vec<Vec<f32>>,
    /// w_j·v_j[d]: the terms of the context vector.
    pub weighted: Vec<Vec<f64>>,
    /// The row of `attn.context`.
    pub context: Vec<f32>,
    /// The key with the largest visible score (the first, on a tie): the one this head
    /// attends to most.
    pub top_key: usize,
    /// The dimensions d of that key's q·k, ordered by the term q[d]·k[d], largest first: which
    /// terms make that score the largest (ties in order of d).
    pub top_terms: Vec<usize>,
}

/// Derives the walkthrough of token `position` in `layer` from the trace's steps.
pub fn derive(trace: &Trace, position: usize, layer: usize) -> Result<Focus> {
    let step = |name: &str| -> Result<&Step> {
        let id = steps::layer_id(layer, &format!("attn.{name}"));
        trace.get(&id).ok_or_else(|| anyhow!("internal: --focus needs step {id}, which was not recorded"))
    };
    // With rotary positions the scores are q_rot·k_rot: the walkthrough uses the rotated rows.
    let rotated = trace.get(&steps::layer_id(layer, "attn.q_rot")).is_some();
    let (q, k) = if rotated { (step("q_rot")?, step("k_rot")?) } else { (step("q")?, step("k")?) };
    let v = step("v")?;
    // Grouped-query attention: k and v hold key/value heads (never narrowed by --head).
    let group = trace.config.heads / trace.config.kv_heads();
    let kv = |s: &Step, g: usize, head: usize| if s.dims.first() == Some(&"kv_head") { head / group } else { g };
    let (raw, scores, weights, context) = (step("raw_scores")?, step("scores")?, step("weights")?, step("context")?);
    let mask = trace.get(&steps::layer_id(layer, "attn.mask"));
    let scale = trace.config.scale;
    let n = trace.tokens.len();
    let mut heads = Vec::new();
    for g in 0..q.shape[0] {
        let head = q.heads.as_ref().map_or(g, |hs| hs[g]);
        let query = row(q, g, position)?;
        let keys: Vec<Vec<f32>> = (0..n).map(|j| row(k, kv(k, g, head), j)).collect::<Result<_>>()?;
        let values: Vec<Vec<f32>> = (0..n).map(|j| row(v, kv(v, g, head), j)).collect::<Result<_>>()?;
        let raw_scores = row(raw, g, position)?;
        let scores = row(scores, g, position)?;
        let weights = row(weights, g, position)?;
        let context = row(context, g, position)?;
        let masked = match mask.map(|m| &m.values) {
            Some(Values::Bool(b)) => Some(b[position * n..(position + 1) * n].to_vec()),
            _ => None,
        };
        let products: Vec<Vec<f64>> =
            keys.iter().map(|kj| query.iter().zip(kj).map(|(&a, &b)| a as f64 * b as f64).collect()).collect();
        // The model scales in f32 (candle's affine), so this reproduces `scores` exactly.
        let scaled = raw_scores.iter().map(|&s| s * scale as f32).collect();
        let max_score = scores.iter().copied().filter(|s| s.is_finite()).fold(f32::NEG_INFINITY, f32::max);
        // A hidden key stays −inf (its exp 0), also in a row that sees no key at all, whose
        // max is −inf too: −inf − (−inf) would be NaN where the model defines the weights as 0.
        let shift = |s: f32| if s == f32::NEG_INFINITY { f64::NEG_INFINITY } else { s as f64 - max_score as f64 };
        let shifted: Vec<f64> = scores.iter().map(|&s| shift(s)).collect();
        let exps: Vec<f64> = shifted.iter().map(|&z| z.exp()).collect();
        let exp_sum = exps.iter().sum();
        let weighted = (0..n).map(|j| values[j].iter().map(|&x| weights[j] as f64 * x as f64).collect()).collect();
        let top_key = (0..n).find(|&j| scores[j] == max_score).unwrap_or(0);
        let top_terms = ranked(&products[top_key]);
        heads.push(FocusHead {
            head,
            query,
            keys,
            products,
            raw_scores,
            scaled,
            masked,
            scores,
            max_score,
            shifted,
            exps,
            exp_sum,
            weights,
            values,
            weighted,
            context,
            top_key,
            top_terms,
        });
    }
    let token = trace.tokens[position].clone();
    Ok(Focus {
        position,
        token,
        layer,
        scale,
        keys: trace.tokens.clone(),
        labels: trace.labels(),
        heads,
        rotated,
        chosen_from: None,
        pieces: None,
    })
}

/// Indices of `terms`, largest term first; equal terms keep their order.
fn ranked(terms: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..terms.len()).collect();
    order.sort_by(|&a, &b| terms[b].total_cmp(&terms[a]));
    order
}

/// Row `r` of head-group `g` of a `[head, rows, cols]` step.
fn row(step: &Step, g: usize, r: usize) -> Result<Vec<f32>> {
    let v = step.f32s().ok_or_else(|| anyhow!("internal: {} is not a tensor", step.id))?;
    let (rows, cols) = match step.shape.as_slice() {
        [_, r, c] => (*r, *c),
        _ => return Err(anyhow!("internal: {} is not [head, rows, cols]", step.id)),
    };
    let start = (g * rows + r) * cols;
    v.get(start..start + cols).map(<[f32]>::to_vec).ok_or_else(|| anyhow!("internal: {} is too short", step.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One head, two tokens, d_k = d_v = 1, scale 1: q = [ln 3] for token 1, keys [0, 1], so
    /// the raw scores are [0, ln 3] and the weights [1/4, 3/4] (softmax of [0, ln 3]).
    #[test]
    fn softmax_of_zero_and_ln3() {
        let l3 = 3f32.ln();
        let cfg = crate::config::ModelConfig { scale: 1.0, ..Default::default() };
        let mut t = crate::trace::Recorder::new(vec!["a".into(), "b".into()], cfg, Default::default());
        let rec = |t: &mut crate::trace::Recorder, name: &str, shape: &[usize], v: Vec<f32>| {
            let dims: Vec<&'static str> = ["head", "x", "y"].to_vec();
            t.record(&steps::layer_id(0, &format!("attn.{name}")), &dims, shape, Values::F32(v));
        };
        rec(&mut t, "q", &[1, 2, 1], vec![0.0, l3]);
        rec(&mut t, "k", &[1, 2, 1], vec![0.0, 1.0]);
        rec(&mut t, "v", &[1, 2, 1], vec![2.0, 6.0]);
        rec(&mut t, "raw_scores", &[1, 2, 2], vec![0.0, 0.0, 0.0, l3]);
        rec(&mut t, "scores", &[1, 2, 2], vec![0.0, 0.0, 0.0, l3]);
        rec(&mut t, "weights", &[1, 2, 2], vec![0.5, 0.5, 0.25, 0.75]);
        rec(&mut t, "context", &[1, 2, 1], vec![4.0, 5.0]);
        let (t, _) = t.finish();
        let f = derive(&t, 1, 0).unwrap();
        let h = &f.heads[0];
        assert_eq!(h.max_score, l3);
        // exp(0 − ln 3) = 1/3 and exp(0) = 1: the sum is 4/3 and 1/3 ÷ 4/3 = 1/4.
        assert!((h.exps[0] - 1.0 / 3.0).abs() < 1e-7 && (h.exps[1] - 1.0).abs() < 1e-12);
        assert!((h.exp_sum - 4.0 / 3.0).abs() < 1e-7);
        for j in 0..2 {
            assert!((h.exps[j] / h.exp_sum - h.weights[j] as f64).abs() < 1e-7);
        }
        // context = 1/4·2 + 3/4·6 = 5, as the trace says.
        assert_eq!(h.weighted, vec![vec![0.5], vec![4.5]]);
        assert_eq!(h.context, vec![5.0]);
        assert_eq!(h.scaled, h.scores);
        // Key 1 scores highest; its one term is q·k itself.
        assert_eq!((h.top_key, h.top_terms.as_slice()), (1, &[0][..]));
    }

    #[test]
    fn terms_rank_largest_first() {
        assert_eq!(ranked(&[0.1, -2.0, 0.5, 0.1]), vec![2, 0, 3, 1]);
    }

    #[test]
    fn missing_steps_are_an_internal_error() {
        let t = Trace { tokens: vec!["a".into()], ..Default::default() };
        assert!(derive(&t, 0, 0).unwrap_err().to_string().contains("layers.0.attn.q"));
    }
}
