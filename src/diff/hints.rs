//! What a divergence looks like: for a step that diverges, a one-sentence guess at the bug,
//! from the shape of the difference between A and B (B is the reference). Each rule looks
//! for one classic mistake in attention code and is tested with a committed buggy PyTorch
//! implementation (fixtures/students/):
//!
//! - A's values are B's with the axes permuted (a missing or extra transpose);
//! - q, k or v hold B's projection split into heads in the wrong order;
//! - A = c·B for one constant c ≠ 1 (a scale bug; for scores, which constant it likely is);
//! - attention weights whose columns, not rows, sum to 1 (softmax over the query axis);
//! - scores that are finite exactly where B masks, or weights that are 0 where B masks but
//!   whose rows do not sum to 1 (the mask applied after the softmax, or not at all).
//!
//! A hint is a guess and says so ("likely"); the numbers it rests on are in the report.

use super::compare::Tol;
use super::load::{Entry, Loaded};
use crate::export::Data;
use crate::trace::split_id;
use crate::trace::steps;

/// A guess at the bug behind a diverging step, or `None` when no rule fits.
pub fn hint(id: &str, a: &Entry, b: &Entry, reference: &Loaded, tol: Tol) -> Option<String> {
    let (Data::Num(va), Data::Num(vb)) = (&a.data, &b.data) else { return None };
    let close = |x: &[f64], y: &[f64]| x.len() == y.len() && x.iter().zip(y).all(|(&p, &q)| near(p, q, tol));
    if let Some(text) = permuted(a, b, va, vb, &close) {
        return Some(text);
    }
    if a.shape != b.shape {
        return None;
    }
    let name = split_id(id).1;
    let per_head =
        matches!(name, "attn.q" | "attn.k" | "attn.v" | "attn.q_norm" | "attn.k_norm" | "attn.q_rot" | "attn.k_rot");
    if per_head && a.shape.len() == 3 {
        if let Some(text) = heads_split(&a.shape, va, vb, &close) {
            return Some(text);
        }
    }
    if name == "attn.scores" {
        if let Some(text) = unmasked(va, vb, tol) {
            return Some(text);
        }
    }
    if let Some(r) = ratio(va, vb, tol) {
        return Some(scale_text(id, r, reference));
    }
    if name == "attn.weights" && a.shape.len() == 3 {
        return softmax_axis(&a.shape, va, vb);
    }
    None
}

/// Agreement for the rules: the diff's tolerance, loosened tenfold (a buggy implementation
/// also rounds differently), with equal non-finite values agreeing.
fn near(a: f64, b: f64, tol: Tol) -> bool {
    a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 10.0 * tol.allowed(b) || tol.masked(a, b)
}

/// A is B with its axes reordered: a transpose missing, extra or on the wrong axes.
fn permuted(a: &Entry, b: &Entry, va: &[f64], vb: &[f64], close: &dyn Fn(&[f64], &[f64]) -> bool) -> Option<String> {
    let rank = b.shape.len();
    if !(2..=4).contains(&rank) || a.shape.len() != rank || va.len() != vb.len() {
        return None;
    }
    for perm in permutations(rank).into_iter().skip(1) {
        let shape: Vec<usize> = perm.iter().map(|&k| b.shape[k]).collect();
        if shape != a.shape || !close(va, &transpose(vb, &b.shape, &perm)) {
            continue;
        }
        let dims = |p: &[usize]| p.iter().map(|&k| b.dims.get(k).map_or("?", String::as_str)).collect::<Vec<_>>();
        let (got, want) = (dims(&perm), dims(&(0..rank).collect::<Vec<_>>()));
        return Some(format!(
            "A holds B's values with the axes in the order [{}] instead of [{}]: likely a transpose \
             or permute missing, extra or on the wrong axes",
            got.join(", "),
            want.join(", ")
        ));
    }
    None
}

/// Every order of `0..n`, the identity first.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for at in (0..n).rev() {
            let mut q = p.clone();
            q.insert(at, n - 1);
            out.push(q);
        }
    }
    out.sort_by_key(|p| p.iter().enumerate().filter(|(i, &k)| *i != k).count());
    out
}

/// `x` (of `shape`, row-major) with its axes reordered: out axis i is x's axis `perm[i]`.
fn transpose(x: &[f64], shape: &[usize], perm: &[usize]) -> Vec<f64> {
    let out_shape: Vec<usize> = perm.iter().map(|&k| shape[k]).collect();
    let mut strides = vec![1; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * shape[k + 1];
    }
    (0..x.len())
        .map(|i| {
            let idx = super::compare::unravel(i, &out_shape);
            x[idx.iter().zip(perm).map(|(&j, &k)| j * strides[k]).sum::<usize>()]
        })
        .collect()
}

/// q/k/v in `[head, pos, d]` that hold B's `[pos, heads·d]` projection cut the wrong way.
fn heads_split(shape: &[usize], va: &[f64], vb: &[f64], close: &dyn Fn(&[f64], &[f64]) -> bool) -> Option<String> {
    let (h, p, d) = (shape[0], shape[1], shape[2]);
    if h < 2 {
        return None;
    }
    // B's projection before the split: row pos, column head·d + i.
    let at = |pos: usize, col: usize| vb[((col / d) * p + pos) * d + col % d];
    let interleaved: Vec<f64> = (0..va.len()).map(|n| at(n / d % p, (n % d) * h + n / (p * d))).collect();
    if close(va, &interleaved) {
        return Some(format!(
            "A's head 0 holds columns 0, {h}, {}, … of B's projection: likely the heads were split \
             as view(pos, d_head, heads) instead of view(pos, heads, d_head)",
            2 * h
        ));
    }
    let reshaped: Vec<f64> = (0..va.len()).map(|n| at(n / (h * d), n % (h * d))).collect();
    if close(va, &reshaped) {
        return Some(
            "A is B's [pos, heads·d_head] projection reshaped straight to [heads, pos, d_head]: \
             likely view(heads, pos, d_head) where view(pos, heads, d_head).transpose(0, 1) splits the heads"
                .into(),
        );
    }
    None
}

/// The constant c with A = c·B everywhere (finite, unmasked values), if there is one ≠ 1.
fn ratio(va: &[f64], vb: &[f64], tol: Tol) -> Option<f64> {
    let mut pairs = Vec::with_capacity(va.len());
    for (&a, &b) in va.iter().zip(vb) {
        if a.is_finite() && b.is_finite() {
            pairs.push((a, b));
        } else if !(a == b || tol.masked(a, b)) {
            return None;
        }
    }
    let big = pairs.iter().map(|(_, b)| b.abs()).fold(0.0, f64::max);
    if pairs.len() < 2 || big == 0.0 {
        return None;
    }
    // Least squares: c = Σab / Σb².
    let c = pairs.iter().map(|(a, b)| a * b).sum::<f64>() / pairs.iter().map(|(_, b)| b * b).sum::<f64>();
    let fits = pairs.iter().all(|&(a, b)| (a - c * b).abs() <= 1e-4 * big.max(1.0) * c.abs().max(1.0));
    (fits && (c - 1.0).abs() > 1e-3 && c != 0.0).then_some(c)
}

/// The sentence for A = r·B, naming the likely constant for scores.
fn scale_text(id: &str, r: f64, reference: &Loaded) -> String {
    let head = format!("A = {r:.4} × B throughout: a scale bug");
    let (layer, name) = split_id(id);
    if !matches!(name, "attn.scores" | "attn.raw_scores") {
        return format!("{head} (a constant factor is wrong or missing)");
    }
    let last = |step: &str| {
        let id = layer.map_or(step.to_string(), |l| steps::layer_id(l, step));
        reference.steps.get(&id).and_then(|e| e.shape.last().copied())
    };
    let (Some(dk), Some(dm)) = (last("attn.q"), last("attn.out")) else {
        return format!("{head} (the 1/√d_k scale is likely wrong)");
    };
    let (dk, dm) = (dk as f64, dm as f64);
    let causes = [
        (dk.sqrt() / dm.sqrt(), format!("√d_k/√d_model = √{dk}/√{dm}"), "divided by √d_model instead of √d_k"),
        (dk.sqrt(), format!("√d_k = √{dk}"), "not divided by √d_k"),
        (1.0 / dk.sqrt(), format!("1/√d_k = 1/√{dk}"), "divided by d_k (or by √d_k twice) instead of √d_k"),
        (dk.sqrt() / dm, format!("√d_k/d_model = √{dk}/{dm}"), "divided by d_model instead of √d_k"),
    ];
    match causes.iter().find(|(c, _, _)| (r / c - 1.0).abs() < 1e-3) {
        Some((_, formula, why)) if name == "attn.scores" => {
            format!("{head}; {r:.4} = {formula}: the scores were likely {why}")
        }
        _ => format!("{head} (the ratio fits none of √d_k, √d_model, d_k, d_model; d_k = {dk}, d_model = {dm})"),
    }
}

/// Weights `[head, query, key]` whose columns sum to 1 but whose rows do not.
fn softmax_axis(shape: &[usize], va: &[f64], vb: &[f64]) -> Option<String> {
    let (h, q, k) = (shape[0], shape[1], shape[2]);
    let at = |v: &[f64], hh: usize, qq: usize, kk: usize| v[(hh * q + qq) * k + kk];
    let one = |s: f64| (s - 1.0).abs() <= 1e-3;
    let cols = (0..h).all(|hh| (0..k).all(|kk| one((0..q).map(|qq| at(va, hh, qq, kk)).sum())));
    let rows = |v: &[f64]| (0..h).all(|hh| (0..q).all(|qq| one((0..k).map(|kk| at(v, hh, qq, kk)).sum())));
    if cols && !rows(va) {
        return Some(
            "A's columns sum to 1, not its rows: likely a softmax over the query axis (dim=-2) \
             where attention normalises over the keys (dim=-1)"
                .into(),
        );
    }
    // Zero exactly where B is masked, yet rows that do not sum to 1.
    let masked_same = vb.iter().zip(va).all(|(&b, &a)| (b == 0.0) == (a.abs() < 1e-12));
    if vb.contains(&0.0) && masked_same && rows(vb) && !rows(va) {
        return Some(
            "A is 0 where B is masked, but its rows sum to less than 1: likely the mask was \
             applied after the softmax; mask the scores (−inf or −1e9) before it"
                .into(),
        );
    }
    None
}

/// Scores that differ only where B is masked (at or below the floor) and are above it on A's side.
fn unmasked(va: &[f64], vb: &[f64], tol: Tol) -> Option<String> {
    let mut masked_here = 0;
    for (&a, &b) in va.iter().zip(vb) {
        if b <= tol.mask_floor && a > tol.mask_floor {
            masked_here += 1;
        } else if !near(a, b, tol) {
            return None;
        }
    }
    (masked_here > 0).then(|| {
        format!(
            "A holds finite scores at the {masked_here} positions B masks (−inf or ≤ --mask-floor) and \
             agrees everywhere else: likely the mask is applied after the softmax, or not at all"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutations_and_transpose() {
        assert_eq!(permutations(2), vec![vec![0, 1], vec![1, 0]]);
        assert_eq!(permutations(3).len(), 6);
        // [[0, 1, 2], [3, 4, 5]]ᵀ
        assert_eq!(transpose(&[0., 1., 2., 3., 4., 5.], &[2, 3], &[1, 0]), vec![0., 3., 1., 4., 2., 5.]);
    }

    #[test]
    fn ratio_finds_one_constant() {
        let tol = Tol { atol: 1e-5, rtol: 1e-5, mask_floor: -1e4 };
        assert_eq!(ratio(&[0.5, -1.0, 0.0], &[1.0, -2.0, 0.0], tol), Some(0.5));
        assert_eq!(ratio(&[0.5, -1.0], &[1.0, -1.0], tol), None);
        assert_eq!(ratio(&[1.0, 2.0], &[1.0, 2.0], tol), None, "equal is no ratio");
    }
}
