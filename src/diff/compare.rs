//! The comparison itself: every step both sides hold, in trace order, element by element.
//!
//! Two values agree when `|a − b| ≤ atol + rtol·|b|` (numpy.isclose's rule, so B is the
//! reference). Non-finite values: equal infinities agree; NaN agrees only with NaN at the
//! same index; a NaN or infinity on one side only is a divergence, with error `inf` or `nan`.
//!
//! Masked scores: in `attn.scores`, two values at or below the mask floor (−1e4 by default,
//! `--mask-floor`) agree and are counted as masked: −inf against −1e9, or −1e9 against
//! −3.4e38. PyTorch code masks with `masked_fill(mask, -1e9)`, `float("-inf")` or
//! `torch.finfo(dtype).min` (transformers); all give the same softmax, so all are one mask.

use super::load::{Entry, Loaded};
use super::names::rank;
use crate::export::Data;
use crate::trace::split_id;

#[derive(Debug, Clone, Copy)]
pub struct Tol {
    pub atol: f64,
    pub rtol: f64,
    /// In `attn.scores`, values at or below this are masked positions, and agree.
    pub mask_floor: f64,
}

impl Tol {
    /// The allowed |a − b| at reference value `b`.
    pub fn allowed(&self, b: f64) -> f64 {
        self.atol + self.rtol * b.abs()
    }

    pub fn close(&self, a: f64, b: f64) -> bool {
        if a.is_nan() || b.is_nan() {
            return a.is_nan() && b.is_nan();
        }
        if a.is_infinite() || b.is_infinite() {
            return a == b;
        }
        (a - b).abs() <= self.allowed(b)
    }

    /// Both values mark a masked score: each is at or below the floor (−inf included).
    pub fn masked(&self, a: f64, b: f64) -> bool {
        a <= self.mask_floor && b <= self.mask_floor
    }
}

/// Whether a step holds masked scores, where [`Tol::masked`] applies.
pub fn holds_mask(id: &str) -> bool {
    split_id(id).1 == "attn.scores"
}

/// |a − b|, with agreeing non-finite pairs at 0 (inf − inf would be NaN).
pub fn abs_error(a: f64, b: f64) -> f64 {
    if (a.is_nan() && b.is_nan()) || (a.is_infinite() && a == b) {
        0.0
    } else {
        (a - b).abs()
    }
}

/// One element that differs.
#[derive(Debug, Clone)]
pub struct Point {
    pub index: Vec<usize>,
    pub a: Leaf,
    pub b: Leaf,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Leaf {
    Num(f64),
    Str(String),
}

/// What comparing one step found.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The shapes differ, so no values were compared.
    Shape,
    Values {
        /// The largest |a − b| (NaN sorts above everything) and where.
        max_abs: f64,
        max_at: Option<Point>,
        /// Elements outside tolerance, and the first of them in row-major order.
        bad: usize,
        first_bad: Option<Point>,
        /// Elements both sides mask (`attn.scores` only), which agree.
        masked: usize,
    },
}

#[derive(Debug, Clone)]
pub struct StepResult {
    pub id: String,
    pub dims: Vec<String>,
    pub heads: Option<Vec<usize>>,
    pub shape_a: Vec<usize>,
    pub shape_b: Vec<usize>,
    pub outcome: Outcome,
}

impl StepResult {
    pub fn diverges(&self) -> bool {
        match self.outcome {
            Outcome::Shape => true,
            Outcome::Values { bad, .. } => bad > 0,
        }
    }
}

/// Compares every step present on both sides, in trace order.
pub fn compare(a: &Loaded, b: &Loaded, tol: Tol) -> Vec<StepResult> {
    let mut ids: Vec<&String> = a.steps.keys().filter(|id| b.steps.contains_key(*id)).collect();
    ids.sort_by_key(|id| (rank(id), (*id).clone()));
    ids.into_iter().map(|id| step(id, &a.steps[id], &b.steps[id], tol)).collect()
}

fn step(id: &str, ea: &Entry, eb: &Entry, tol: Tol) -> StepResult {
    let result = |outcome| StepResult {
        id: id.to_string(),
        dims: ea.dims.clone(),
        heads: ea.heads.clone().or_else(|| eb.heads.clone()),
        shape_a: ea.shape.clone(),
        shape_b: eb.shape.clone(),
        outcome,
    };
    if ea.shape != eb.shape || ea.heads.is_some() && eb.heads.is_some() && ea.heads != eb.heads {
        return result(Outcome::Shape);
    }
    let point = |i: usize, a: Leaf, b: Leaf| Point { index: unravel(i, &ea.shape), a, b };
    let (mut max_abs, mut max_at, mut bad, mut first_bad, mut masked) = (0.0f64, None, 0, None, 0);
    let mask = holds_mask(id);
    match (&ea.data, &eb.data) {
        (Data::Num(va), Data::Num(vb)) => {
            for (i, (&x, &y)) in va.iter().zip(vb).enumerate() {
                if mask && tol.masked(x, y) {
                    masked += 1;
                    continue;
                }
                let err = abs_error(x, y);
                if err > max_abs || (err.is_nan() && !max_abs.is_nan()) {
                    max_abs = err;
                    max_at = Some(point(i, Leaf::Num(x), Leaf::Num(y)));
                }
                if !tol.close(x, y) {
                    bad += 1;
                    if first_bad.is_none() {
                        first_bad = Some(point(i, Leaf::Num(x), Leaf::Num(y)));
                    }
                }
            }
        }
        (da, db) => {
            // Token strings, or strings on one side and numbers on the other.
            for i in 0..da.len() {
                let (x, y) = (leaf(da, i), leaf(db, i));
                if x != y {
                    bad += 1;
                    max_abs = f64::NAN;
                    if first_bad.is_none() {
                        first_bad = Some(point(i, x, y));
                    }
                }
            }
        }
    }
    result(Outcome::Values { max_abs, max_at, bad, first_bad, masked })
}

fn leaf(d: &Data, i: usize) -> Leaf {
    match d {
        Data::Num(v) => Leaf::Num(v[i]),
        Data::Str(v) => Leaf::Str(v[i].clone()),
    }
}

/// A row-major flat index as a multi-index of `shape`.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (k, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            idx[k] = i % d;
            i /= d;
        }
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerance_rule_and_non_finite() {
        let t = Tol { atol: 1e-5, rtol: 1e-5, mask_floor: -1e4 };
        assert!(t.close(1.0, 1.0 + 1.5e-5));
        assert!(!t.close(1.0, 1.0 + 2.5e-5));
        assert!(t.close(f64::NAN, f64::NAN));
        assert!(!t.close(f64::NAN, 0.0));
        assert!(t.close(f64::NEG_INFINITY, f64::NEG_INFINITY));
        assert!(!t.close(f64::INFINITY, f64::NEG_INFINITY));
        assert_eq!(abs_error(f64::INFINITY, f64::INFINITY), 0.0);
        assert!(t.masked(-1e9, f64::NEG_INFINITY) && t.masked(f64::NEG_INFINITY, -1e4));
        assert!(t.masked(f64::NEG_INFINITY, f64::NEG_INFINITY));
        assert!(t.masked(-1e9, f32::MIN as f64), "masked_fill(-1e9) against torch.finfo(torch.float32).min");
        assert!(!t.masked(-9999.0, f64::NEG_INFINITY) && !t.masked(f64::NAN, f64::NEG_INFINITY));
        assert!(!t.masked(-1e9, 0.5));
        assert!(holds_mask("layers.3.attn.scores") && !holds_mask("layers.3.attn.weights"));
        assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
        assert_eq!(unravel(0, &[]), Vec::<usize>::new());
    }
}
