//! The derived attention maps of `--merge-pieces` and `--average-heads` outside the pictures:
//! as tables (they take the place of the `attn.weights` tables they were derived from, after
//! the other steps) and as the JSON document's `"views"` object, which sits beside `"steps"`
//! and never changes a step:
//!
//! ```text
//! "views": {"rules": ["mean over heads 0–1"], "labels": ["my", …],
//!           "word_pieces": [[0], [1, 2], …],          (with --merge-pieces)
//!           "averaged_heads": [0, 1],                 (with --average-heads)
//!           "maps": [{"source": "layers.0.attn.weights", "layer": 0, "head": "mean",
//!                     "dims": ["query_word", "key_word"], "shape": [7, 7], "values": [[…]]}]}
//! ```
//!
//! A map is `shape` = [rows, columns]: query labels down, key labels across. When the keys
//! are not the queries' tokens (non-square maps, `Trace::keys`), `"key_labels"` (and with
//! --merge-pieces `"key_word_pieces"`) follow `"labels"`; square maps write neither.

use super::text::{blocks, cut, wrap_parts, wrap_words};
use super::{numbers::f32_json, table};
use crate::trace::steps;
use crate::views::maps::{Map, Maps};
use std::io::{self, Write};

/// The row and column dimension names of the maps.
fn dims(maps: &Maps) -> [&'static str; 2] {
    if maps.pieces.is_some() {
        ["query_word", "key_word"]
    } else {
        ["query_pos", "key_pos"]
    }
}

/// The maps as tables, each titled with its source step and view, the rules stated once.
pub fn write_tables(maps: &Maps, precision: usize, width: usize, w: &mut dyn Write) -> io::Result<()> {
    for rule in &maps.rules {
        writeln!(w)?;
        for line in wrap_words(&format!("view: {rule}."), width, "  ") {
            writeln!(w, "{line}")?;
        }
    }
    let (n, cols) = (maps.rows(), maps.cols());
    let labels: Vec<String> = maps.labels.iter().map(|l| cut(l, 12)).collect();
    let keys: Vec<String> = maps.key_labels().iter().map(|l| cut(l, 12)).collect();
    let [qd, kd] = dims(maps);
    for map in &maps.maps {
        let cells: Vec<String> = map.values.iter().map(|v| format!("{v:.precision$}")).collect();
        let col_w = cells.iter().chain(&keys).map(|c| c.chars().count()).max().unwrap_or(1);
        let rows: Vec<String> = (0..n).map(|i| maps.row_label(i, &labels[i])).collect();
        let label_w = rows.iter().map(|r| r.chars().count()).max().unwrap_or(0).max(5);
        for (start, end) in blocks(cols, col_w + 3, label_w + 1, width) {
            let mut title = vec![steps::layer_id(map.layer, "attn.weights"), map.head_label()];
            if maps.pieces.is_some() {
                title.push("words".into());
            }
            if start > 0 || end < cols {
                title.push(format!("columns {start}–{} of {cols}", end - 1));
            }
            title.push(format!("[{qd} × {kd} = {n} × {cols}]"));
            writeln!(w)?;
            for line in wrap_parts(&title, width) {
                writeln!(w, "{line}")?;
            }
            table::emit(&table::matrix_block("q \\ k", &rows, &keys, &cells, start..end), width, w)?;
        }
    }
    Ok(())
}

/// The `"views"` object of the JSON document.
pub fn to_json(maps: &Maps) -> String {
    let mut o = format!(
        "{{\"rules\": {}, \"labels\": {}",
        serde_json::to_string(&maps.rules).unwrap_or_default(),
        serde_json::to_string(&maps.spelled).unwrap_or_default()
    );
    if let Some(k) = &maps.keys {
        o += &format!(", \"key_labels\": {}", serde_json::to_string(&k.spelled).unwrap_or_default());
    }
    if let Some(p) = &maps.pieces {
        o += &format!(", \"word_pieces\": {}", serde_json::to_string(p).unwrap_or_default());
    }
    if let Some(p) = maps.keys.as_ref().and_then(|k| k.pieces.as_ref()) {
        o += &format!(", \"key_word_pieces\": {}", serde_json::to_string(p).unwrap_or_default());
    }
    if let Some(h) = &maps.averaged {
        o += &format!(", \"averaged_heads\": {}", serde_json::to_string(h).unwrap_or_default());
    }
    let entries: Vec<String> = maps.maps.iter().map(|m| entry(m, (maps.rows(), maps.cols()), dims(maps))).collect();
    o += &format!(", \"maps\": [\n    {}\n  ]}}", entries.join(",\n    "));
    o
}

/// One map of `n` rows and `cols` columns.
fn entry(m: &Map, (n, cols): (usize, usize), dims: [&str; 2]) -> String {
    let head = m.head.map_or("\"mean\"".to_string(), |h| h.to_string());
    let rows: Vec<String> = (0..n)
        .map(|q| {
            let row: Vec<String> = m.values[q * cols..(q + 1) * cols].iter().map(|&v| f32_json(v)).collect();
            format!("[{}]", row.join(","))
        })
        .collect();
    format!(
        "{{\"source\": \"layers.{}.attn.weights\", \"layer\": {}, \"head\": {head}, \"dims\": [\"{}\",\"{}\"], \"shape\": [{n},{cols}], \"values\": [{}]}}",
        m.layer,
        m.layer,
        dims[0],
        dims[1],
        rows.join(",")
    )
}
