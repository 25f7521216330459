//! `--format heatmap`: each attention map as a coloured grid, query tokens down and key tokens
//! across, each cell's value written in it when `--precision` leaves room (1 or more digits).
//! The colour scale runs from 0 to the map's largest weight (a long sentence spreads its
//! weights thin, and a fixed 0–1 scale would paint it all one colour); a legend under each
//! title gives the numbers. Colour is viridis (perceptually uniform and readable with
//! colour-blindness; van der Walt & Smith 2015), in 24-bit when COLORTERM says the terminal
//! takes it, else from the 256-colour palette; with colour off (`--color`, NO_COLOR, not a
//! terminal) a cell is shaded with " ░▒▓█" instead. A grid wider than `--width` is split into
//! blocks of key columns, as tables are. The shared colour scale lives here too: the HTML
//! and SVG maps use the same one. With `--patch`, the sweep's effects follow as one more grid
//! (layers down, heads or positions across) on a scale from min(0, smallest effect) to
//! max(1, largest effect).

use super::colour::{dark_text, diverging, max_of, scale_between, scale_of, viridis};
use super::text::{blocks, cut, wrap_parts, wrap_words};
use super::{focus, table};
use crate::settings::Output;
use crate::trace::steps;
use crate::trace::Trace;
use crate::views::grid::{self, GridText};
use crate::views::maps::{Map, Maps};
use crate::views::Views;
use std::io::{self, Write};

/// Shades from the lowest fifth of the scale to the highest.
const SHADES: [char; 5] = [' ', '░', '▒', '▓', '█'];

/// Longest row label (after the position).
const MAX_LABEL: usize = 10;

/// The channel levels of xterm's 6×6×6 colour cube (palette indices 16–231).
const CUBE: [u8; 6] = [0, 95, 135, 175, 215, 255];

/// The nearest colour of the cube: its palette index and its own RGB.
fn xterm256(rgb: [u8; 3]) -> (u8, [u8; 3]) {
    let near = |c: u8| (0..6).min_by_key(|&i| (CUBE[i] as i32 - c as i32).abs()).unwrap_or(0);
    let [r, g, b] = rgb.map(near);
    ((16 + 36 * r + 6 * g + b) as u8, [CUBE[r], CUBE[g], CUBE[b]])
}

/// The escape sequence that paints a cell of colour `rgb` with readable text on it (the
/// text colour is chosen for the colour actually shown).
fn paint(rgb: [u8; 3], truecolor: bool) -> String {
    let fg = |shown: [u8; 3]| if dark_text(shown) { "30" } else { "97" };
    if truecolor {
        format!("\x1b[48;2;{};{};{};{}m", rgb[0], rgb[1], rgb[2], fg(rgb))
    } else {
        let (index, shown) = xterm256(rgb);
        format!("\x1b[48;5;{index};{}m", fg(shown))
    }
}

/// Cell geometry shared by every map of a run.
struct Grid {
    /// Characters of a written value ("0.4123"), 0 when --precision 0 leaves no room.
    value_w: usize,
    /// Characters per key column.
    slot: usize,
    precision: usize,
    color: bool,
    truecolor: bool,
    width: usize,
    /// A signed grid: coloured on the diverging scale, 0 in the middle.
    signed: bool,
}

impl Grid {
    /// The grid for `out`, its values `value_w` characters wide and its column labels
    /// `label_w`: a slot fits a value (and its colour or a separator) and a label.
    fn new(out: &Output, value_w: usize, label_w: usize) -> Self {
        let slot = (if out.color { value_w + 2 } else { value_w + 3 }).max(label_w + 1).max(3);
        Grid {
            value_w,
            slot,
            precision: out.precision,
            color: out.color,
            truecolor: out.views.truecolor,
            width: out.width,
            signed: false,
        }
    }
}

pub fn write(trace: &Trace, views: &Views, out: &Output, w: &mut dyn Write) -> io::Result<()> {
    table::write_header(trace, out.width, w)?;
    if let Some(maps) = &views.maps {
        write_maps(maps, out, w)?;
    }
    if let Some(p) = &views.patch_grid {
        write_grid(p, views.patch_text(), out, w)?;
    }
    for m in &views.generation_maps {
        let title = crate::views::generate::title(m.layer);
        let text = GridText { title: &title, scale: "0 to the largest weight", value: "weight", group: "generation" };
        write_grid(&m.grid, text, out, w)?;
    }
    if let (Some(g), Some(a), Some(r)) = (&views.attribution_grid, &trace.attribution, &views.attribution) {
        write_grid(g, crate::views::attribute::TEXT, out, w)?;
        super::attribute::write(a, r, out.precision, out.width, w)?;
    }
    if let Some(f) = &views.focus {
        focus::write(f, out, w)?;
    }
    Ok(())
}

/// A grid of numbers (`views::grid`): layers down, heads (or positions) across, each value in
/// its cell, coloured from `p.lo` to `p.hi`, titled and its scale explained by `text`.
pub fn write_grid(p: &grid::Grid, text: GridText, out: &Output, w: &mut dyn Write) -> io::Result<()> {
    // One more character than a weight: effects can be negative.
    let value_w = if out.precision == 0 { 0 } else { out.precision + 3 };
    let col_w = p.cols.iter().map(|c| c.chars().count().min(MAX_LABEL)).max().unwrap_or(1);
    let g = Grid { signed: p.signed, ..Grid::new(out, value_w, col_w) };
    let label_w = p.rows.iter().map(|r| r.chars().count()).max().unwrap_or(0);
    let n = p.cols.len();
    for (start, end) in blocks(n, g.slot, label_w + 1, g.width) {
        let mut title = vec![text.title.to_string(), format!("{} × {}", p.down, p.across)];
        if start > 0 || end < n {
            title.push(format!("columns {start}–{} of {n}", end - 1));
        }
        writeln!(w)?;
        for line in wrap_parts(&title, g.width) {
            writeln!(w, "{line}")?;
        }
        let (lo, hi) = (p.lo, p.hi);
        legend((&format!("{lo:.p$}", p = g.precision.max(2)), lo), hi, text.scale, &g, w)?;
        let cols: String =
            (start..end).map(|c| format!("{:>s$} ", cut(&p.cols[c], g.slot - 1), s = g.slot - 1)).collect();
        writeln!(w, "{:label_w$} {}", "", cols.trim_end())?;
        for (r, label) in p.rows.iter().enumerate() {
            let mut line = format!("{label:label_w$} ");
            for c in start..end {
                let v = p.values[r * n + c];
                line.push_str(&cell(v, scale_between(v, lo, hi), &g));
            }
            if g.color {
                line.push_str("\x1b[0m");
            }
            writeln!(w, "{}", line.trim_end())?;
        }
    }
    Ok(())
}

fn write_maps(maps: &Maps, out: &Output, w: &mut dyn Write) -> io::Result<()> {
    let value_w = if out.precision == 0 { 0 } else { out.precision + 2 };
    let digits = maps.cols().saturating_sub(1).to_string().len();
    let g = Grid::new(out, value_w, digits);
    for rule in &maps.rules {
        writeln!(w)?;
        for line in wrap_words(&format!("view: {rule}."), out.width, "  ") {
            writeln!(w, "{line}")?;
        }
    }
    // Square maps cut a label to the narrower of a row's and a column's room; non-square ones
    // list the rows' labels cut to MAX_LABEL, then the keys' cut to a column.
    let cut = |labels: &[String], room: usize, rows: bool| -> Vec<String> {
        let long = labels.iter().enumerate().filter(|(_, l)| l.chars().count() > room);
        long.map(|(i, l)| if rows { maps.row_label(i, l) } else { format!("{i} {l}") }).collect()
    };
    let (rows, keys) = match maps.keys {
        None => (cut(&maps.labels, (g.slot - 1).min(MAX_LABEL), true), Vec::new()),
        Some(_) => (cut(&maps.labels, MAX_LABEL, true), cut(maps.key_labels(), g.slot - 1, false)),
    };
    if !rows.is_empty() || !keys.is_empty() {
        writeln!(w)?;
        let mut note = format!("labels cut to fit (position, whole token): {}", rows.join(", "));
        if !keys.is_empty() {
            note += &format!("{}keys: {}", if rows.is_empty() { "" } else { "; " }, keys.join(", "));
        }
        for line in wrap_words(&note, out.width, "  ") {
            writeln!(w, "{line}")?;
        }
    }
    if maps.maps.is_empty() {
        writeln!(w, "\n(no attention weights were recorded)")?;
    }
    for map in &maps.maps {
        write_map(map, maps, &g, w)?;
    }
    Ok(())
}

/// One map: query labels down, key labels across, `maps.rows()` × `maps.cols()` cells.
fn write_map(map: &Map, maps: &Maps, g: &Grid, w: &mut dyn Write) -> io::Result<()> {
    let (n, cols) = (maps.rows(), maps.cols());
    let (what, unit) = if maps.pieces.is_some() { ("words", "word") } else { ("", "pos") };
    let rows: Vec<String> = (0..n).map(|i| maps.row_label(i, &cut(&maps.labels[i], MAX_LABEL))).collect();
    let label_w = rows.iter().map(|r| r.chars().count()).max().unwrap_or(0).max(5);
    let max = max_of(&map.values);
    for (start, end) in blocks(cols, g.slot, label_w + 1, g.width) {
        let mut title = vec![steps::layer_id(map.layer, "attn.weights"), map.head_label()];
        if !what.is_empty() {
            title.push(what.to_string());
        }
        if start > 0 || end < cols {
            title.push(format!("keys {start}–{} of {cols}", end - 1));
        }
        title.push(format!("[query_{unit} × key_{unit} = {n} × {cols}]"));
        writeln!(w)?;
        for line in wrap_parts(&title, g.width) {
            writeln!(w, "{line}")?;
        }
        legend(("0", 0.0), max, "the largest weight here", g, w)?;
        let head = |f: &dyn Fn(usize) -> String| -> String {
            (start..end).map(|k| format!("{:>s$} ", f(k), s = g.slot - 1)).collect()
        };
        writeln!(w, "{:label_w$} {}", "", head(&|k| k.to_string()).trim_end())?;
        let keys = head(&|k| cut(&maps.key_labels()[k], g.slot - 1));
        writeln!(w, "{:label_w$} {}", "q \\ k", keys.trim_end())?;
        for (q, row_label) in rows.iter().enumerate() {
            let mut line = format!("{row_label:label_w$} ");
            for k in start..end {
                let v = map.values[q * cols + k];
                line.push_str(&cell(v, scale_of(v, max), g));
            }
            if g.color {
                line.push_str("\x1b[0m");
            }
            writeln!(w, "{}", line.trim_end())?;
        }
    }
    Ok(())
}

/// One cell: its value right-aligned in the slot, on its colour (at `t` on the scale) or after
/// its shade.
fn cell(v: f32, t: f64, g: &Grid) -> String {
    let text = match g.value_w {
        0 => String::new(),
        _ if !v.is_finite() => format!("{v}"),
        _ => format!("{v:.p$}", p = g.precision),
    };
    if g.color {
        let rgb = if g.signed { diverging(t) } else { viridis(t) };
        format!("{}{text:>s$} ", paint(rgb, g.truecolor), s = g.slot - 1)
    } else {
        // A signed grid shades by distance from 0 (the value's sign is written in the cell).
        let t = if g.signed { (t - 0.5).abs() * 2.0 } else { t };
        let shade = SHADES[((t * 5.0).floor() as usize).min(4)];
        let fill: String = std::iter::repeat_n(shade, g.slot - 1 - g.value_w.min(g.slot - 1)).collect();
        format!("{fill}{text:>v$} ", v = g.value_w)
    }
}

/// The colour ramp with its ends, or the shade thresholds: from `lo` (written as its label)
/// to `max`, with what the top means (`note`) where it fits.
fn legend((lo_label, lo): (&str, f32), max: f32, note: &str, g: &Grid, w: &mut dyn Write) -> io::Result<()> {
    let p = g.precision.max(2);
    if g.color {
        // Ten swatches of two columns, then the top value; the note only where it fits.
        let colour = |t: f64| if g.signed { diverging(t) } else { viridis(t) };
        let ramp: String = (0..10).map(|i| format!("{}  ", paint(colour(i as f64 / 9.0), g.truecolor))).collect();
        let top = format!("{max:.p$}");
        let note = format!(" ({note})");
        let fits = "scale  ".len() + lo_label.len() + 20 + 1 + top.len() + note.len() <= g.width;
        let note = if fits { note.as_str() } else { "" };
        writeln!(w, "scale {lo_label} {ramp}\x1b[0m {top}{note}")
    } else {
        // The shades with the boundaries between them, like the colour ramp with its ends; a
        // signed grid's shades are the distance from 0, each value's sign written in its cell.
        let (lo_label, lo) = if g.signed { ("|value| 0", 0.0) } else { (lo_label, lo) };
        let mut text = format!("scale {lo_label}");
        for (i, s) in SHADES.iter().enumerate() {
            if i > 0 {
                text.push_str(&format!(" {:.p$}", lo + (max - lo) * i as f32 / 5.0));
            }
            text.push_str(&format!(" '{s}'"));
        }
        text.push_str(&format!(" {max:.p$} ({note})"));
        for line in wrap_words(&text, g.width, "  ") {
            writeln!(w, "{line}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::colour::VIRIDIS;
    use super::*;

    #[test]
    fn colour_scale_ends_and_cube() {
        assert_eq!(viridis(0.0), VIRIDIS[0]);
        assert_eq!(viridis(1.0), VIRIDIS[8]);
        assert_eq!(viridis(2.0), VIRIDIS[8]);
        assert_eq!(viridis(0.0625), [0x46, 0x17, 0x68]);
        // Black and white are the cube's corners.
        assert_eq!(xterm256([0, 0, 0]), (16, [0, 0, 0]));
        assert_eq!(xterm256([255, 255, 255]), (231, [255, 255, 255]));
        assert_eq!(xterm256(VIRIDIS[8]).0, 16 + 36 * 5 + 6 * 4);
        assert!(dark_text(VIRIDIS[8]) && !dark_text(VIRIDIS[0]));
    }

    #[test]
    fn blocks_and_wrapping() {
        assert_eq!(blocks(8, 9, 8, 80), vec![(0, 8)]);
        assert_eq!(blocks(8, 9, 8, 40), vec![(0, 3), (3, 6), (6, 8)]);
        assert_eq!(wrap_words("aa bb cc", 5, " "), vec!["aa bb", " cc"]);
        assert_eq!(wrap_words("  aa bb", 5, "    "), vec!["  aa", "    bb"]);
    }
}
