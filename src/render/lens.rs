//! The logit lens's table and JSON (`--lens`): layers down, positions across, each cell the
//! top-1 next token with its probability; and `--lens-track`'s, a table per followed token of
//! its rank and probability. The numbers come from the model; this file lays them out.

use super::table;
use super::text::{blocks, cut};
use crate::trace::{Prediction, Trace};
use std::io::{self, Write};

/// The lens's tables, then one per followed token.
pub fn write(trace: &Trace, width: usize, w: &mut dyn Write) -> io::Result<()> {
    write_lens(trace, width, w)?;
    write_lens_track(trace, width, w)
}

/// The JSON document's `lens` and `lens_track`, when there are.
pub fn json(trace: &Trace) -> Vec<(&'static str, String)> {
    let lens = lens_json(trace).map(|l| ("lens", l));
    lens.into_iter().chain(lens_track_json(trace).map(|l| ("lens_track", l))).collect()
}

fn title(parts: &[String], width: usize, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w)?;
    for line in super::text::wrap_parts(parts, width) {
        writeln!(w, "{line}")?;
    }
    Ok(())
}

/// The logit lens: each layer's most likely next token per position, with its probability.
pub fn write_lens(trace: &Trace, width: usize, w: &mut dyn Write) -> io::Result<()> {
    let Some(layers) = &trace.lens else { return Ok(()) };
    let n = layers.first().map_or(0, Vec::len); // the shown positions (`--show-positions`)
    let cells: Vec<String> = layers
        .iter()
        .flat_map(|row| {
            row.iter().map(|top| top.first().map_or(String::new(), |p| format!("{} {:.2}", label(p), p.prob)))
        })
        .collect();
    let cols = position_labels(trace, n);
    let rows: Vec<String> = (0..layers.len()).map(|l| format!("layer {l}")).collect();
    let col_w = cells.iter().chain(&cols).map(|c| c.chars().count()).max().unwrap_or(1);
    for (start, end) in blocks(n, col_w + 3, table::label_cost(&rows, ""), width) {
        let mut t = vec!["logit lens".to_string(), "top-1 next token after each layer".to_string()];
        if start > 0 || end < n {
            t.push(format!("positions {start}–{} of {n}", end - 1));
        }
        title(&t, width, w)?;
        table::emit(&table::matrix_block("", &rows, &cols, &cells, start..end), width, w)?;
    }
    Ok(())
}

/// `--lens-track`: per tracked token, its rank and probability after each layer at each
/// position (after the lens's table, in the same layout).
pub fn write_lens_track(trace: &Trace, width: usize, w: &mut dyn Write) -> io::Result<()> {
    for t in trace.lens_track.iter().flatten() {
        let n = t.layers.first().map_or(0, Vec::len);
        let cols = position_labels(trace, n);
        let cells: Vec<String> = t
            .layers
            .iter()
            .flat_map(|row| row.iter().map(|&(rank, p)| format!("#{rank} {}", probability(p))))
            .collect();
        let rows: Vec<String> = (0..t.layers.len()).map(|l| format!("layer {l}")).collect();
        let col_w = cells.iter().chain(&cols).map(|c| c.chars().count()).max().unwrap_or(1);
        for (start, end) in blocks(n, col_w + 3, table::label_cost(&rows, ""), width) {
            let mut title_parts = vec![
                format!("logit lens · {}", cut(&t.label(), 16)),
                "its rank over the vocabulary and probability after each layer".to_string(),
            ];
            if start > 0 || end < n {
                title_parts.push(format!("positions {start}–{} of {n}", end - 1));
            }
            title(&title_parts, width, w)?;
            table::emit(&table::matrix_block("", &rows, &cols, &cells, start..end), width, w)?;
        }
    }
    Ok(())
}

/// A probability in a few characters: two decimals, or one significant digit below 0.01 (a
/// tracked token is mostly far from the top).
fn probability(p: f32) -> String {
    if p >= 0.01 || p == 0.0 {
        format!("{p:.2}")
    } else {
        format!("{p:.0e}")
    }
}

/// `lens_track`: `[{"id", "token", ("text",) "rank": [[…] per layer], "prob": [[…] per layer]}]`.
pub fn lens_track_json(trace: &Trace) -> Option<String> {
    let tracked = trace.lens_track.as_ref()?;
    let items: Vec<String> = tracked
        .iter()
        .map(|t| {
            let grid = |f: &dyn Fn(&(usize, f32)) -> String| {
                let rows: Vec<String> =
                    t.layers.iter().map(|r| format!("[{}]", r.iter().map(f).collect::<Vec<_>>().join(", "))).collect();
                format!("[{}]", rows.join(", "))
            };
            let text = t
                .text
                .as_ref()
                .map_or(String::new(), |x| format!(", \"text\": {}", serde_json::to_string(x).unwrap_or_default()));
            format!(
                "{{\"id\": {}, \"token\": {}{text}, \"rank\": {}, \"prob\": {}}}",
                t.id,
                serde_json::to_string(&t.token).unwrap_or_default(),
                grid(&|(r, _)| r.to_string()),
                grid(&|(_, p)| super::numbers::f32_json(*p))
            )
        })
        .collect();
    Some(format!("[{}]", items.join(", ")))
}

/// The column labels of `n` positions: each row's position (`Trace::position`) and token.
fn position_labels(trace: &Trace, n: usize) -> Vec<String> {
    (0..n).map(|r| trace.position(r)).map(|i| format!("{i} {}", cut(&trace.label(i), 8))).collect()
}

fn label(p: &Prediction) -> String {
    p.label().map_or(format!("#{}", p.id), |t| cut(&t, 10))
}

fn top_json(top: &[Prediction]) -> String {
    let items: Vec<String> = top.iter().map(super::predictions::prediction_json).collect();
    format!("[{}]", items.join(", "))
}

/// `lens`: `[{"layer", "top": [[{"id", "token", "prob"}, …] per position]}]`.
pub fn lens_json(trace: &Trace) -> Option<String> {
    let layers = trace.lens.as_ref()?;
    let items: Vec<String> = layers
        .iter()
        .enumerate()
        .map(|(l, rows)| {
            let rows: Vec<String> = rows.iter().map(|r| top_json(r)).collect();
            format!("{{\"layer\": {l}, \"top\": [{}]}}", rows.join(", "))
        })
        .collect();
    Some(format!("[{}]", items.join(", ")))
}
