//! `attn-trace diff A B`: where two computations of the same encoder part ways.
//!
//! Both inputs are read into steps by canonical id ([`load`], [`names`]), the steps both
//! hold are compared in trace order ([`compare`]) and the result is reported ([`report`]):
//! the first step that diverges (id, layer, head, multi-index, both values, the error), the
//! largest error per step, steps only one side has, shape mismatches. The verdict is the
//! exit code: 0 within tolerance, 1 outside it, 2 for unusable input (usage errors).

pub mod cli;
pub mod compare;
pub mod json;
pub mod load;
pub mod names;
pub mod report;

use crate::error::usage;
use anyhow::Result;
use cli::{DiffCli, DiffFormat};
use compare::Tol;
use std::io::Write;

/// Runs a diff and writes its report; `Ok(true)` when within tolerance.
pub fn run(cli: DiffCli, out: &mut dyn Write) -> Result<bool> {
    let tol = tolerance(cli.atol, cli.rtol)?;
    let a = load::load(&cli.a)?;
    let b = load::load(&cli.b)?;
    write_report(&a, &b, tol, cli.format, out)
}

/// `--atol` and `--rtol`, checked.
pub fn tolerance(atol: f64, rtol: f64) -> Result<Tol> {
    for (flag, v) in [("--atol", atol), ("--rtol", rtol)] {
        if !v.is_finite() || v < 0.0 {
            return Err(usage(
                flag,
                format!("{v} is not a finite, non-negative number"),
                format!("pass e.g. {flag} 1e-5"),
            ));
        }
    }
    Ok(Tol { atol, rtol })
}

/// Compares two loaded sides and writes the report in `format`; `Ok(true)` when within
/// tolerance (the Python API's `diff` calls this with sides it loaded itself).
pub fn write_report(
    a: &load::Loaded,
    b: &load::Loaded,
    tol: Tol,
    format: DiffFormat,
    out: &mut dyn Write,
) -> Result<bool> {
    let results = compare::compare(a, b, tol);
    if results.is_empty() {
        return Err(usage(
            format!("diff {} {}", a.path, b.path),
            format!("the traces have no step in common (A has {}; B has {})", summary(a), summary(b)),
            "name tensors by step id, e.g. layers.0.attn.weights (README: Traces as test material)",
        ));
    }
    let only = |x: &load::Loaded, y: &load::Loaded| -> Vec<String> {
        let mut ids: Vec<String> = x.steps.keys().filter(|id| !y.steps.contains_key(*id)).cloned().collect();
        ids.sort_by_key(|id| (names::rank(id), id.clone()));
        ids
    };
    let rep = report::Report { only_a: only(a, b), only_b: only(b, a), a, b, tol, results };
    let mut w = std::io::BufWriter::new(out);
    let written = match format {
        DiffFormat::Table => report::write_text(&rep, &mut w),
        DiffFormat::Json => report::write_json(&rep, &mut w),
    };
    match written.and_then(|()| w.flush()) {
        // `attn-trace diff … | head -3`: the reader left, but the verdict still stands.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(rep.ok()),
        Err(e) => Err(e.into()),
        Ok(()) => Ok(rep.ok()),
    }
}

/// What a side holds, for the "nothing in common" message.
fn summary(l: &load::Loaded) -> String {
    let steps: Vec<String> = l.steps.keys().cloned().collect();
    match (steps.is_empty(), l.ignored.is_empty()) {
        (true, true) => "no tensors".into(),
        (true, false) => format!("no step names, only {}", load::list(&l.ignored)),
        _ => load::list(&steps),
    }
}
