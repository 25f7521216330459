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
    let n = maps.labels.len();
    let labels: Vec<String> = maps.labels.iter().map(|l| cut(l, 12)).collect();
    let [qd, kd] = dims(maps);
    for map in &maps.maps {
        let cells: Vec<String> = map.values.iter().map(|v| format!("{v:.precision$}")).collect();
        let col_w = cells.iter().chain(&labels).map(|c| c.chars().count()).max().unwrap_or(1);
        let rows: Vec<String> = (0..n).map(|i| format!("{i} {}", labels[i])).collect();
        let label_w = rows.iter().map(|r| r.chars().count()).max().unwrap_or(0).max(5);
        for (start, end) in blocks(n, col_w + 3, label_w + 1, width) {
            let mut title = vec![steps::layer_id(map.layer, "attn.weights"), map.head_label()];
            if maps.pieces.is_some() {
                title.push("words".into());
            }
            if start > 0 || end < n {
                title.push(format!("columns {start}–{} of {n}", end - 1));
            }
            title.push(format!("[{qd} × {kd} = {n} × {n}]"));
            writeln!(w)?;
            for line in wrap_parts(&title, width) {
                writeln!(w, "{line}")?;
            }
            table::emit(&table::matrix_block("q \\ k", &rows, &labels, &cells, start..end), w)?;
        }
    }
    Ok(())
}

/// The `"views"` object of the JSON document.
pub fn to_json(maps: &Maps) -> String {
    let n = maps.labels.len();
    let mut o = format!(
        "{{\"rules\": {}, \"labels\": {}",
        serde_json::to_string(&maps.rules).unwrap_or_default(),
        serde_json::to_string(&maps.spelled).unwrap_or_default()
    );
    if let Some(p) = &maps.pieces {
        o += &format!(", \"word_pieces\": {}", serde_json::to_string(p).unwrap_or_default());
    }
    if let Some(h) = &maps.averaged {
        o += &format!(", \"averaged_heads\": {}", serde_json::to_string(h).unwrap_or_default());
    }
    let entries: Vec<String> = maps.maps.iter().map(|m| entry(m, n, dims(maps))).collect();
    o += &format!(", \"maps\": [\n    {}\n  ]}}", entries.join(",\n    "));
    o
}

fn entry(m: &Map, n: usize, dims: [&str; 2]) -> String {
    let head = m.head.map_or("\"mean\"".to_string(), |h| h.to_string());
    let rows: Vec<String> = (0..n)
        .map(|q| {
            format!("[{}]", m.values[q * n..(q + 1) * n].iter().map(|&v| f32_json(v)).collect::<Vec<_>>().join(","))
        })
        .collect();
    format!(
        "{{\"source\": \"layers.{}.attn.weights\", \"layer\": {}, \"head\": {head}, \"dims\": [\"{}\",\"{}\"], \"shape\": [{n},{n}], \"values\": [{}]}}",
        m.layer,
        m.layer,
        dims[0],
        dims[1],
        rows.join(",")
    )
}
