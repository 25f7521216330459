//! A language model's next-token predictions: per position, the most probable next tokens
//! with their probabilities (from [`crate::trace::Trace::predictions`]). A table for people,
//! and the `predictions` object of the JSON document.

use super::numbers::f32_json;
use super::table;
use super::text::{self, cut, wrap_parts};
use crate::trace::{Prediction, Trace};
use std::io::{self, Write};

/// The table: one row per position, its token, then the predicted tokens strongest first,
/// all `k` of them, on as many lines of the cell as the width needs.
pub fn write(trace: &Trace, width: usize, w: &mut dyn Write) -> io::Result<()> {
    let Some(rows) = &trace.predictions else { return Ok(()) };
    writeln!(w)?;
    let k = rows.first().map_or(0, |r| r.len());
    let shown = shown(trace);
    let masked = trace.config.parts.masked_lm;
    let what = if masked { "masked-word predictions" } else { "next-token predictions" };
    let title = [what.to_string(), format!("top {k} per position, each with its probability")];
    for line in wrap_parts(&title, width) {
        writeln!(w, "{line}")?;
    }
    // `--show-positions`: row i of the predictions is position `trace.position(i)`.
    let tokens: Vec<String> = shown.iter().map(|&i| cut(&trace.label(trace.position(i)), 12)).collect();
    let pos_w = shown.iter().map(|&i| trace.position(i).to_string().len()).max().unwrap_or(1).max("pos".len());
    let token_w = tokens.iter().map(|t| t.chars().count()).max().unwrap_or(0).max("token".len());
    // The predictions column gets what the position and token columns leave of the width.
    let room = table::room(&[pos_w, token_w], width, 8);
    let mut t = table::new_table();
    let header = if masked { "most likely fillers" } else { "most likely next tokens" };
    t.set_header(vec!["pos".to_string(), "token".to_string(), text::header(header, room)]);
    for (&i, token) in shown.iter().zip(tokens) {
        t.add_row(vec![trace.position(i).to_string(), token, text::fill(rows[i].iter().map(|p| item(p, room)), room)]);
    }
    table::emit(&t, width, w)
}

/// The positions the table shows: a masked LM's [MASK] positions (every position when there
/// is none), a causal LM's every position.
pub fn shown(trace: &Trace) -> Vec<usize> {
    let n = trace.predictions.as_ref().map_or(0, |r| r.len());
    let masked = trace.config.parts.masked_lm;
    let shown: Vec<usize> = (0..n).filter(|&i| !masked || trace.tokens[trace.position(i)] == "[MASK]").collect();
    if shown.is_empty() {
        (0..n).collect()
    } else {
        shown
    }
}

/// A prediction as a cell shows it, `·Paris 0.77`, its label cut shorter where `room` is too
/// narrow for the whole, so that the probability always shows.
pub(super) fn item(p: &Prediction, room: usize) -> String {
    let prob = format!("{:.2}", p.prob);
    let most = room.saturating_sub(prob.len() + 1).clamp(4, 14);
    let label = match p.label() {
        Some(t) => cut(&t, most),
        None => format!("#{}", p.id),
    };
    format!("{label} {prob}")
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
