//! The comparison's report, as text for people or one JSON object for CI (`--format json`).
//!
//! JSON report:
//!
//! ```text
//! {"a": {"model", "family", "stored"}, "b": {…},
//!  "tokens": [labels], "token_ids": [ids] | null, "ids_from": null | "a" | "b",
//!  "threshold": x, "rule": "||a - b|| / ||b|| over the step's values, B the reference",
//!  "within_threshold": bool, "compared": n, "diverged": n,
//!  "first_divergence": null | {"id", "layer", "relative_error", "max_abs_error", "at", "dims"},
//!  "layers": [{"layer": null (the embeddings) | i, "relative_error", "max_abs_error"}],
//!  "steps": [{"rank", "id", "layer", "shape", "relative_error", "max_abs_error", "at",
//!             "diverges"} (ids and masks: "equal" instead of "max_abs_error" and "at", and
//!             a relative error of 0 or "inf"; a shape mismatch: "shape_b", "inf")],
//!  "heads": [{"rank", "layer", "head", "js_mean", "js_max", "js_max_query"}],
//!  "predictions": null | {"positions", "agree", "kl_mean", "kl_max", "kl_max_pos",
//!                         "rows": [{"pos", "token", "agree", "kl", "a": [top], "b": [top]}]},
//!  "only_in_a": [ids], "only_in_b": [ids], "notes": [text]}
//! ```
//!
//! `steps` and `heads` are ranked (largest first), `layers` and `rows` in order. JS
//! divergences are in bits, KL in nats. Numbers JSON cannot hold are "nan", "inf", "-inf".

use super::found::{Comparison, Outcome, Position, StepDiff};
use super::measure::index;
use crate::trace::Prediction;
use serde_json::{json, Value};
use std::io::{self, Write};

fn num(v: f64) -> Value {
    match v {
        v if v.is_nan() => json!("nan"),
        v if v.is_infinite() => json!(if v > 0.0 { "inf" } else { "-inf" }),
        v => json!(v),
    }
}

fn step_json(rank: usize, s: &StepDiff, threshold: f64) -> Value {
    let mut o =
        json!({"rank": rank, "id": s.id, "layer": s.layer, "shape": s.shape, "relative_error": num(s.relative())});
    match &s.outcome {
        Outcome::Values(e) => {
            o["max_abs_error"] = num(e.max_abs);
            o["at"] = json!(index(e.at, &s.shape));
        }
        Outcome::Equal(eq) => o["equal"] = json!(eq),
        Outcome::Shapes(b) => o["shape_b"] = json!(b),
    }
    o["diverges"] = json!(s.diverges(threshold));
    o
}

fn top_json(top: &[Prediction]) -> Value {
    Value::Array(
        top.iter().map(|p| json!({"id": p.id, "token": p.token, "text": p.text, "prob": f32_value(p.prob)})).collect(),
    )
}

fn predictions_json(c: &Comparison) -> Value {
    let Some(rows) = &c.predictions else { return Value::Null };
    let rows: Vec<Value> = rows
        .iter()
        .enumerate()
        .map(|(i, p)| {
            json!({"pos": i, "token": c.labels.get(i), "agree": p.agree(), "kl": p.kl.map(num),
                   "a": top_json(&p.a), "b": top_json(&p.b)})
        })
        .collect();
    let (mean, max, at) =
        c.kl_summary().map_or((Value::Null, Value::Null, Value::Null), |(m, x, at)| (num(m), num(x), json!(at)));
    json!({"positions": rows.len(), "agree": rows.len() - c.disagreements(), "kl_mean": mean, "kl_max": max,
           "kl_max_pos": at, "rows": rows})
}

pub fn write_json(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    let side = |i: usize| json!({"model": c.sides[i].given, "family": c.sides[i].family, "stored": c.sides[i].stored});
    let first = c.first().map(|s| {
        let (max_abs, at) = match &s.outcome {
            Outcome::Values(e) => (num(e.max_abs), json!(index(e.at, &s.shape))),
            _ => (Value::Null, Value::Null),
        };
        json!({"id": s.id, "layer": s.layer, "relative_error": num(s.relative()), "max_abs_error": max_abs,
               "at": at, "dims": s.dims})
    });
    let layers: Vec<Value> = c
        .layers
        .iter()
        .map(|l| json!({"layer": l.layer, "relative_error": num(l.error.relative), "max_abs_error": num(l.error.max_abs)}))
        .collect();
    let steps: Vec<Value> =
        c.ranked_steps().iter().enumerate().map(|(i, s)| step_json(i + 1, s, c.threshold)).collect();
    let heads: Vec<Value> = c
        .ranked_heads()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            json!({"rank": i + 1, "layer": h.layer, "head": h.head, "js_mean": num(h.mean), "js_max": num(h.max),
                   "js_max_query": h.max_query})
        })
        .collect();
    let doc = json!({
        "a": side(0), "b": side(1),
        "tokens": c.labels, "token_ids": c.ids, "ids_from": c.ids_from,
        "threshold": num(c.threshold), "rule": "||a - b|| / ||b|| over the step's values, B the reference",
        "within_threshold": c.ok(),
        "compared": c.steps.len(),
        "diverged": c.steps.iter().filter(|s| s.diverges(c.threshold)).count(),
        "first_divergence": first,
        "layers": layers, "steps": steps, "heads": heads,
        "predictions": predictions_json(c),
        "only_in_a": c.only[0], "only_in_b": c.only[1],
        "notes": c.notes,
    });
    serde_json::to_writer_pretty(&mut *w, &doc)?;
    writeln!(w)
}

/// An error in three significant digits, or 0, inf, nan.
pub fn sci(e: f64) -> String {
    match e {
        e if e.is_nan() => "nan".into(),
        e if e.is_infinite() => "inf".into(),
        0.0 => "0".into(),
        e => format!("{e:.3e}"),
    }
}

/// `[head 1, pos 3, d_k 5]`.
fn at_text(s: &StepDiff) -> String {
    let Outcome::Values(e) = &s.outcome else { return String::new() };
    let Some(idx) = index(e.at, &s.shape) else { return String::new() };
    let named: Vec<String> = s.dims.iter().zip(&idx).map(|(d, i)| format!("{d} {i}")).collect();
    format!(" at [{}]", named.join(", "))
}

/// The text report: the sides and tokens, the first divergence, the layer profile, the ranked
/// steps and heads (`top` rows each), the predictions, what one side has alone, the verdict.
pub fn write_text(c: &Comparison, top: usize, width: usize, w: &mut dyn Write) -> io::Result<()> {
    write_header(c, width, w)?;
    writeln!(w)?;
    match c.first() {
        None => writeln!(w, "no step past the threshold")?,
        Some(s) => {
            let layer = s.layer.map_or("no layer".to_string(), |l| format!("layer {l}"));
            let max = match &s.outcome {
                Outcome::Values(e) => format!(", max |a − b| {}{}", sci(e.max_abs), at_text(s)),
                Outcome::Equal(_) => ", the values differ".to_string(),
                Outcome::Shapes(b) => format!(", shapes differ: A {:?}, B {b:?}", s.shape),
            };
            writeln!(w, "first divergence: {} ({layer}): relative error {}{max}", s.id, sci(s.relative()))?;
        }
    }
    write_layers(c, w)?;
    write_steps(c, top, w)?;
    write_heads(c, top, w)?;
    write_predictions(c, top, w)?;
    writeln!(w)?;
    for (tag, ids) in [("A", &c.only[0]), ("B", &c.only[1])] {
        if !ids.is_empty() {
            writeln!(w, "only in {tag} ({}), not compared: {}", ids.len(), ids.join(", "))?;
        }
    }
    let (n, bad) = (c.steps.len(), c.steps.iter().filter(|s| s.diverges(c.threshold)).count());
    match bad {
        0 => writeln!(w, "result: all {n} common steps within the threshold"),
        _ => writeln!(w, "result: {bad} of {n} common steps past the threshold"),
    }
}

/// The two sides, the tokens and the rule: the lines every format starts with.
pub fn write_header(c: &Comparison, width: usize, w: &mut dyn Write) -> io::Result<()> {
    for (i, tag) in ["A", "B"].iter().enumerate() {
        let s = &c.sides[i];
        let stored = s.stored.as_deref().map(|d| format!(", {d}")).unwrap_or_default();
        let reference = if i == 1 { "; the reference" } else { "" };
        writeln!(w, "{tag}  {}  ({}{stored}{reference})", crate::render::text::printable(&s.given), s.family)?;
    }
    let labels: Vec<String> = c.labels.iter().map(|l| crate::render::text::cut(l, 16)).collect();
    let from = c.ids_from.map(|s| format!(", side {}'s ids", s.to_uppercase())).unwrap_or_default();
    let tokens = format!("tokens ({}{from})  {}", labels.len(), labels.join(" "));
    for line in crate::render::text::wrap_words(&tokens, width, "  ") {
        writeln!(w, "{line}")?;
    }
    writeln!(w, "threshold  ‖a − b‖ / ‖b‖ above {} diverges (B is the reference)", sci(c.threshold))
}

fn write_layers(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "\nresidual stream, part by part (‖a − b‖ / ‖b‖ of what each part hands on)")?;
    let finite = c.layers.iter().map(|l| l.error.relative).filter(|r| r.is_finite());
    let max = finite.fold(0.0, f64::max);
    for l in &c.layers {
        let name = l.layer.map_or("embed".to_string(), |i| format!("layer {i}"));
        let r = l.error.relative;
        let bar = if max > 0.0 && r.is_finite() { (r / max * 24.0).round() as usize } else { 0 };
        let line = format!("  {name:<9} {:>9}  {}", sci(r), "█".repeat(bar));
        writeln!(w, "{}", line.trim_end())?;
    }
    Ok(())
}

fn write_steps(c: &Comparison, top: usize, w: &mut dyn Write) -> io::Result<()> {
    let ranked = c.ranked_steps();
    let shown = &ranked[..top.min(ranked.len())];
    writeln!(w, "\nsteps by relative error ({} of {}; --format json lists every one)", shown.len(), ranked.len())?;
    let width = shown.iter().map(|s| s.id.chars().count()).max().unwrap_or(4).max(4);
    writeln!(w, "  rank  {:<width$}  relative error  max |a − b|", "step")?;
    for (i, s) in shown.iter().enumerate() {
        let max = match &s.outcome {
            Outcome::Values(e) => sci(e.max_abs),
            Outcome::Equal(true) => "equal".into(),
            Outcome::Equal(false) => "differ".into(),
            Outcome::Shapes(_) => "shapes differ".into(),
        };
        let past = if s.diverges(c.threshold) { "  past" } else { "" };
        writeln!(w, "  {:<4}  {:<width$}  {:>14}  {max:>11}{past}", i + 1, s.id, sci(s.relative()))?;
    }
    Ok(())
}

fn write_heads(c: &Comparison, top: usize, w: &mut dyn Write) -> io::Result<()> {
    let ranked = c.ranked_heads();
    if ranked.is_empty() {
        return Ok(());
    }
    let shown = &ranked[..top.min(ranked.len())];
    writeln!(
        w,
        "\nheads by Jensen–Shannon divergence of their attention rows, in bits ({} of {}; --format heatmap draws \
         every head)",
        shown.len(),
        ranked.len()
    )?;
    writeln!(w, "  rank  layer  head       mean        max  at query")?;
    for (i, h) in shown.iter().enumerate() {
        let q = c.labels.get(h.max_query).map(|l| crate::render::text::cut(l, 12)).unwrap_or_default();
        writeln!(
            w,
            "  {:<4}  {:>5}  {:>4}  {:>9}  {:>9}  {} {q}",
            i + 1,
            h.layer,
            h.head,
            sci(h.mean),
            sci(h.max),
            h.max_query
        )?;
    }
    Ok(())
}

fn label(p: &[Prediction]) -> String {
    p.first().map_or("—".into(), |p| crate::render::text::cut(&p.label().unwrap_or_else(|| p.id.to_string()), 14))
}

fn write_predictions(c: &Comparison, top: usize, w: &mut dyn Write) -> io::Result<()> {
    let Some(rows) = &c.predictions else { return Ok(()) };
    let n = rows.len();
    let agree = n - c.disagreements();
    let kl = c
        .kl_summary()
        .map(|(m, x, at)| format!("; KL(B ‖ A) mean {}, max {} at position {at} (nats)", sci(m), sci(x)))
        .unwrap_or_default();
    writeln!(w, "\npredictions: the most probable next token agrees at {agree} of {n} positions{kl}")?;
    let apart: Vec<String> = rows.iter().enumerate().filter(|(_, p)| !p.agree()).map(|(i, _)| i.to_string()).collect();
    if !apart.is_empty() {
        let more = if apart.len() > 24 { format!(", … ({} in all)", apart.len()) } else { String::new() };
        writeln!(
            w,
            "  they differ at position{} {}{more}",
            if apart.len() == 1 { "" } else { "s" },
            apart[..apart.len().min(24)].join(", ")
        )?;
    }
    // The positions whose distributions differ most, disagreements first.
    let mut order: Vec<(usize, &Position)> = rows.iter().enumerate().collect();
    order.sort_by(|(i, x), (j, y)| {
        x.agree().cmp(&y.agree()).then(y.kl.unwrap_or(0.0).total_cmp(&x.kl.unwrap_or(0.0))).then(i.cmp(j))
    });
    writeln!(w, "  pos   token           A's top-1       B's top-1       same         KL")?;
    for (i, p) in order.into_iter().take(top) {
        let same = if p.agree() { "yes" } else { "no" };
        let token = crate::render::text::cut(c.labels.get(i).map_or("", String::as_str), 14);
        let kl = p.kl.map_or("—".into(), sci);
        writeln!(w, "  {i:<4}  {token:<14}  {:<14}  {:<14}  {same:<4}  {kl:>9}", label(&p.a), label(&p.b))?;
    }
    Ok(())
}

/// An f32 as JSON's number of its shortest decimal (0.0389 rather than 0.03890734165906906,
/// as the trace document writes its probabilities).
fn f32_value(x: f32) -> Value {
    x.to_string().parse::<f64>().map_or(Value::Null, num)
}
