//! `--check`'s report: the largest difference of each compared tensor, the verdict against
//! the tolerance, the JSON `check` object and the one stderr line.

use anyhow::{anyhow, Result};
use candle_core::Tensor;
use serde_json::{json, Map, Value};

/// The largest absolute difference between attn-trace's tensor and the reference's.
#[derive(Debug, Clone)]
pub struct Diff {
    /// The step compared: `output` (final hidden states) or `logits` (at the last position).
    pub compared: &'static str,
    pub max_abs: f64,
    /// Where the largest difference is, as an index into `shape`.
    pub at: Vec<usize>,
    pub shape: Vec<usize>,
}

impl Diff {
    /// Compares `ours` with `theirs` (any shapes holding the same number of values; the
    /// reference's batch and sequence dimensions of one are dropped). A NaN on either side
    /// counts as an infinite difference, so it can never pass.
    pub fn between(compared: &'static str, ours: &Tensor, theirs: &Tensor) -> Result<Diff> {
        let a = ours.flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?;
        let b = theirs.flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?;
        if a.len() != b.len() {
            return Err(anyhow!(
                "--check: the reference's {compared} has {} values, attn-trace's {} (shape {:?} against {:?})",
                b.len(),
                a.len(),
                theirs.dims(),
                ours.dims()
            ));
        }
        let (mut max_abs, mut at) = (0.0f64, 0usize);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            let d = (*x as f64 - *y as f64).abs();
            if d.is_nan() || d > max_abs {
                max_abs = if d.is_nan() { f64::INFINITY } else { d };
                at = i;
            }
            if max_abs.is_infinite() {
                break;
            }
        }
        let shape = ours.dims().to_vec();
        Ok(Diff { compared, max_abs, at: unravel(at, &shape), shape })
    }

    fn to_json(&self, tol: f64) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("compared".into(), json!(self.compared));
        m.insert("max_abs_diff".into(), if self.max_abs.is_finite() { json!(self.max_abs) } else { json!("nan") });
        m.insert("at".into(), json!(self.at));
        m.insert("shape".into(), json!(self.shape));
        m.insert("ok".into(), json!(self.max_abs <= tol));
        m
    }

    fn line(&self, tol: f64) -> String {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        format!(
            "{} {:.3e} {} --check-tol {} at {:?} of {}",
            self.compared,
            self.max_abs,
            if self.max_abs <= tol { "≤" } else { ">" },
            tol_text(tol),
            self.at,
            dims.join("×")
        )
    }
}

/// `i` as an index into `shape` (row-major).
fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut at = vec![0; shape.len()];
    for (a, d) in at.iter_mut().zip(shape).rev() {
        *a = i % d.max(&1);
        i /= d.max(&1);
    }
    at
}

fn tol_text(tol: f64) -> String {
    if tol == 0.0 {
        "0".to_string()
    } else {
        format!("{tol:e}")
    }
}

/// The comparison of attn-trace's trace with an independent implementation.
#[derive(Debug, Clone)]
pub struct Check {
    /// The reference, as `candle-transformers 0.11 models::qwen2::Model`.
    pub reference: String,
    /// The first decides the JSON's top-level fields; every one must be within `tol`.
    pub diffs: Vec<Diff>,
    pub tol: f64,
    /// How the reference is known to differ (extra JSON fields, e.g. `reference_layer_norm`).
    pub notes: Vec<(&'static str, String)>,
}

impl Check {
    pub fn ok(&self) -> bool {
        self.diffs.iter().all(|d| d.max_abs <= self.tol)
    }

    /// The `check` object of the JSON document: the first comparison's fields at the top
    /// (`compared`, `max_abs_diff`, `at`, `shape`), the others under `also`.
    pub fn to_json(&self) -> Value {
        let mut m = self.diffs.first().map(|d| d.to_json(self.tol)).unwrap_or_default();
        m.insert("reference".into(), json!(self.reference));
        m.insert("tolerance".into(), json!(self.tol));
        m.insert("ok".into(), json!(self.ok()));
        let also: Vec<Value> = self.diffs.iter().skip(1).map(|d| Value::Object(d.to_json(self.tol))).collect();
        if !also.is_empty() {
            m.insert("also".into(), json!(also));
        }
        for (k, v) in &self.notes {
            m.insert((*k).into(), json!(v));
        }
        Value::Object(m)
    }

    /// The one stderr line: a note when it passes, the error's text when it fails.
    pub fn line(&self) -> String {
        let diffs: Vec<String> = self.diffs.iter().map(|d| d.line(self.tol)).collect();
        let notes: Vec<&str> = self.notes.iter().map(|(_, v)| v.as_str()).collect();
        format!(
            "check: {}: max |attn-trace − {}|: {}{}",
            if self.ok() { "ok" } else { "failed" },
            self.reference,
            diffs.join("; "),
            if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) },
        )
    }

    /// The error a failed check ends the run with (exit 1, after the output is written).
    pub fn failure(&self) -> anyhow::Error {
        anyhow!("{}", self.line())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn the_largest_difference_and_where_it_is() {
        let a = Tensor::new(&[[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]], &Device::Cpu).unwrap();
        let b = Tensor::new(&[[1.0f32, 2.0, 3.0], [4.0, 5.5, 6.1]], &Device::Cpu).unwrap();
        let d = Diff::between("output", &a, &b).unwrap();
        assert_eq!(d.at, vec![1, 1]);
        assert!((d.max_abs - 0.5).abs() < 1e-9);
        let check = Check { reference: "r".into(), diffs: vec![d], tol: 0.4, notes: vec![] };
        assert!(!check.ok());
        assert!(check.line().starts_with("check: failed"), "{}", check.line());
    }

    #[test]
    fn a_nan_never_passes() {
        let a = Tensor::new(&[1.0f32, f32::NAN], &Device::Cpu).unwrap();
        let b = Tensor::new(&[1.0f32, 2.0], &Device::Cpu).unwrap();
        let d = Diff::between("logits", &a, &b).unwrap();
        assert!(d.max_abs.is_infinite());
        let check = Check { reference: "r".into(), diffs: vec![d], tol: f64::MAX, notes: vec![] };
        assert!(!check.ok());
        assert_eq!(check.to_json()["max_abs_diff"], "nan");
    }
}
