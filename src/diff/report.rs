//! The diff report, as text for people or JSON for CI (`--format json`).
//!
//! JSON report (one object):
//!
//! ```text
//! {"a": {"path", "kind", "steps"}, "b": {…},
//!  "tolerance": {"atol", "rtol", "rule": "|a - b| <= atol + rtol * |b|", "mask_floor"},
//!  "within_tolerance": bool, "compared": n, "diverged": n,
//!  "first_divergence": null | {"id", "layer", "name", "kind": "value" | "shape", "head",
//!                              "index", "dims", "a", "b", "abs_error", "allowed", "why",
//!                              "hint"}
//!                             (a shape divergence has "shape_a", "shape_b" instead),
//!  "steps": [{"id", "shape_a", "shape_b", "max_abs_error", "at", "outside", "masked",
//!             "size", "ok", "hint"}],
//!  "only_in_a": [ids], "only_in_b": [ids], "shape_mismatches": [{"id", "a", "b"}],
//!  "required_missing": [ids], "ignored": {"a": [names], "b": [names]},
//!  "did_you_mean": {"a": {name: id}, "b": {name: id}}, "notes": [text]}
//! ```
//!
//! `why` says in words why the first value diverges (for a non-finite value, what each side
//! holds); `hint` is a guess at the bug ([`super::hints`]) or null, for the first divergence
//! and for every step (null for a step within tolerance). The table gives each diverging
//! step's hint under its row, a hint that repeats once, under the first step that has it,
//! with a count of the others. `ignored` lists every name in full; the table shows the first
//! [`SHOWN`] and says how many more.
//!
//! Numbers JSON cannot hold are the strings "nan", "inf", "-inf", as in the trace document.

use super::compare::{Leaf, Outcome, Point, StepResult, Tol};
use super::load::Loaded;
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
    /// Steps `--require` names that B holds and A lacks: each fails the diff.
    pub missing: Vec<String>,
    /// A guess at each diverging step's bug, in the order of `results`.
    pub hints: Vec<Option<String>>,
    /// Ignored names of A and of B with the step id each likely meant.
    pub did_you_mean: [Vec<(String, String)>; 2],
}

/// How many ignored names the table shows before a count.
pub const SHOWN: usize = 20;

impl Report<'_> {
    pub fn ok(&self) -> bool {
        !self.results.iter().any(StepResult::diverges) && self.missing.is_empty()
    }

    fn first(&self) -> Option<&StepResult> {
        self.results.iter().find(|r| r.diverges())
    }

    /// The first divergence's hint.
    fn first_hint(&self) -> Option<&String> {
        let i = self.results.iter().position(StepResult::diverges)?;
        self.hints.get(i)?.as_ref()
    }

    /// The table's hints: each distinct hint under the first step that has it, with the other
    /// steps that have the same one (the same bug seen again, often in every later layer),
    /// so that a repeated hint is one line, not one per step.
    fn hint_lines(&self) -> Vec<Option<(String, Vec<&str>)>> {
        let mut lines: Vec<Option<(String, Vec<&str>)>> = vec![None; self.results.len()];
        let mut first_of: Vec<(&String, usize)> = Vec::new();
        for (i, (r, h)) in self.results.iter().zip(&self.hints).enumerate() {
            let Some(h) = h else { continue };
            match first_of.iter().find(|(text, _)| *text == h) {
                Some(&(_, at)) => {
                    if let Some((_, same)) = &mut lines[at] {
                        same.push(&r.id);
                    }
                }
                None => {
                    first_of.push((h, i));
                    lines[i] = Some((h.clone(), Vec::new()));
                }
            }
        }
        lines
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

/// Why two values disagree, in words: what each side holds when one is not finite.
pub fn why(a: f64, b: f64, tol: Tol) -> String {
    let holds = |v: f64| match v {
        v if v.is_nan() => "NaN".to_string(),
        v if v == f64::NEG_INFINITY => "-inf (masked)".to_string(),
        v if v.is_infinite() => "+inf".to_string(),
        v => format!("the finite value {}", fmt(&Leaf::Num(v))),
    };
    if a.is_finite() && b.is_finite() {
        let err = super::compare::abs_error(a, b);
        return format!("|a − b| {} > allowed {}", fmt_err(err), fmt_err(tol.allowed(b)));
    }
    let floor = if a == f64::NEG_INFINITY || b == f64::NEG_INFINITY {
        format!("; masked scores are −inf or values ≤ --mask-floor {:e}", tol.mask_floor)
    } else {
        String::new()
    };
    format!("A holds {}, B {}{floor}", holds(a), holds(b))
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
                    o["why"] = json!(why(*a, *b, rep.tol));
                }
            }
            Outcome::Values { .. } => {}
        }
        o["hint"] = json!(rep.first_hint());
        o
    });
    let steps: Vec<Value> = rep
        .results
        .iter()
        .zip(&rep.hints)
        .map(|(r, hint)| match &r.outcome {
            Outcome::Shape => {
                json!({"id": r.id, "shape_a": r.shape_a, "shape_b": r.shape_b, "ok": false, "hint": hint})
            }
            Outcome::Values { max_abs, max_at, bad, masked, .. } => json!({
                "id": r.id, "shape_a": r.shape_a, "shape_b": r.shape_b, "max_abs_error": num(*max_abs),
                "at": max_at.as_ref().map(|p| &p.index), "outside": bad, "masked": masked,
                "size": r.shape_a.iter().product::<usize>(), "ok": *bad == 0, "hint": hint,
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
        "tolerance": {"atol": rep.tol.atol, "rtol": rep.tol.rtol, "rule": "|a - b| <= atol + rtol * |b|",
                      "mask_floor": rep.tol.mask_floor},
        "within_tolerance": rep.ok(),
        "compared": rep.results.len(),
        "diverged": rep.results.iter().filter(|r| r.diverges()).count(),
        "first_divergence": first,
        "steps": steps,
        "only_in_a": rep.only_a, "only_in_b": rep.only_b,
        "shape_mismatches": shapes,
        "required_missing": rep.missing,
        "ignored": {"a": rep.a.ignored, "b": rep.b.ignored},
        "did_you_mean": {"a": meant(&rep.did_you_mean[0]), "b": meant(&rep.did_you_mean[1])},
        "notes": rep.notes(),
    });
    serde_json::to_writer_pretty(&mut *w, &doc)?;
    writeln!(w)
}

fn meant(pairs: &[(String, String)]) -> Value {
    Value::Object(pairs.iter().map(|(k, v)| (k.clone(), json!(v))).collect())
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
    write_first(rep, w)?;
    writeln!(w)?;
    write_table(rep, w)?;
    writeln!(w)?;
    write_lists(rep, w)?;
    let diverged = rep.results.iter().filter(|r| r.diverges()).count();
    let n = rep.results.len();
    let missing = match rep.missing.len() {
        0 => String::new(),
        m => format!("; {m} required step{} missing from A", if m == 1 { "" } else { "s" }),
    };
    if rep.ok() {
        writeln!(w, "result: all {n} common steps within tolerance")
    } else {
        writeln!(w, "result: {diverged} of {n} common steps diverge{missing}")
    }
}

fn write_first(rep: &Report, w: &mut dyn Write) -> io::Result<()> {
    match rep.first() {
        None => writeln!(w, "no divergence")?,
        Some(r) => match &r.outcome {
            Outcome::Shape => {
                writeln!(w, "first divergence: {}: shapes differ, A {:?}, B {:?}", r.id, r.shape_a, r.shape_b)?
            }
            Outcome::Values { first_bad: Some(p), .. } => {
                writeln!(w, "first divergence: {}", where_text(r, p))?;
                match (&p.a, &p.b) {
                    (Leaf::Num(a), Leaf::Num(b)) => {
                        writeln!(w, "  a {}   b {}   {}", fmt(&p.a), fmt(&p.b), why(*a, *b, rep.tol))?
                    }
                    _ => writeln!(w, "  a {}   b {}", fmt(&p.a), fmt(&p.b))?,
                }
            }
            Outcome::Values { .. } => {}
        },
    }
    match rep.first_hint() {
        Some(h) => writeln!(w, "hint: {h}"),
        None => Ok(()),
    }
}

fn write_table(rep: &Report, w: &mut dyn Write) -> io::Result<()> {
    let width = rep.results.iter().map(|r| r.id.chars().count()).max().unwrap_or(4).max(4);
    writeln!(w, "{:<width$}  {:<12}  {:>11}  {:<14}  outside tolerance", "step", "shape", "max |a − b|", "at")?;
    for (r, hint) in rep.results.iter().zip(rep.hint_lines()) {
        match &r.outcome {
            Outcome::Shape => writeln!(
                w,
                "{:<width$}  A {} vs B {}: shape mismatch",
                r.id,
                dims_text(&r.shape_a),
                dims_text(&r.shape_b)
            )?,
            Outcome::Values { max_abs, max_at, bad, masked, .. } => {
                let at = max_at.as_ref().filter(|_| *max_abs != 0.0).map(|p| format!("{:?}", p.index));
                let size: usize = r.shape_a.iter().product();
                let masked = if *masked > 0 { format!(" ({masked} masked on both sides)") } else { String::new() };
                writeln!(
                    w,
                    "{:<width$}  {:<12}  {:>11}  {:<14}  {bad} of {size}{masked}",
                    r.id,
                    dims_text(&r.shape_a),
                    fmt_err(*max_abs),
                    at.unwrap_or_else(|| "—".into()),
                )?
            }
        }
        if let Some((text, same)) = hint {
            writeln!(w, "  hint: {text}{}", also(&same))?;
        }
    }
    Ok(())
}

/// " (the same at 2 more steps: layers.1.attn.scores, layers.2.attn.scores)", or "".
fn also(same: &[&str]) -> String {
    match same.len() {
        0 => String::new(),
        n => {
            let s = if n == 1 { "" } else { "s" };
            let shown: Vec<&str> = same.iter().take(3).copied().collect();
            let more = if n > 3 { ", …" } else { "" };
            format!(" (the same at {n} more step{s}: {}{more})", shown.join(", "))
        }
    }
}

fn write_lists(rep: &Report, w: &mut dyn Write) -> io::Result<()> {
    for (tag, ids) in [("A", &rep.only_a), ("B", &rep.only_b)] {
        if !ids.is_empty() {
            writeln!(w, "only in {tag} ({}): {}", ids.len(), list_long(ids))?;
        }
    }
    if !rep.missing.is_empty() {
        let meant = |id: &String| rep.did_you_mean[0].iter().find(|(_, m)| m == id).map(|(n, _)| n);
        let named: Vec<String> = rep
            .missing
            .iter()
            .map(|id| meant(id).map_or(id.clone(), |n| format!("{id} (A has {n}: a typo?)")))
            .collect();
        writeln!(w, "required by --require, missing from A ({}): {}", named.len(), named.join(", "))?;
    }
    for (i, (tag, l)) in [("A", rep.a), ("B", rep.b)].into_iter().enumerate() {
        if l.ignored.is_empty() {
            continue;
        }
        writeln!(w, "not step names, ignored in {tag} ({}):", l.ignored.len())?;
        for name in l.ignored.iter().take(SHOWN) {
            match rep.did_you_mean[i].iter().find(|(n, _)| n == name) {
                Some((_, id)) => writeln!(w, "  {name}  (did you mean {id}?)")?,
                None => writeln!(w, "  {name}")?,
            }
        }
        if l.ignored.len() > SHOWN {
            writeln!(w, "  … and {} more (--format json lists every one)", l.ignored.len() - SHOWN)?;
        }
    }
    for note in rep.notes() {
        writeln!(w, "note: {note}")?;
    }
    Ok(())
}

/// Up to twelve names, then a count.
fn list_long(ids: &[String]) -> String {
    let shown: Vec<&str> = ids.iter().take(12).map(String::as_str).collect();
    match ids.len() {
        n if n > 12 => format!("{}, … and {} more", shown.join(", "), n - 12),
        _ => shown.join(", "),
    }
}
