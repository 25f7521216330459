//! A language model's next-token predictions: per position, the most probable next tokens
//! with their probabilities (from [`crate::trace::Trace::predictions`]). A table for people,
//! and the `predictions` object of the JSON document.

use super::numbers::f32_json;
use super::table;
use super::text::{cut, wrap_parts};
use crate::trace::{Prediction, Trace};
use std::io::{self, Write};

/// The table: one row per position, its token, then the predicted tokens strongest first.
pub fn write(trace: &Trace, width: usize, w: &mut dyn Write) -> io::Result<()> {
    let Some(rows) = &trace.predictions else { return Ok(()) };
    writeln!(w)?;
    let k = rows.first().map_or(0, |r| r.len());
    // A masked LM predicts the [MASK] positions (every position when there is none).
    let masked = trace.config.parts.masked_lm;
    let shown: Vec<usize> =
        (0..rows.len()).filter(|&i| !masked || trace.tokens[trace.position(i)] == "[MASK]").collect();
    let shown = if shown.is_empty() { (0..rows.len()).collect() } else { shown };
    let what = if masked { "masked-word predictions" } else { "next-token predictions" };
    let title = [what.to_string(), format!("top {k} per position, each with its probability")];
    for line in wrap_parts(&title, width) {
        writeln!(w, "{line}")?;
    }
    let mut t = table::new_table();
    t.set_header(vec!["pos", "token", if masked { "most likely fillers" } else { "most likely next tokens" }]);
    // The predictions column gets what the position and token columns leave of the width.
    let room = width.saturating_sub(6 + 14 + 4);
    for (i, row) in rows.iter().enumerate().filter(|(i, _)| shown.contains(i)) {
        let mut cell = String::new();
        for p in row {
            let item = format!("{} {:.2}", label(p), p.prob);
            let sep = if cell.is_empty() { "" } else { "  " };
            if cell.chars().count() + sep.len() + item.chars().count() > room {
                break;
            }
            cell.push_str(sep);
            cell.push_str(&item);
        }
        let pos = trace.position(i); // `--show-positions`: row i is this position
        t.add_row(vec![pos.to_string(), cut(&trace.label(pos), 12), cell]);
    }
    table::emit(&t, w)
}

/// A predicted token as the tables show it: its label cut to 14 columns, else `#id`.
pub(super) fn label(p: &Prediction) -> String {
    match p.label() {
        Some(t) => cut(&t, 14),
        None => format!("#{}", p.id),
    }
}

/// One predicted token as JSON: `{"id", "token", "text", "prob"}`, `text` (the decoded text,
/// as `input.texts`) only when the vocabulary spells bytes.
pub fn prediction_json(p: &Prediction) -> String {
    let text = match &p.text {
        Some(t) => format!(", \"text\": {}", serde_json::to_string(t).unwrap_or_else(|_| "null".into())),
        None => String::new(),
    };
    format!(
        "{{\"id\": {}, \"token\": {}{text}, \"prob\": {}}}",
        p.id,
        serde_json::to_string(&p.token).unwrap_or_else(|_| "null".into()),
        f32_json(p.prob)
    )
}

/// The JSON: `[{"pos", "token", "text", "top": [{"id", "token", "text", "prob"}, …]}, …]`
/// (`text` as in `input.texts`, when there are texts), probabilities as the shortest decimals
/// that read back to the same f32.
pub fn to_json(trace: &Trace) -> Option<String> {
    let rows = trace.predictions.as_ref()?;
    let items: Vec<String> = rows
        .iter()
        .enumerate()
        .map(|(r, row)| {
            let i = trace.position(r);
            let top: Vec<String> = row.iter().map(prediction_json).collect();
            let token = serde_json::to_string(&trace.tokens[i]).unwrap_or_else(|_| "null".into());
            let text = match trace.texts.as_ref().and_then(|t| t.get(i)) {
                Some(t) => format!(", \"text\": {}", serde_json::to_string(t).unwrap_or_else(|_| "null".into())),
                None => String::new(),
            };
            format!("{{\"pos\": {i}, \"token\": {token}{text}, \"top\": [{}]}}", top.join(", "))
        })
        .collect();
    Some(format!("[{}]", items.join(", ")))
}
