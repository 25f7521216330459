//! The diff report, as text for people or JSON for CI (`--format json`).
//!
//! JSON report (one object):
//!
//! ```text
//! {"a": {"path", "kind", "steps"}, "b": {…},
//!  "tolerance": {"atol", "rtol", "rule": "|a - b| <= atol + rtol * |b|"},
//!  "within_tolerance": bool, "compared": n, "diverged": n,
//!  "first_divergence": null | {"id", "layer", "name", "kind": "value" | "shape", "head",
//!                              "index", "dims", "a", "b", "abs_error", "allowed"}
//!                             (a shape divergence has "shape_a", "shape_b" instead),
//!  "steps": [{"id", "shape_a", "shape_b", "max_abs_error", "at", "outside", "size", "ok"}],
//!  "only_in_a": [ids], "only_in_b": [ids], "shape_mismatches": [{"id", "a", "b"}],
//!  "ignored": {"a": [names], "b": [names]}, "notes": [text]}
//! ```
//!
//! Numbers JSON cannot hold are the strings "nan", "inf", "-inf", as in the trace document.

use super::compare::{Leaf, Outcome, Point, StepResult, Tol};
use super::load::{list, Loaded};
use crate::trace::split_id;
use serde_json::{json, Value};
use std::io::{self, Write};

/// Everything a diff found.
pub struct Report<'a> {
    pub a: &'a Loaded,
    pub b: &'a Loaded,
    pub tol: Tol,
    pub results: Vec<StepResult>,
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
}

impl Report<'_> {
    pub fn ok(&self) -> bool {
        !self.results.iter().any(StepResult::diverges)
    }

    fn first(&self) -> Option<&StepResult> {
        self.results.iter().find(|r| r.diverges())
    }

    fn notes(&self) -> Vec<String> {
        self.a.notes.iter().chain(&self.b.notes).cloned().collect()
    }
}

fn num(v: f64) -> Value {
    match v {
        v if v.is_nan() => json!("nan"),
        v if v.is_infinite() => json!(if v > 0.0 { "inf" } else { "-inf" }),
        v => json!(v),
    }
}

fn leaf_json(l: &Leaf) -> Value {
    match l {
        Leaf::Num(v) => num(*v),
        Leaf::Str(s) => json!(s),
    }
}

/// The head a per-head index is in: the document's own head number after `--head`.
fn head_of(r: &StepResult, index: &[usize]) -> Option<usize> {
    (r.dims.first().map(String::as_str) == Some("head"))
        .then(|| index.first().map(|&i| r.heads.as_ref().and_then(|h| h.get(i).copied()).unwrap_or(i)))
        .flatten()
}

pub fn write_json(rep: &Report, w: &mut dyn Write) -> io::Result<()> {
    let side = |l: &Loaded| json!({"path": l.path, "kind": l.kind, "steps": l.steps.len()});
    let first = rep.first().map(|r| {
        let (layer, name) = split_id(&r.id);
        let mut o = json!({"id": r.id, "layer": layer, "name": name});
        match &r.outcome {
            Outcome::Shape => {
                o["kind"] = json!("shape");
                o["shape_a"] = json!(r.shape_a);
                o["shape_b"] = json!(r.shape_b);
            }
            Outcome::Values { first_bad: Some(p), .. } => {
                o["kind"] = json!("value");
                o["head"] = json!(head_of(r, &p.index));
                o["index"] = json!(p.index);
                o["dims"] = json!(r.dims);
                o["a"] = leaf_json(&p.a);
                o["b"] = leaf_json(&p.b);
                if let (Leaf::Num(a), Leaf::Num(b)) = (&p.a, &p.b) {
                    o["abs_error"] = num(super::compare::abs_error(*a, *b));
                    o["allowed"] = num(rep.tol.allowed(*b));
                }
            }
            Outcome::Values { .. } => {}
        }
        o
    });
    let steps: Vec<Value> = rep
        .results
        .iter()
        .map(|r| match &r.outcome {
            Outcome::Shape => json!({"id": r.id, "shape_a": r.shape_a, "shape_b": r.shape_b, "ok": false}),
            Outcome::Values { max_abs, max_at, bad, .. } => json!({
                "id": r.id, "shape_a": r.shape_a, "shape_b": r.shape_b, "max_abs_error": num(*max_abs),
                "at": max_at.as_ref().map(|p| &p.index), "outside": bad,
                "size": r.shape_a.iter().product::<usize>(), "ok": *bad == 0,
            }),
        })
        .collect();
    let shapes: Vec<Value> = rep
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Shape))
        .map(|r| json!({"id": r.id, "a": r.shape_a, "b": r.shape_b}))
        .collect();
    let doc = json!({
        "a": side(rep.a), "b": side(rep.b),
        "tolerance": {"atol": rep.tol.atol, "rtol": rep.tol.rtol, "rule": "|a - b| <= atol + rtol * |b|"},
        "within_tolerance": rep.ok(),
        "compared": rep.results.len(),
        "diverged": rep.results.iter().filter(|r| r.diverges()).count(),
        "first_divergence": first,
        "steps": steps,
        "only_in_a": rep.only_a, "only_in_b": rep.only_b,
        "shape_mismatches": shapes,
        "ignored": {"a": rep.a.ignored, "b": rep.b.ignored},
        "notes": rep.notes(),
    });
    serde_json::to_writer_pretty(&mut *w, &doc)?;
    writeln!(w)
}

/// A value as attn-trace prints numbers: the shortest decimal of its f32, or nan/inf.
fn fmt(l: &Leaf) -> String {
    match l {
        Leaf::Num(v) if v.is_nan() => "nan".into(),
        Leaf::Num(v) if v.is_infinite() => (if *v > 0.0 { "inf" } else { "-inf" }).into(),
        Leaf::Num(v) => zmij::Buffer::new().format_finite(*v as f32).to_string(),
        Leaf::Str(s) => format!("{s:?}"),
    }
}

fn fmt_err(e: f64) -> String {
    match e {
        e if e.is_nan() => "nan".into(),
        e if e.is_infinite() => "inf".into(),
        0.0 => "0".into(),
        e => format!("{e:.3e}"),
    }
}

fn dims_text(shape: &[usize]) -> String {
    let s: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    if s.is_empty() {
        "scalar".into()
    } else {
        s.join("×")
    }
}

fn where_text(r: &StepResult, p: &Point) -> String {
    let named: Vec<String> = r.dims.iter().zip(&p.index).map(|(d, i)| format!("{d} {i}")).collect();
    let head = head_of(r, &p.index).map(|h| format!(", head {h}")).unwrap_or_default();
    let layer = split_id(&r.id).0.map(|l| format!("layer {l}")).unwrap_or_else(|| "no layer".into());
    format!("{} ({layer}{head}) at {:?} = {}", r.id, p.index, named.join(", "))
}

pub fn write_text(rep: &Report, w: &mut dyn Write) -> io::Result<()> {
    for (tag, l) in [("A", rep.a), ("B", rep.b)] {
        writeln!(w, "{tag}  {}  ({}, {} steps)", l.path, l.kind, l.steps.len())?;
    }
    let t = rep.tol;
    writeln!(w, "tolerance  |a − b| ≤ atol + rtol·|b|, atol {:e}, rtol {:e} (B is the reference)", t.atol, t.rtol)?;
    writeln!(w)?;
    match rep.first() {
        None => writeln!(w, "no divergence")?,
        Some(r) => match &r.outcome {
            Outcome::Shape => {
                writeln!(w, "first divergence: {}: shapes differ, A {:?}, B {:?}", r.id, r.shape_a, r.shape_b)?
            }
            Outcome::Values { first_bad: Some(p), .. } => {
                writeln!(w, "first divergence: {}", where_text(r, p))?;
                match (&p.a, &p.b) {
                    (Leaf::Num(a), Leaf::Num(b)) => writeln!(
                        w,
                        "  a {}   b {}   |a − b| {} > allowed {}",
                        fmt(&p.a),
                        fmt(&p.b),
                        fmt_err(super::compare::abs_error(*a, *b)),
                        fmt_err(t.allowed(*b))
                    )?,
                    _ => writeln!(w, "  a {}   b {}", fmt(&p.a), fmt(&p.b))?,
                }
            }
            Outcome::Values { .. } => {}
        },
    }
    writeln!(w)?;
    let width = rep.results.iter().map(|r| r.id.chars().count()).max().unwrap_or(4).max(4);
    writeln!(w, "{:<width$}  {:<12}  {:>11}  {:<14}  outside tolerance", "step", "shape", "max |a − b|", "at")?;
    for r in &rep.results {
        match &r.outcome {
            Outcome::Shape => writeln!(
                w,
                "{:<width$}  A {} vs B {}: shape mismatch",
                r.id,
                dims_text(&r.shape_a),
                dims_text(&r.shape_b)
            )?,
            Outcome::Values { max_abs, max_at, bad, .. } => {
                let at = max_at.as_ref().filter(|_| *max_abs != 0.0).map(|p| format!("{:?}", p.index));
                let size: usize = r.shape_a.iter().product();
                writeln!(
                    w,
                    "{:<width$}  {:<12}  {:>11}  {:<14}  {bad} of {size}",
                    r.id,
                    dims_text(&r.shape_a),
                    fmt_err(*max_abs),
                    at.unwrap_or_else(|| "—".into()),
                )?
            }
        }
    }
    writeln!(w)?;
    for (tag, ids) in [("A", &rep.only_a), ("B", &rep.only_b)] {
        if !ids.is_empty() {
            writeln!(w, "only in {tag} ({}): {}", ids.len(), list_long(ids))?;
        }
    }
    for (tag, l) in [("A", rep.a), ("B", rep.b)] {
        if !l.ignored.is_empty() {
            writeln!(w, "not step names, ignored in {tag}: {}", list(&l.ignored))?;
        }
    }
    for note in rep.notes() {
        writeln!(w, "note: {note}")?;
    }
    let diverged = rep.results.iter().filter(|r| r.diverges()).count();
    let n = rep.results.len();
    if rep.ok() {
        writeln!(w, "result: all {n} common steps within tolerance")
    } else {
        writeln!(w, "result: {diverged} of {n} common steps diverge")
    }
}

/// Up to twelve names, then a count.
fn list_long(ids: &[String]) -> String {
    let shown: Vec<&str> = ids.iter().take(12).map(String::as_str).collect();
    match ids.len() {
        n if n > 12 => format!("{}, … and {} more", shown.join(", "), n - 12),
        _ => shown.join(", "),
    }
}
