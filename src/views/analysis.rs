//! Per-head statistics (`--stats`) and attention rollout (`--rollout`), derived from the
//! trace's own `attn.weights`. Definitions, for one head's weights w[q][k] over n tokens
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

use crate::trace::Trace;

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
    let mut out = Vec::new();
    for step in trace.steps.iter().filter(|s| s.name == "attn.weights") {
        let (Some(v), Some(layer)) = (step.f32s(), step.layer) else { continue };
        let n = step.shape[1];
        if trace.keys.is_some() || step.shape[2] != n {
            continue;
        }
        for g in 0..step.shape[0] {
            let head = step.heads.as_ref().map_or(g, |hs| hs[g]);
            out.push((layer, head, v[g * n * n..(g + 1) * n * n].iter().map(|&x| x as f64).collect()));
        }
    }
    out
}

/// Every recorded head's statistics, in trace order.
pub fn stats(trace: &Trace) -> Vec<HeadStats> {
    let induction = trace.config.interventions.induction;
    maps(trace)
        .into_iter()
        .map(|(layer, head, w)| {
            let n = (w.len() as f64).sqrt() as usize;
            let rows = |f: &dyn Fn(usize) -> f64, from: usize| -> Option<f64> {
                (n > from).then(|| (from..n).map(f).sum::<f64>() / (n - from) as f64)
            };
            let entropy =
                |q: usize| -> f64 { (0..n).map(|k| w[q * n + k]).filter(|&x| x > 0.0).map(|x| -x * x.ln()).sum() };
            let distance = |q: usize| (0..n).map(|k| w[q * n + k] * (q as f64 - k as f64).abs()).sum::<f64>();
            HeadStats {
                layer,
                head,
                entropy: rows(&entropy, 0).unwrap_or(0.0),
                mean_distance: rows(&distance, 0).unwrap_or(0.0),
                first_token: rows(&|q| w[q * n], 0).unwrap_or(0.0),
                previous_token: rows(&|q| w[q * n + q - 1], 1),
                induction: induction.map(|r| {
                    // The input is a prefix, then N tokens, then the same N again.
                    let start = n - r;
                    (start..n).map(|q| w[q * n + q - r + 1]).sum::<f64>() / r as f64
                }),
            }
        })
        .collect()
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
