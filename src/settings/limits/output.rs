//! The output cap: the bytes a run would print, estimated from the steps it shows before any is
//! computed, and refused above `--max-output` (default 1 GiB). A million toy layers as tables
//! are about 20 GiB of text, which took minutes of computing before a byte was printed and then
//! minutes of printing; now they are one line naming their size and the flags that narrow them.
//! Files (`--html`, `--svg`, `--save-trace`) are built in memory, so the memory cap bounds them.

use super::estimate::recorded;
use super::human_f;
use crate::config::ModelConfig;
use crate::error::usage;
use crate::settings::{Format, Output};
use crate::trace::Selection;
use anyhow::Result;

/// The default `--max-output`: 1 GiB is about 80 M values as JSON, a minute of writing tables.
pub const DEFAULT_CAP: &str = "1GiB";

/// Bytes a JSON step costs beyond its values (its id, name, dims and shape, measured at about
/// 50), and each value (the shortest decimal that reads back, a comma: 13.2 measured).
const JSON_STEP: f64 = 160.0;
const JSON_VALUE: f64 = 14.0;

/// Bytes a table's step costs beyond its cells: a title and three rules of `--width` box
/// characters (three bytes each); and each cell, `--precision` digits with the integer part,
/// sign and separator, the row labels of each block of columns (measured: 714 bytes a step at
/// width 80, 12.7 bytes a value at precision 4).
const TABLE_RULES: f64 = 3.0 * 3.0;
const TABLE_TITLE: f64 = 120.0;
const TABLE_CELL: f64 = 10.0;

/// The bytes the steps `show` holds would print as `out` asks (`--format`, `--precision`,
/// `--width`), `n` positions. Views drawn beside the steps (the summary, predictions, lens) are
/// a few lines per layer and head, counted as one step each.
pub fn bytes(cfg: &ModelConfig, n: usize, show: &Selection, out: &Output) -> f64 {
    let kept = recorded(cfg, n, show);
    let views = (cfg.layers * cfg.heads.max(1)) as f64 + n as f64;
    let steps = kept.count + views;
    match out.format {
        Format::Json | Format::Jsonl => steps * JSON_STEP + kept.total * JSON_VALUE,
        Format::Table | Format::Heatmap if out.summary => views * (TABLE_TITLE + TABLE_RULES * out.width as f64),
        Format::Table | Format::Heatmap => {
            let step = TABLE_TITLE + TABLE_RULES * out.width as f64;
            steps * step + kept.total * (TABLE_CELL + out.precision as f64)
        }
    }
}

/// Refuses a batch whose rendered sentences so far (`bytes`, of `sentences`) are over `cap`.
pub fn check_printed(bytes: f64, sentences: usize, cap: Option<u128>) -> Result<()> {
    let Some(cap) = cap.filter(|&c| bytes > c as f64) else { return Ok(()) };
    Err(usage(
        "output",
        format!(
            "the batch's first {sentences} sentences print {}, above --max-output's {}",
            human_f(bytes),
            human_f(cap as f64)
        ),
        "split the batch, show fewer steps with --steps, --layer or --head, or raise the cap with --max-output",
    ))
}

/// Parses `--max-output`: a size as `--max-memory` takes it, or `none` (no cap).
pub fn max_output(arg: &str) -> Result<Option<u128>> {
    if arg.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    super::parse_size(arg).map(Some).map_err(|_| {
        usage(
            "--max-output",
            format!("{} is not a size", crate::error::quote(arg)),
            "write e.g. 100MiB, 4GiB, a number of bytes, or none",
        )
    })
}

/// Refuses a run whose output ([`bytes`]) is over `cap`, before anything is computed: one line
/// with the size and the flags that narrow it.
pub fn check(cfg: &ModelConfig, n: usize, show: &Selection, out: &Output, cap: Option<u128>) -> Result<()> {
    let bytes = bytes(cfg, n, show, out);
    let Some(cap) = cap.filter(|&c| bytes > c as f64) else { return Ok(()) };
    let steps = recorded(cfg, n, show).count;
    Err(usage(
        "output",
        format!(
            "this run would print about {} ({steps:.0} steps), above --max-output's {}",
            human_f(bytes),
            human_f(cap as f64)
        ),
        "show fewer steps with --steps, --layer or --head, or raise the cap with --max-output",
    ))
}
