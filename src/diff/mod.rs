//! `attn-trace diff A B`: where two computations of the same encoder part ways.
//!
//! Both inputs are read into steps by canonical id ([`load`], [`names`]), the steps both
//! hold are compared in trace order ([`compare`]) and the result is reported ([`report`]):
//! the first step that diverges (id, layer, head, multi-index, both values, the error), the
//! largest error per step, steps only one side has, shape mismatches. The verdict is the
//! exit code: 0 within tolerance, 1 outside it, 2 for unusable input (usage errors).

pub mod cli;
pub mod compare;
pub mod hints;
pub mod json;
pub mod load;
pub mod names;
pub mod report;
pub mod select;

use crate::error::usage;
use anyhow::Result;
use cli::{DiffCli, DiffFormat};
use compare::Tol;
use select::Selector;
use std::io::Write;

/// The step lists of the command line, parsed before any file is read.
#[derive(Default)]
struct Lists {
    only: Option<Selector>,
    skip: Option<Selector>,
    /// `None` without `--require`; `Some(None)` for `all`.
    require: Option<Option<Selector>>,
}

/// `--atol` and `--rtol`, checked, with the default `--mask-floor` (−1e4).
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
    Ok(Tol { atol, rtol, mask_floor: -1e4 })
}

/// The tolerance and step lists of the command line, checked.
fn lists(cli: &DiffCli) -> Result<(Tol, Lists)> {
    let tol = tolerance(cli.atol, cli.rtol)?;
    if !cli.mask_floor.is_finite() || cli.mask_floor >= 0.0 {
        return Err(usage(
            "--mask-floor",
            format!("{} is not a finite negative number", cli.mask_floor),
            "pass e.g. --mask-floor -1e4 (masked_fill(mask, -1e9) is below it)",
        ));
    }
    let parse = |flag: &str, v: &Option<String>| v.as_deref().map(|l| Selector::parse(flag, l)).transpose();
    let require = match cli.require.as_deref().map(str::trim) {
        None => None,
        Some("all") => Some(None),
        Some(list) => Some(Some(Selector::parse("--require", list)?)),
    };
    let lists = Lists { only: parse("--only", &cli.only)?, skip: parse("--skip", &cli.skip)?, require };
    Ok((Tol { mask_floor: cli.mask_floor, ..tol }, lists))
}

/// Keeps the steps `--only` and `--skip` choose.
fn choose(l: &mut load::Loaded, lists: &Lists) {
    l.steps.retain(|id, _| {
        lists.only.as_ref().is_none_or(|s| s.matches(id)) && !lists.skip.as_ref().is_some_and(|s| s.matches(id))
    });
}

/// Runs a diff and writes its report; `Ok(true)` when within tolerance.
pub fn run(cli: DiffCli, out: &mut dyn Write) -> Result<bool> {
    let (tol, lists) = lists(&cli)?;
    let (mut a, mut b) = (load::load(&cli.a)?, load::load(&cli.b)?);
    choose(&mut a, &lists);
    choose(&mut b, &lists);
    report(&a, &b, tol, &lists, cli.format, out)
}

/// Compares two loaded sides (every step, nothing required) and writes the report in
/// `format`; `Ok(true)` when within tolerance (the Python API's `diff` calls this with sides
/// it loaded itself).
pub fn write_report(
    a: &load::Loaded,
    b: &load::Loaded,
    tol: Tol,
    format: DiffFormat,
    out: &mut dyn Write,
) -> Result<bool> {
    report(a, b, tol, &Lists::default(), format, out)
}

fn report(
    a: &load::Loaded,
    b: &load::Loaded,
    tol: Tol,
    lists: &Lists,
    format: DiffFormat,
    out: &mut dyn Write,
) -> Result<bool> {
    let results = compare::compare(a, b, tol);
    if results.is_empty() {
        return Err(usage(
            format!("diff {} {}", a.path, b.path),
            format!("the traces have no step in common (A has {}; B has {})", summary(a), summary(b)),
            "name tensors by step id, e.g. layers.0.attn.weights (docs/DIFF.md)",
        ));
    }
    let only = |x: &load::Loaded, y: &load::Loaded| -> Vec<String> {
        let mut ids: Vec<String> = x.steps.keys().filter(|id| !y.steps.contains_key(*id)).cloned().collect();
        ids.sort_by_key(|id| (names::rank(id), id.clone()));
        ids
    };
    let (only_a, only_b) = (only(a, b), only(b, a));
    let missing = required(lists, b, &only_b)?;
    // A guess at the bug of every diverging step, not only the first: a second bug further on
    // has its own.
    let hints = results
        .iter()
        .map(|r| r.diverges().then(|| hints::hint(&r.id, &a.steps[&r.id], &b.steps[&r.id], b, tol)).flatten())
        .collect();
    let did_you_mean = [did_you_mean(a, b), did_you_mean(b, a)];
    let rep = report::Report { only_a, only_b, a, b, tol, results, missing, hints, did_you_mean };
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

/// The steps `--require` names that B holds and A lacks; a list that names no step of B is
/// a usage error (nothing could be required of A).
fn required(lists: &Lists, b: &load::Loaded, only_b: &[String]) -> Result<Vec<String>> {
    match &lists.require {
        None => Ok(Vec::new()),
        Some(None) => Ok(only_b.to_vec()),
        Some(Some(sel)) => {
            if !b.steps.keys().any(|id| sel.matches(id)) {
                return Err(usage(
                    "--require",
                    format!("the reference {} holds none of the steps named", b.path),
                    "require steps the reference holds, or --require all",
                ));
            }
            Ok(only_b.iter().filter(|id| sel.matches(id)).cloned().collect())
        }
    }
}

/// For each name `x` ignored, the step id it likely meant (a typo), if any.
fn did_you_mean(x: &load::Loaded, y: &load::Loaded) -> Vec<(String, String)> {
    x.ignored
        .iter()
        .filter_map(|name| {
            let ids = select::candidates(name, x.steps.keys().chain(y.steps.keys()));
            select::suggest(name, ids).map(|s| (name.clone(), s))
        })
        .collect()
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
