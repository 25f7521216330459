//! `--attribute`'s table and JSON. The table gives the sum check (the terms' total next to
//! the model's own logit or logit difference), the largest terms and the largest (layer, head,
//! source token) contributions; JSON's `attribution` object has every term and every source.
//! The numbers come from the model (`analysis/attribute/`), their order from
//! `views::attribute`; this file lays them out.

use super::numbers::{f64_json, fixed};
use super::table;
use super::text::{cut, header, wrap_words};
use crate::trace::attribute::{Answer, Attribution, SUM_TOLERANCE};
use crate::views::attribute::{metric, Ranked};
use std::io::{self, Write};

/// Rows of each ranked table (JSON lists every term and source).
pub const TOP: usize = 10;

/// The sum check in one line.
fn check_line(a: &Attribution, p: usize) -> String {
    let what = if a.foil.is_some() { "logit difference" } else { "logit" };
    let verdict = if a.relative_error() <= SUM_TOLERANCE { "within" } else { "NOT within" };
    let mut line = format!(
        "sum of {} terms {} · the model's {what} {} · relative error {:.1e}, {verdict} {SUM_TOLERANCE:e}",
        a.terms.len(),
        fixed(a.total, p),
        fixed(a.logit, p),
        a.relative_error()
    );
    if let Some(c) = a.capped {
        line +=
            &format!(" (before the final soft-cap, which is not linear; after it the model returns {})", fixed(c, p));
    }
    line
}

/// A signed value for a table cell.
fn signed(x: f64, p: usize) -> String {
    let s = fixed(x, p);
    if x >= 0.0 && !s.starts_with('-') {
        format!("+{s}")
    } else {
        s
    }
}

/// The attribution's tables after the trace's: what is attributed, the sum check, the top
/// terms and the top sources.
pub fn write(a: &Attribution, r: &Ranked, precision: usize, width: usize, w: &mut dyn Write) -> io::Result<()> {
    let p = precision;
    writeln!(w)?;
    let head = format!(
        "direct logit attribution of {}: each part's output at that position through the final norm frozen at \
         the run's scale, onto the unembedding (docs/INTERVENTIONS.md)",
        metric(r)
    );
    for line in wrap_words(&head, width, "  ").into_iter().chain(wrap_words(&check_line(a, p), width, "  ")) {
        writeln!(w, "{line}")?;
    }
    let shown = r.terms.len().min(TOP);
    writeln!(w, "\ntop {shown} of {} terms, largest first", r.terms.len())?;
    let values: Vec<String> = r.terms.iter().take(TOP).map(|(_, v)| signed(*v, p)).collect();
    let value_w = values.iter().map(|v| v.chars().count()).max().unwrap_or(0).max("logit".len());
    // A term's id gets what the rank and logit columns leave (ids name layers and parts).
    let room = table::room(&["rank".len(), value_w], width, 8);
    let mut t = table::new_table();
    t.set_header(vec!["rank", "term", "logit"]);
    for (i, ((id, _), value)) in r.terms.iter().take(TOP).zip(values).enumerate() {
        t.add_row(vec![(i + 1).to_string(), cut(id, room), value]);
    }
    table::emit(&t, width, w)?;
    if r.sources.is_empty() {
        return Ok(());
    }
    let shown = r.sources.len().min(TOP);
    writeln!(w)?;
    let what =
        format!("top {shown} of {} sources: a head's term split by the token it read, largest first", r.sources.len());
    for line in wrap_words(&what, width, "  ") {
        writeln!(w, "{line}")?;
    }
    let values: Vec<String> = r.sources.iter().take(TOP).map(|s| signed(s.value, p)).collect();
    let value_w = values.iter().map(|v| v.chars().count()).max().unwrap_or(0).max("logit".len());
    // The source token's label gets what the other columns leave, up to 16.
    let room = table::room(&["rank".len(), "layer".len(), "head".len(), value_w], width, 8);
    let mut t = table::new_table();
    t.set_header(vec!["rank".into(), "layer".into(), "head".into(), header("source token", room), "logit".into()]);
    for (i, (s, value)) in r.sources.iter().take(TOP).zip(values).enumerate() {
        let key = s.key.to_string();
        let source = format!("{key} {}", cut(&s.label, room.saturating_sub(key.len() + 1).clamp(4, 16)));
        t.add_row(vec![(i + 1).to_string(), s.layer.to_string(), s.head.to_string(), source, value]);
    }
    table::emit(&t, width, w)
}

fn answer_json(a: &Answer) -> String {
    let text = a.text.as_ref().map_or(String::new(), |t| format!(", \"text\": {}", json(t)));
    format!("{{\"id\": {}, \"token\": {}{text}}}", a.id, a.token.as_ref().map_or("null".to_string(), |t| json(t)))
}

fn json(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `attribution`: `{"position", "answer", "foil", "logit", ("capped"), "total",
/// "relative_error", "terms": [{"id", "layer", "name", "index", "value"}], "sources":
/// {"dims", "shape", "values"}}`; terms in the order the forward pass adds them.
pub fn to_json(a: &Attribution) -> String {
    let opt = |x: Option<usize>| x.map_or("null".to_string(), |v| v.to_string());
    let terms: Vec<String> = a
        .terms
        .iter()
        .map(|t| {
            format!(
                "{{\"id\": {}, \"layer\": {}, \"name\": {}, \"index\": {}, \"value\": {}}}",
                json(&t.id()),
                opt(t.layer),
                json(t.name),
                opt(t.index),
                f64_json(t.value)
            )
        })
        .collect();
    let (layers, heads, keys) = a.shape;
    let rows: Vec<String> = a
        .sources
        .chunks(keys.max(1))
        .map(|r| format!("[{}]", r.iter().map(|&x| f64_json(x)).collect::<Vec<_>>().join(",")))
        .collect();
    let by_layer: Vec<String> = rows.chunks(heads.max(1)).map(|h| format!("[{}]", h.join(","))).collect();
    let capped = a.capped.map_or(String::new(), |c| format!("\"capped\": {}, ", f64_json(c)));
    format!(
        "{{\"position\": {}, \"answer\": {}, \"foil\": {}, \"logit\": {}, {capped}\"total\": {}, \"relative_error\": {}, \
         \"terms\": [\n    {}],\n    \"sources\": {{\"dims\": [\"layer\", \"head\", \"key_pos\"], \"shape\": [{layers}, {heads}, {keys}], \
         \"values\": [{}]}}}}",
        a.position,
        answer_json(&a.answer),
        a.foil.as_ref().map_or("null".to_string(), answer_json),
        f64_json(a.logit),
        f64_json(a.total),
        f64_json(a.relative_error()),
        terms.join(",\n    "),
        by_layer.join(",")
    )
}
