//! `--svg FILE`: a static attention map for slides. One layer (`--layer`, default 0); one
//! head with `--head`, else every head of the layer side by side (four to a row), or the mean
//! with `--average-heads`. Each weight is one `<rect class="cell">` with a `<title>` tooltip,
//! coloured on the heatmap's viridis scale from 0 to that map's largest weight (stated in
//! each panel's title); values are written into cells that are large enough. Coordinates are
//! whole pixels and nothing depends on the clock or the machine, so the bytes are stable.
//! With `--patch`, the sweep's effects follow as one more panel (layers down, heads or
//! positions across), coloured from min(0, smallest effect) to max(1, largest effect).
//! A batch stacks one such block per sentence ([`write_batch`]). With `--pad-to`, pads'
//! labels are grey and italic and their key columns hatched. A panel is query labels down
//! and key labels across, as many rows and columns as the maps have (non-square when the keys
//! are another sequence's), its cells sized by the longer side.

use super::colour::{dark_text, grid_colour, hex, max_of, scale_of, viridis};
use super::text::{cut, esc};
use crate::settings::Output;
use crate::trace::Trace;
use crate::views::grid::GridText;
use crate::views::maps::{Map, Maps};
use crate::views::patch::PatchGrid;
use std::fmt::Write as _;
use std::io::{self, Write};

/// Approximate width of one character of the 11 px sans-serif labels.
const CHAR_W: usize = 7;
/// Panels per row in the all-heads grid.
const PER_ROW: usize = 4;

pub fn write(
    trace: &Trace,
    maps: &Maps,
    patch: Option<(&PatchGrid, GridText)>,
    out: &Output,
    w: &mut dyn Write,
) -> io::Result<()> {
    let b = block(trace, maps, patch, out, None);
    let height = b.height + 40;
    let mut s = open(b.width, height, b.pads);
    s.push_str(&b.svg);
    legend(&mut s, 8, height - 28);
    s.push_str("</svg>\n");
    w.write_all(s.as_bytes())
}

/// A batch's SVG: each sentence's block (as a single run draws it, titled with the sentence's
/// index) stacked top to bottom in the batch's order, a rule between blocks, one legend at the
/// bottom. Stacked rather than side by side: a block is as wide as its layer's heads (up to
/// four panels), so a row of sentences would soon be wider than a slide, while a column
/// scrolls.
pub fn write_batch(blocks: &[Block], w: &mut dyn Write) -> io::Result<()> {
    let width = blocks.iter().map(|b| b.width).max().unwrap_or(0);
    let height = blocks.iter().map(|b| b.height).sum::<usize>() + 40;
    let mut s = open(width, height, blocks.iter().any(|b| b.pads));
    let mut y = 0;
    for (i, b) in blocks.iter().enumerate() {
        if i > 0 {
            let _ = writeln!(s, "<line x1=\"0\" y1=\"{y}\" x2=\"{width}\" y2=\"{y}\" stroke=\"#888888\"/>");
        }
        let _ = writeln!(s, "<g class=\"sentence\" transform=\"translate(0,{y})\">");
        s.push_str(&b.svg);
        s.push_str("</g>\n");
        y += b.height;
    }
    legend(&mut s, 8, height - 28);
    s.push_str("</svg>\n");
    w.write_all(s.as_bytes())
}

/// The hatching drawn over the keys of pads (`--pad-to`), defined once per file.
const PAD_HATCH: &str = "url(#pad-hatch)";

/// The opening tag, the white background, and the pads' hatching when a map has pads.
fn open(width: usize, height: usize, pads: bool) -> String {
    let mut s = String::new();
    // Writing into a String cannot fail.
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    if pads {
        s.push_str(
            "<defs><pattern id=\"pad-hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" \
             patternTransform=\"rotate(45)\"><rect width=\"2\" height=\"6\" fill=\"#ffffff\" \
             fill-opacity=\"0.55\"/></pattern></defs>\n",
        );
    }
    let _ = writeln!(s, "<rect width=\"{width}\" height=\"{height}\" fill=\"#ffffff\"/>");
    s
}

/// One trace's drawing from (0, 0), without the legend that goes below it.
pub struct Block {
    pub svg: String,
    pub width: usize,
    pub height: usize,
    /// Whether it draws pads, whose hatching the file must define.
    pub pads: bool,
}

/// One trace's drawing: its title (with `item`, "sentence i of n · " before it), the sentence
/// and the colour rule, the panels of `--layer`, and `--patch`'s panel.
pub fn block(
    trace: &Trace,
    maps: &Maps,
    patch: Option<(&PatchGrid, GridText)>,
    out: &Output,
    item: Option<(usize, usize)>,
) -> Block {
    let layer = out.views.layer;
    let shown: Vec<&Map> = maps.layer(layer);
    let labels: Vec<String> = maps.labels.iter().map(|l| cut(l, 14)).collect();
    let keys: Vec<String> = maps.key_labels().iter().map(|l| cut(l, 14)).collect();
    // Cells shrink with the sentence so that a panel stays within about 420 px square.
    let cell = (420 / labels.len().max(keys.len()).max(1)).clamp(6, 36);
    let px = |l: &[String]| l.iter().map(|l| l.chars().count()).max().unwrap_or(1) * CHAR_W + 8;
    let label_px = (px(&labels), px(&keys));
    let panel_w = label_px.0 + keys.len() * cell + 24;
    let panel_h = 22 + label_px.1 + labels.len() * cell + 16;
    let cols = shown.len().clamp(1, PER_ROW);
    let rows = shown.len().div_ceil(PER_ROW).max(1);
    let (width, top) = (cols * panel_w + 16, 56);
    let patch_size = patch.map(|(g, _)| patch_size(g));
    let width = width.max(patch_size.map_or(0, |(w, _)| w + 16));
    let height = top + rows * panel_h + patch_size.map_or(0, |(_, h)| h);
    let p = out.precision.min(2);
    let values_fit = cell >= 12 + (p + 2) * 6 && out.precision > 0;
    let mut s = String::new();
    let what = if maps.pieces.is_some() { ", words" } else { "" };
    let title = item.map_or(String::new(), |(i, count)| format!("sentence {} of {count} · ", i + 1));
    let _ = writeln!(
        s,
        "<text x=\"8\" y=\"20\" font-size=\"15\" font-weight=\"bold\">{title}layers.{layer}.attn.weights{what}</text>"
    );
    let sentence = trace.sentence.clone().unwrap_or_else(|| trace.tokens.join(" "));
    let mut note = format!("“{}”. Colour: 0 to each map's largest weight.", cut(&sentence, 90));
    for r in &maps.rules {
        note.push_str(&format!(" View: {r}."));
    }
    let pads = maps.pad.contains(&true) || maps.key_pad().contains(&true);
    if pads {
        note.push_str(" Pads (--pad-to): grey labels, hatched keys.");
    }
    let _ = writeln!(s, "<text x=\"8\" y=\"40\" fill=\"#444444\">{}</text>", esc(&note));
    if shown.is_empty() {
        let _ = writeln!(s, "<text x=\"8\" y=\"70\">no attention weights were recorded for layer {layer}</text>");
    }
    for (i, map) in shown.iter().enumerate() {
        let (x0, y0) = (8 + (i % PER_ROW) * panel_w, top + (i / PER_ROW) * panel_h);
        let axes = [(&labels[..], maps.pad.as_slice()), (&keys[..], maps.key_pad())];
        panel(&mut s, map, axes, (x0, y0), (cell, label_px), values_fit.then_some(p));
    }
    if let Some((p, text)) = patch {
        grid_panel(&mut s, p, text, (8, top + rows * panel_h), out.precision.min(2));
    }
    Block { svg: s, width, height, pads }
}

/// One map: title, key labels (rotated), query labels, cells; `axes` are the rows' (query)
/// and the columns' (key) labels with their pads, `label_px` the room for each.
fn panel(
    s: &mut String,
    map: &Map,
    [(labels, pad), (keys, key_pad)]: [(&[String], &[bool]); 2],
    (x0, y0): (usize, usize),
    (cell, label_px): (usize, (usize, usize)),
    values: Option<usize>,
) {
    let (n, cols) = (labels.len(), keys.len());
    let max = max_of(&map.values);
    let (gx, gy) = (x0 + label_px.0, y0 + 22 + label_px.1);
    let _ = writeln!(
        s,
        "<g class=\"map\" data-layer=\"{}\" data-head=\"{}\">",
        map.layer,
        map.head.map_or("mean".into(), |h| h.to_string())
    );
    let _ = writeln!(
        s,
        "<text x=\"{gx}\" y=\"{}\" font-weight=\"bold\">{} (max {max:.2})</text>",
        y0 + 14,
        map.head_label()
    );
    // A pad's label is grey and italic.
    let is = |pad: &[bool], i: usize| pad.get(i) == Some(&true);
    let grey = |pad: &[bool], i: usize| if is(pad, i) { " fill=\"#999999\" font-style=\"italic\"" } else { "" };
    for (k, l) in keys.iter().enumerate() {
        let x = gx + k * cell + cell / 2 + 4;
        let grey = grey(key_pad, k);
        let _ = writeln!(s, "<text transform=\"translate({x},{}) rotate(-90)\"{grey}>{}</text>", gy - 4, esc(l));
    }
    for (q, l) in labels.iter().enumerate() {
        let y = gy + q * cell + cell / 2 + 4;
        let _ = writeln!(s, "<text x=\"{}\" y=\"{y}\" text-anchor=\"end\"{}>{}</text>", gx - 4, grey(pad, q), esc(l));
    }
    let padded = |pad: &[bool], i: usize| if is(pad, i) { " (pad)" } else { "" };
    for (q, ql) in labels.iter().enumerate() {
        for (k, kl) in keys.iter().enumerate() {
            let v = map.values[q * cols + k];
            let rgb = viridis(scale_of(v, max));
            let (x, y) = (gx + k * cell, gy + q * cell);
            let tip = format!("{ql}{} → {kl}{}: {v:.4}", padded(pad, q), padded(key_pad, k));
            let _ = writeln!(
                s,
                "<rect class=\"cell\" x=\"{x}\" y=\"{y}\" width=\"{cell}\" height=\"{cell}\" fill=\"{}\"><title>{}</title></rect>",
                hex(rgb),
                esc(&tip)
            );
            if let Some(p) = values {
                let fg = if dark_text(rgb) { "#000000" } else { "#ffffff" };
                let _ = writeln!(
                    s,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"9\" fill=\"{fg}\">{v:.p$}</text>",
                    x + cell / 2,
                    y + cell / 2 + 3
                );
            }
        }
    }
    // The keys the mask hides, hatched over their cells.
    for k in (0..cols).filter(|&k| is(key_pad, k)) {
        let (x, h) = (gx + k * cell, n * cell);
        let _ = writeln!(
            s,
            "<rect class=\"pad\" x=\"{x}\" y=\"{gy}\" width=\"{cell}\" height=\"{h}\" fill=\"{PAD_HATCH}\"/>"
        );
    }
    s.push_str("</g>\n");
}

/// The patching panel's cell side and label widths.
const PATCH_CELL: usize = 44;

fn patch_labels(p: &PatchGrid) -> (usize, usize) {
    let width = |l: &[String]| l.iter().map(|x| cut(x, 14).chars().count()).max().unwrap_or(1) * CHAR_W + 8;
    (width(&p.rows), width(&p.cols))
}

/// The patching panel's width and height.
fn patch_size(p: &PatchGrid) -> (usize, usize) {
    let (row_px, col_px) = patch_labels(p);
    (row_px + p.cols.len() * PATCH_CELL + 8, 40 + col_px + p.rows.len() * PATCH_CELL + 16)
}

/// A grid (the patching effects, a comparison's head divergences): a title with the scale's
/// ends, column labels (rotated), row labels and one cell per value with its value.
fn grid_panel(s: &mut String, p: &PatchGrid, text: GridText, (x0, y0): (usize, usize), precision: usize) {
    let (row_px, col_px) = patch_labels(p);
    let (gx, gy) = (x0 + row_px, y0 + 40 + col_px);
    let _ = writeln!(s, "<g class=\"{}\">", text.group);
    let _ = writeln!(
        s,
        "<text x=\"{x0}\" y=\"{}\" font-weight=\"bold\">{}, {} × {} (colour {:.r$} to {:.r$}; {})</text>",
        y0 + 24,
        esc(text.title),
        p.down,
        p.across,
        p.lo,
        p.hi,
        esc(text.scale),
        r = precision.max(2)
    );
    for (c, l) in p.cols.iter().enumerate() {
        let x = gx + c * PATCH_CELL + PATCH_CELL / 2 + 4;
        let _ = writeln!(s, "<text transform=\"translate({x},{}) rotate(-90)\">{}</text>", gy - 4, esc(&cut(l, 14)));
    }
    let n = p.cols.len();
    for (r, l) in p.rows.iter().enumerate() {
        let y = gy + r * PATCH_CELL;
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            gx - 4,
            y + PATCH_CELL / 2 + 4,
            esc(&cut(l, 14))
        );
        for c in 0..n {
            let v = p.values[r * n + c];
            let rgb = grid_colour(v, p.lo, p.hi, p.signed);
            let x = gx + c * PATCH_CELL;
            let tip = format!("{} · {}: {} {v:.4}", p.rows[r], p.cols[c], text.value);
            let _ = writeln!(
                s,
                "<rect class=\"{}\" x=\"{x}\" y=\"{y}\" width=\"{PATCH_CELL}\" height=\"{PATCH_CELL}\" fill=\"{}\"><title>{}</title></rect>",
                text.value,
                hex(rgb),
                esc(&tip)
            );
            let fg = if dark_text(rgb) { "#000000" } else { "#ffffff" };
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"9\" fill=\"{fg}\">{v:.precision$}</text>",
                x + PATCH_CELL / 2,
                y + PATCH_CELL / 2 + 3
            );
        }
    }
    s.push_str("</g>\n");
}

/// An SVG of grids alone (`attn-trace compare`'s head divergences): a title, a line under
/// it, and each grid as a panel below the one before.
pub fn write_grids(
    title: &str,
    note: &str,
    grids: &[(&PatchGrid, GridText)],
    precision: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    let (title, note) = (cut(title, 100), cut(note, 120));
    let sizes: Vec<(usize, usize)> = grids.iter().map(|(g, _)| patch_size(g)).collect();
    // Room for the texts too: the title at about 9 px a character, the rest at CHAR_W (a
    // panel's title says what it shows and the scale's ends, about 40 characters more).
    let texts = grids.iter().map(|(_, t)| (t.title.chars().count() + t.scale.chars().count() + 40) * CHAR_W);
    let text_w = texts.chain([title.chars().count() * 9, note.chars().count() * CHAR_W]).max().unwrap_or(0);
    let width = sizes.iter().map(|s| s.0).chain([text_w]).max().unwrap_or(0) + 16;
    let height = 56 + sizes.iter().map(|s| s.1).sum::<usize>() + 8;
    let mut s = open(width, height, false);
    let _ = writeln!(s, "<text x=\"8\" y=\"20\" font-size=\"15\" font-weight=\"bold\">{}</text>", esc(&title));
    let _ = writeln!(s, "<text x=\"8\" y=\"40\" fill=\"#444444\">{}</text>", esc(&note));
    let mut y = 56;
    for ((g, text), (_, h)) in grids.iter().zip(&sizes) {
        grid_panel(&mut s, g, *text, (8, y), precision);
        y += h;
    }
    s.push_str("</svg>\n");
    w.write_all(s.as_bytes())
}

/// `--svg` with `--generate`: each recorded layer's map of the generated tokens (down) over
/// every earlier position (across), averaged over heads, one panel per layer.
pub fn write_generation(
    trace: &Trace,
    maps: &[crate::views::generate::GenerationMap],
    precision: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    let titles: Vec<String> = maps.iter().map(|m| crate::views::generate::title(m.layer)).collect();
    let text = GridText { title: "", scale: "0 to the largest weight", value: "weight", group: "generation" };
    let grids: Vec<(&PatchGrid, GridText)> =
        maps.iter().zip(&titles).map(|(m, t)| (&m.grid, text.with_title(t))).collect();
    let g = trace.generation.as_ref();
    let note = format!(
        "{} generated tokens after the {}-token prompt",
        g.map_or(0, |g| g.tokens.len()),
        g.map_or(0, |g| g.prompt_tokens)
    );
    write_grids(&super::html::sentence(trace), &note, &grids, precision, w)
}

/// A colour bar from 0 to "max" of a map.
fn legend(s: &mut String, x: usize, y: usize) {
    let _ = writeln!(s, "<text x=\"{x}\" y=\"{}\">0</text>", y + 11);
    for i in 0..20 {
        let rgb = viridis(i as f64 / 19.0);
        let _ =
            writeln!(s, "<rect x=\"{}\" y=\"{y}\" width=\"10\" height=\"14\" fill=\"{}\"/>", x + 14 + i * 10, hex(rgb));
    }
    let _ = writeln!(s, "<text x=\"{}\" y=\"{}\">the map's largest weight</text>", x + 220, y + 11);
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_markup() {
        // Control characters are shown as escapes, as in every text output (issue 19).
        assert_eq!(super::esc("<a & 'b'>\u{1}"), "&lt;a &amp; &apos;b&apos;&gt;\\u{1}");
    }
}
