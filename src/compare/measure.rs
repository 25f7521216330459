//! The numbers of a comparison, from two sides' values of one step (B is the reference):
//!
//! - a step's **relative error** ‖a − b‖ / ‖b‖, the Euclidean norms of the whole tensor (in
//!   f64), with its largest |a − b| and where; in `attn.scores`, positions both sides mask
//!   (at or below −1e4, as `attn-trace diff`'s mask floor) are left out; a value that is not
//!   finite on one side only makes the error infinite; ‖b‖ = 0 gives 0 when a = b too, else
//!   infinity;
//! - each head's **Jensen–Shannon divergence** of its attention rows, in bits (0 for the same
//!   distribution, 1 for distributions with no key in common), its mean and its largest over
//!   the queries (a row of zeros on both sides, a query that sees no key, is left out);
//! - each position's **Kullback–Leibler divergence** KL(B ‖ A) of the next-token
//!   distributions softmax(logits), in nats, as llama.cpp's `--kl-divergence` reports it for a
//!   quantized model against its base.

use crate::diff::compare::{holds_mask, unravel};

/// The mask floor of `attn.scores` (`attn-trace diff --mask-floor`'s default).
const MASK_FLOOR: f64 = -1e4;

/// How far one step's values are apart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Error {
    /// ‖a − b‖ / ‖b‖.
    pub relative: f64,
    /// The largest |a − b| and its flat index (None when every value agrees).
    pub max_abs: f64,
    pub at: Option<usize>,
}

/// The relative error of `a` against `b` (equal lengths) for step `id`.
pub fn error(id: &str, a: &[f32], b: &[f32]) -> Error {
    let mask = holds_mask(id);
    let (mut diff2, mut ref2, mut max_abs, mut at, mut one_sided) = (0f64, 0f64, 0f64, None, false);
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        let (x, y) = (x as f64, y as f64);
        if mask && x <= MASK_FLOOR && y <= MASK_FLOOR {
            continue;
        }
        if !x.is_finite() || !y.is_finite() {
            // The same infinity, or NaN on both sides, agrees; anything else is infinitely far.
            if !(x == y || x.is_nan() && y.is_nan()) {
                one_sided = true;
                if at.is_none() || max_abs.is_finite() {
                    (max_abs, at) = (f64::INFINITY, Some(i));
                }
            }
            continue;
        }
        let d = x - y;
        diff2 += d * d;
        ref2 += y * y;
        if d.abs() > max_abs {
            (max_abs, at) = (d.abs(), Some(i));
        }
    }
    let relative = match (one_sided, diff2 == 0.0, ref2 == 0.0) {
        (true, _, _) => f64::INFINITY,
        (false, true, _) => 0.0,
        (false, false, true) => f64::INFINITY,
        (false, false, false) => (diff2 / ref2).sqrt(),
    };
    Error { relative, max_abs, at }
}

/// [`Error::at`] as a multi-index of `shape`.
pub fn index(at: Option<usize>, shape: &[usize]) -> Option<Vec<usize>> {
    at.map(|i| unravel(i, shape))
}

/// One head's divergence over its queries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeadJs {
    pub layer: usize,
    pub head: usize,
    /// The mean over the queries that see a key, in bits.
    pub mean: f64,
    /// The largest, and its query position.
    pub max: f64,
    pub max_query: usize,
}

/// Every head of one layer's `attn.weights` ([head, query_pos, key_pos], row-major on both
/// sides).
pub fn heads_js(layer: usize, shape: &[usize], a: &[f32], b: &[f32]) -> Vec<HeadJs> {
    let [heads, queries, keys] = shape else { return Vec::new() };
    (0..*heads)
        .map(|h| {
            let (mut sum, mut rows, mut max, mut max_query) = (0.0, 0usize, 0.0, 0);
            for q in 0..*queries {
                let at = (h * queries + q) * keys;
                let Some(js) = js_bits(&a[at..at + keys], &b[at..at + keys]) else { continue };
                sum += js;
                rows += 1;
                if js > max || js.is_nan() {
                    (max, max_query) = (js, q);
                }
            }
            let mean = if rows == 0 { 0.0 } else { sum / rows as f64 };
            HeadJs { layer, head: h, mean, max, max_query }
        })
        .collect()
}

/// JS(p ‖ q) in bits, or None for two rows of zeros (a query that sees no key).
pub fn js_bits(p: &[f32], q: &[f32]) -> Option<f64> {
    let total = |r: &[f32]| r.iter().map(|&x| x as f64).sum::<f64>();
    if total(p) == 0.0 && total(q) == 0.0 {
        return None;
    }
    // ½ Σ p log(p/m) + ½ Σ q log(q/m), m = (p + q)/2; a term with p = 0 is 0.
    let term = |x: f64, m: f64| if x > 0.0 { x * (x / m).log2() } else { 0.0 };
    let mut js = 0.0;
    for (&x, &y) in p.iter().zip(q) {
        let (x, y) = (x as f64, y as f64);
        let m = 0.5 * (x + y);
        js += 0.5 * term(x, m) + 0.5 * term(y, m);
    }
    // Rounding can leave a tiny negative for equal rows.
    Some(js.max(0.0))
}

/// KL(B ‖ A) of softmax(b) against softmax(a) per row of `vocab` logits, in nats.
pub fn kl_rows(a: &[f32], b: &[f32], vocab: usize) -> Vec<f64> {
    if vocab == 0 {
        return Vec::new();
    }
    a.chunks(vocab).zip(b.chunks(vocab)).map(|(la, lb)| kl(&log_softmax(la), &log_softmax(lb))).collect()
}

/// Σ exp(lb)·(lb − la): KL(B ‖ A) from log-probabilities.
fn kl(la: &[f64], lb: &[f64]) -> f64 {
    let sum: f64 = la.iter().zip(lb).map(|(&x, &y)| if y == f64::NEG_INFINITY { 0.0 } else { y.exp() * (y - x) }).sum();
    sum.max(0.0)
}

/// log softmax of one row, in f64.
fn log_softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().map(|&x| x as f64).fold(f64::NEG_INFINITY, f64::max);
    let lse = max + row.iter().map(|&x| (x as f64 - max).exp()).sum::<f64>().ln();
    row.iter().map(|&x| x as f64 - lse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_error_masks_and_non_finite_values() {
        let e = error("layers.0.ffn.out", &[3.0, 4.0], &[0.0, 4.0]);
        assert_eq!((e.relative, e.max_abs, e.at), (0.75, 3.0, Some(0)));
        let same = error("layers.0.attn.scores", &[f32::NEG_INFINITY, 1.0], &[-1e9, 1.0]);
        assert_eq!((same.relative, same.at), (0.0, None));
        let masked_once = error("layers.0.attn.weights", &[f32::NEG_INFINITY, 1.0], &[0.0, 1.0]);
        assert!(masked_once.relative.is_infinite());
        assert!(error("x", &[1.0], &[0.0]).relative.is_infinite());
        assert_eq!(error("x", &[0.0], &[0.0]).relative, 0.0);
    }

    #[test]
    fn jensen_shannon_in_bits() {
        assert_eq!(js_bits(&[0.5, 0.5], &[0.5, 0.5]), Some(0.0));
        assert_eq!(js_bits(&[1.0, 0.0], &[0.0, 1.0]), Some(1.0));
        assert_eq!(js_bits(&[0.0, 0.0], &[0.0, 0.0]), None);
        // p = (1, 0), q = (½, ½): ½·log2(1/0.75) + ½·(½·log2(0.5/0.75) + ½·log2(2)).
        let want = 0.5 * (1.0f64 / 0.75).log2() + 0.25 * (0.5f64 / 0.75).log2() + 0.25;
        assert!((js_bits(&[1.0, 0.0], &[0.5, 0.5]).unwrap() - want).abs() < 1e-12);
        let h = heads_js(3, &[1, 2, 2], &[1.0, 0.0, 0.5, 0.5], &[0.0, 1.0, 0.5, 0.5]);
        assert_eq!((h[0].layer, h[0].mean, h[0].max, h[0].max_query), (3, 0.5, 1.0, 0));
    }

    #[test]
    fn kl_of_next_token_distributions() {
        let k = kl_rows(&[0.0, 0.0], &[0.0, 0.0], 2);
        assert_eq!(k, vec![0.0]);
        // softmax(0, ln 3) = (¼, ¾) against (½, ½): ¼·ln(½) + ¾·ln(3/2).
        let k = kl_rows(&[0.0, 0.0], &[0.0, 3f32.ln()], 2);
        assert!((k[0] - (0.25 * 0.5f64.ln() + 0.75 * 1.5f64.ln())).abs() < 1e-7, "{k:?}");
    }
}
