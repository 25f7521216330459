//! Tables for people: one titled table per step, and per head for per-head steps; rows are
//! labelled by position and token, and the columns of `[query_pos, key_pos]` tensors by key
//! token. Tensors wider than `--width` are split into column blocks, never wrapped mid-row.

use super::text::{cut, wrap, wrap_parts, wrap_words};
use crate::trace::{Step, Trace, Values};
use comfy_table::{presets, CellAlignment, Table, TableComponent};
use std::io::{self, Write};

/// Longest token label shown; longer ones are cut with "…".
const MAX_LABEL: usize = 12;

/// The first lines of every table view: what was traced, wrapped to `width`.
pub fn write_header(trace: &Trace, width: usize, w: &mut dyn Write) -> io::Result<()> {
    for line in wrap(&super::header::summary(trace), width) {
        writeln!(w, "{line}")?;
    }
    // `--chat`: the text that was tokenized, its newlines shown as \n.
    if let Some(chat) = &trace.chat {
        for line in wrap_words(&format!("prompt (--chat): {}", chat.rendered), width, "  ") {
            writeln!(w, "{line}")?;
        }
    }
    Ok(())
}

pub fn write(trace: &Trace, precision: usize, width: usize, w: &mut dyn Write) -> io::Result<()> {
    write_header(trace, width, w)?;
    let labels: Vec<String> = trace.labels().iter().map(|t| cut(t, MAX_LABEL)).collect();
    let keys: Vec<String> = trace.key_labels().iter().map(|t| cut(t, MAX_LABEL)).collect();
    let mut tokens_done = false;
    for step in &trace.steps {
        match step.name.as_str() {
            "tokens" | "token_ids" => {
                if !tokens_done {
                    tokens_done = true;
                    write_tokens(trace, width, w)?;
                }
            }
            _ => {
                let at = crate::views::positions::rows_of(trace, step);
                write_tensor(step, stack_labels(trace, step, (&labels, &keys)), at, precision, width, w)?
            }
        }
    }
    Ok(())
}

/// The row and column labels of `step`: an encoder–decoder's encoder steps are over the
/// source's tokens (the trace's keys), its decoder's self-attention over the decoder's own,
/// and only its cross-attention has the source's tokens across; otherwise `(labels, keys)`.
fn stack_labels<'a>(
    trace: &Trace,
    step: &Step,
    (labels, keys): (&'a [String], &'a [String]),
) -> (&'a [String], &'a [String]) {
    if trace.config.parts.seq2seq.is_none() {
        return (labels, keys);
    }
    match crate::trace::stack_of(&step.id) {
        crate::trace::steps::Stack::Encoder => (keys, keys),
        _ if step.name.starts_with("cross_attn.") => (labels, keys),
        _ => (labels, labels),
    }
}

/// `--params`: each parameter as a table (`[out, in]` as `nn.Linear` stores it; rows and
/// columns numbered), under a heading that says how they are applied.
pub fn write_params(params: &[Step], precision: usize, width: usize, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w)?;
    let title = "parameters · as nn.Linear stores them, [out × in]: q = x·W_Qᵀ + b_Q, and so on";
    for line in wrap_words(title, width, "  ") {
        writeln!(w, "{line}")?;
    }
    for p in params {
        write_tensor(p, (&[], &[]), None, precision, width, w)?;
    }
    Ok(())
}

/// A table with column rules but no outer frame: the frame would cost two columns, and
/// an 8×8 attention matrix with 4 decimals should fit an 80-column terminal.
pub fn new_table() -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED);
    for c in [
        TableComponent::LeftBorder,
        TableComponent::RightBorder,
        TableComponent::TopLeftCorner,
        TableComponent::TopRightCorner,
        TableComponent::BottomLeftCorner,
        TableComponent::BottomRightCorner,
        TableComponent::LeftHeaderIntersection,
        TableComponent::RightHeaderIntersection,
        TableComponent::LeftBorderIntersections,
        TableComponent::RightBorderIntersections,
    ] {
        t.remove_style(c);
    }
    t
}

pub fn write_tokens(trace: &Trace, width: usize, w: &mut dyn Write) -> io::Result<()> {
    // The token gets what the pos, id and type columns leave (JSON has it whole).
    let digits = |n: usize| n.to_string().len();
    let largest = |ids: Option<&Vec<u32>>| ids.and_then(|v| v.iter().max().copied()).map_or(2, |m| digits(m as usize));
    let pos_w = digits(trace.tokens.len().max(trace.keys.as_ref().map_or(0, |k| k.tokens.len()))).max(3);
    let id_w = largest(trace.token_ids.as_ref()).max(largest(trace.keys.as_ref().and_then(|k| k.ids.as_ref())));
    let mut others = vec![pos_w];
    others.extend(trace.token_ids.as_ref().map(|_| id_w));
    others.extend(trace.token_type_ids.as_ref().map(|_| "type".len()));
    let max_token = room(&others, width, MAX_LABEL);
    // An encoder–decoder's source tokens (the encoder's) come first.
    if let Some(source) = trace.keys.as_ref().filter(|_| trace.config.parts.seq2seq.is_some()) {
        writeln!(w, "\nsource tokens (the encoder's) [pos = {}]", source.tokens.len())?;
        let mut t = new_table();
        t.set_header(vec!["pos", "token", "id"]);
        for (i, label) in trace.key_labels().iter().enumerate() {
            let id = source.ids.as_ref().and_then(|ids| ids.get(i)).map_or(String::new(), |d| d.to_string());
            t.add_row(vec![i.to_string(), cut(label, max_token), id]);
        }
        emit(&t, width, w)?;
        write!(w, "\ndecoder ")?;
    } else {
        writeln!(w)?;
    }
    writeln!(w, "tokens [pos = {}]", trace.tokens.len())?;
    let mut t = new_table();
    let mut header = vec!["pos", "token"];
    if trace.token_ids.is_some() {
        header.push("id");
    }
    if trace.token_type_ids.is_some() {
        header.push("type");
    }
    t.set_header(header);
    if let Some(col) = t.column_mut(0) {
        col.set_padding((0, 1));
    }
    for (i, tok) in trace.labels().iter().enumerate() {
        let mut row = vec![i.to_string(), cut(tok, max_token)];
        if let Some(ids) = &trace.token_ids {
            row.push(ids[i].to_string());
        }
        if let Some(types) = &trace.token_type_ids {
            row.push(types[i].to_string());
        }
        t.add_row(row);
    }
    emit(&t, width, w)
}

/// Columns `cols` of a row-major matrix of formatted `cells` as a table: a header of column
/// labels after `corner`, a label before each row, numbers right-aligned.
pub fn matrix_block(
    corner: &str,
    row_labels: &[String],
    col_labels: &[String],
    cells: &[String],
    cols: std::ops::Range<usize>,
) -> Table {
    let width = col_labels.len();
    let mut t = new_table();
    let mut header = vec![corner.to_string()];
    header.extend(col_labels[cols.clone()].iter().cloned());
    t.set_header(header);
    for (r, label) in row_labels.iter().enumerate() {
        let mut row = vec![label.clone()];
        row.extend(cells[r * width + cols.start..r * width + cols.end].iter().cloned());
        t.add_row(row);
    }
    if let Some(col) = t.column_mut(0) {
        col.set_padding((0, 1));
    }
    for c in 1..=cols.len() {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// Writes a table without trailing spaces on its lines, none wider than `width`: every table
/// sizes its cells to fit (or splits into column blocks), and a line that still would not
/// (a cell no table can narrow, at the narrowest widths) is cut with `…` at the edge, so
/// that nothing is lost unmarked.
pub fn emit(t: &Table, width: usize, w: &mut dyn Write) -> io::Result<()> {
    for line in t.to_string().lines() {
        let line = line.trim_end();
        if line.chars().count() > width {
            writeln!(w, "{}", cut(line, width))?;
        } else {
            writeln!(w, "{line}")?;
        }
    }
    Ok(())
}

/// The columns a table's column takes besides its content: a space either side and the
/// rule before it (the first column has no rule, and its left space is dropped where
/// `new_table`'s callers set its padding to `(0, 1)`).
pub const CELL_COST: usize = 3;

/// What is left of `width` for one column's content once the other columns, `widths` (their
/// contents' widths), are laid out with [`CELL_COST`] each; at least `least`.
pub fn room(widths: &[usize], width: usize, least: usize) -> usize {
    // The column itself costs its spaces and a rule, and the first column has no rule.
    let used: usize = widths.iter().map(|w| w + CELL_COST).sum::<usize>() + CELL_COST - 1;
    width.saturating_sub(used).max(least)
}

/// What a [`matrix_block`]'s label column costs: its widest label (or `corner`) and the
/// space after it.
pub fn label_cost(rows: &[String], corner: &str) -> usize {
    rows.iter().map(|r| r.chars().count()).chain([corner.chars().count()]).max().unwrap_or(0) + 1
}

/// Formats one value the way the table shows it.
fn fmt(step: &Step, i: usize, precision: usize) -> String {
    match &step.values {
        // f32 printed through f64 gives the same digits (the conversion is exact).
        Values::F32(v) => super::numbers::fixed(v[i] as f64, precision),
        Values::Bool(v) => (if v[i] { "masked" } else { "·" }).into(),
        Values::Int(v) => v[i].to_string(),
        Values::Str(v) => v[i].clone(),
    }
}

/// One step as tables: rows labelled by `labels` (the tokens'), `key_pos` columns by `keys`
/// (the key tokens', `Trace::key_labels`); `at`: the positions of a step cut by
/// `--show-positions`, row by row.
fn write_tensor(
    step: &Step,
    (labels, keys): (&[String], &[String]),
    at: Option<&[usize]>,
    precision: usize,
    width: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    // Everything is drawn as 2-D matrices [rows, cols], one per leading index (head).
    let (groups, rows, cols) = match step.shape.as_slice() {
        [r, c] => (1, *r, *c),
        [g, r, c] => (*g, *r, *c),
        [c] => (1, 1, *c),
        _ => return Ok(()),
    };
    let by_key = step.dims.last() == Some(&"key_pos");
    // Rows are positions, except a mixture's chosen experts' ranks within a position.
    let ranks = step.dims.len() == 3 && step.dims[1] == "rank";
    let row_labels: Vec<String> =
        (0..rows).map(|r| if ranks { format!("rank {r}") } else { label(labels, position(at, r)) }).collect();
    let col_labels: Vec<String> = (0..cols)
        .map(|c| if by_key { keys.get(c).cloned().unwrap_or_else(|| c.to_string()) } else { c.to_string() })
        .collect();
    let cells: Vec<String> = (0..step.values.len()).map(|i| fmt(step, i, precision)).collect();
    let dims = step.dims.join(" × ");
    let shape = step.shape.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(" × ");
    for g in 0..groups {
        let head = if step.is_per_head() {
            let h = step.heads.as_ref().map_or(g, |hs| hs[g]);
            format!("head {h}")
        } else if ranks {
            label(labels, position(at, g))
        } else {
            String::new()
        };
        let block = &cells[g * rows * cols..(g + 1) * rows * cols];
        let col_w: Vec<usize> = (0..cols)
            .map(|c| {
                (0..rows)
                    .map(|r| block[r * cols + c].chars().count())
                    .max()
                    .unwrap_or(0)
                    .max(col_labels[c].chars().count())
            })
            .collect();
        let label_w = row_labels.iter().map(|l| l.chars().count()).max().unwrap_or(0).max(3);
        for (start, end) in column_blocks(&col_w, label_w, width) {
            let part = if start == 0 && end == cols {
                String::new()
            } else {
                format!("columns {start}–{} of {cols}", end - 1)
            };
            let mut title: Vec<String> = vec![step.id.clone()];
            title.extend([head.clone(), part].into_iter().filter(|p| !p.is_empty()));
            title.push(format!("[{dims} = {shape}]"));
            writeln!(w)?;
            for line in wrap_parts(&title, width) {
                writeln!(w, "{line}")?;
            }
            let corner = match step.dims.first() {
                _ if by_key => "q \\ k",
                _ if ranks => "rank",
                Some(&"out") => "out",
                _ => "pos",
            };
            emit(&matrix_block(corner, &row_labels, &col_labels, block, start..end), width, w)?;
        }
    }
    Ok(())
}

/// The position of row `r`: `at[r]` in a cut step, else `r`.
fn position(at: Option<&[usize]>, r: usize) -> usize {
    at.and_then(|p| p.get(r).copied()).unwrap_or(r)
}

fn label(labels: &[String], r: usize) -> String {
    match labels.get(r) {
        Some(t) => format!("{r} {t}"),
        None => r.to_string(),
    }
}

/// Splits columns into blocks whose table fits `width`: each value column costs its width,
/// a space either side and the rule before it; the label column has one space after it.
/// When a split is needed, the blocks are as even as the widths allow (8 columns that need
/// two blocks become 4 + 4, not 7 + 1).
pub fn column_blocks(col_w: &[usize], label_w: usize, width: usize) -> Vec<(usize, usize)> {
    let greedy = fill_blocks(col_w, label_w, width, usize::MAX);
    if greedy.len() < 2 {
        return greedy;
    }
    fill_blocks(col_w, label_w, width, col_w.len().div_ceil(greedy.len()))
}

/// Blocks of at most `most` columns, each as many as fit.
fn fill_blocks(col_w: &[usize], label_w: usize, width: usize, most: usize) -> Vec<(usize, usize)> {
    let fixed = label_w + 1;
    let mut blocks = Vec::new();
    let mut start = 0;
    while start < col_w.len() {
        let mut used = fixed;
        let mut end = start;
        while end < col_w.len() && (end == start || (used + col_w[end] + 3 <= width && end - start < most)) {
            used += col_w[end] + 3;
            end += 1;
        }
        blocks.push((start, end));
        start = end;
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_fit_the_width() {
        // label 6 → fixed 7; each 7-wide column costs 10: 80 fits 7 columns.
        // Sixteen need three blocks of at most 7: evened out as 6 + 6 + 4.
        let b = column_blocks(&[7; 16], 6, 80);
        assert_eq!(b, vec![(0, 6), (6, 12), (12, 16)]);
        // An 8×8 table with a minus sign in every column needs two blocks: 4 + 4, not 7 + 1.
        assert_eq!(column_blocks(&[7; 8], 7, 80), vec![(0, 4), (4, 8)]);
        // An 8×8 attention matrix: labels "0 shoes" (7), values 6 wide → 8 + 8·9 = 80.
        assert_eq!(column_blocks(&[6; 8], 7, 80), vec![(0, 8)]);
        assert_eq!(column_blocks(&[200], 6, 80), vec![(0, 1)]);
    }
}
