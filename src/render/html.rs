//! `--html FILE`: the trace as one self-contained page (inline CSS and JavaScript, no network
//! fetches; it works from disk). A language model's predictions come first
//! (html_predictions.rs: the terminal's next-token table, and a generation's tokens with their
//! runner-ups). With `--generate`, then the generation view
//! (html_generate.rs: the text as tokens, each generated one showing what its step attended
//! to). Then every layer × head as a small map (one pixel per
//! weight; a click opens it in the large view); then the attention maps: a layer menu and a
//! head menu ("all heads" shows every head of the layer side by side), each weight a cell
//! coloured on the heatmap's viridis scale, its value shown on hover. The scale runs from 0 to
//! each map's largest weight, or, with the page's "shared 0–1 colour scale" toggle, from 0 to
//! 1 in every map, so that heads compare by colour. `--patch` adds the effects' grid,
//! `--attribute` the heads' shares on a diverging scale with the ranked terms.
//! Then the `--focus` walkthrough when asked for (the text view, preformatted), then a table
//! per step and head for the other steps that were selected (for a real model only when
//! `--steps` selects them, as its terminal view is a summary too).
//!
//! A batch's page ([`write_batch`]) lists the sentences, then gives each a section of its own
//! ([`section`], what a single page holds below its sentence), with the styles and the script
//! once. With `--pad-to`, pads' labels are grey and their keys hatched.
//!
//! The maps travel as JSON in a `<script type="application/json">` block per section (f32s as
//! shortest round-trip decimals, `<` escaped) and html.js draws every block it finds (and
//! html_generate.js every generation block);
//! everything else is static HTML. Nothing depends on the clock or the machine: the same
//! trace gives the same bytes.

use super::colour::{dark_text, grid_colour, hex, VIRIDIS};
use super::focus;
use super::text::{cut, esc};
use crate::settings::Output;
use crate::trace::{Step, Trace, Values};
use crate::views::maps::Maps;
use crate::views::patch::PatchGrid;
use crate::views::Views;
use std::fmt::Write as _;
use std::io::{self, Write};

const CSS: &str = include_str!("html.css");
const JS: &str = include_str!("html.js");
const GEN_JS: &str = include_str!("html_generate.js");

/// The page of one trace: `maps` drawn, and `views`' focus walkthrough, patching grid and
/// generation rows when present.
pub fn write(trace: &Trace, maps: &Maps, views: &Views, out: &Output, w: &mut dyn Write) -> io::Result<()> {
    let sentence = sentence(trace);
    let mut s = head(&sentence);
    let _ = writeln!(s, "<h1>attn-trace</h1>\n<p class=\"sentence\">{}</p>", esc(&sentence));
    s.push_str(&section(trace, maps, views, out, "")?);
    tail(&mut s);
    w.write_all(s.as_bytes())
}

/// An encoder–decoder's page: its summary line, its predictions (the decoder's, once), then
/// the encoder's self-attention, the decoder's and the cross-attention, each a [`section`] of
/// its own (suffixes `-enc`, `-dec`, `-cross`), as bertviz's three views in one page.
pub fn write_stacks(
    trace: &Trace,
    pages: &[(String, Trace, Maps)],
    views: &Views,
    out: &Output,
    w: &mut dyn Write,
) -> io::Result<()> {
    let sentence = sentence(trace);
    let mut s = head(&sentence);
    let _ = writeln!(s, "<h1>attn-trace</h1>\n<p class=\"sentence\">{}</p>", esc(&sentence));
    // The predictions are the decoder's, said once above the three.
    s.push_str(&super::html_predictions::section(trace, ""));
    for ((title, seen, maps), sfx) in pages.iter().zip(["-enc", "-dec", "-cross"]) {
        let _ = writeln!(s, "<article class=\"item\">\n<h2 class=\"item\" id=\"stack{sfx}\">{}</h2>", esc(title));
        s.push_str(&section_of(seen, maps, views, out, (sfx, false))?);
        s.push_str("</article>\n");
    }
    tail(&mut s);
    w.write_all(s.as_bytes())
}

/// A batch's page: a list of the sentences linking to their sections, then one section per
/// sentence, in the batch's order, each as [`section`] rendered it (with the suffix
/// `-s{index + 1}`); the styles and the script once.
pub fn write_batch(sections: &[(String, String)], w: &mut dyn Write) -> io::Result<()> {
    let count = sections.len();
    let mut s = head(&format!("a batch of {count} sentences"));
    let _ = writeln!(s, "<h1>attn-trace</h1>\n<p class=\"summary\">{count} sentences, each traced on its own.</p>");
    s.push_str("<nav class=\"contents\">\n<h2>Sentences</h2>\n<ol>\n");
    for (i, (sentence, _)) in sections.iter().enumerate() {
        let _ = writeln!(s, "<li><a href=\"#s{}\">{}</a></li>", i + 1, esc(&cut(sentence, 120)));
    }
    s.push_str("</ol>\n</nav>\n");
    for (i, (sentence, body)) in sections.iter().enumerate() {
        let _ = writeln!(
            s,
            "<article class=\"item\">\n<h2 class=\"item\" id=\"s{}\">Sentence {} of {count}: <span class=\"sentence\">{}</span></h2>",
            i + 1,
            i + 1,
            esc(sentence)
        );
        s.push_str(body);
        s.push_str("</article>\n");
    }
    tail(&mut s);
    w.write_all(s.as_bytes())
}

/// The sentence a trace was computed from (its tokens joined when it came as a matrix).
pub fn sentence(trace: &Trace) -> String {
    trace.sentence.clone().unwrap_or_else(|| trace.tokens.join(" "))
}

/// The page up to `<body>`: its title and the styles.
pub fn head(title: &str) -> String {
    let mut s = String::new();
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    // An empty icon, so the browser does not ask the file system for /favicon.ico.
    s.push_str("<link rel=\"icon\" href=\"data:,\">\n");
    let _ = writeln!(s, "<title>attn-trace: {}</title>", esc(&cut(title, 80)));
    let _ = writeln!(s, "<style>\n{CSS}</style>\n</head>\n<body>");
    s
}

/// The script, once per page: it draws every section's maps and generation view.
fn tail(s: &mut String) {
    let _ = writeln!(s, "<script>\n{JS}{GEN_JS}</script>\n</body>\n</html>");
}

/// One trace's part of a page: its summary line, a language model's predictions, `--generate`'s view, the maps (every head,
/// then the large view with its menus), `--patch`'s effects, the `--focus` walkthrough, the
/// step tables, and the maps' data. Every element id ends in `sfx` ("" on a single page), so
/// that sections of one page do not share ids; the script finds each section by its data
/// blocks, `data{sfx}` and `gen-data{sfx}`.
pub fn section(trace: &Trace, maps: &Maps, views: &Views, out: &Output, sfx: &str) -> io::Result<String> {
    section_of(trace, maps, views, out, (sfx, true))
}

/// [`section`], with the predictions (what the model said, before how it attended) when
/// `predictions` is set.
fn section_of(
    trace: &Trace,
    maps: &Maps,
    views: &Views,
    out: &Output,
    (sfx, predictions): (&str, bool),
) -> io::Result<String> {
    let (focus, patch) = (views.focus.as_ref(), views.patch_grid.as_ref());
    let mut s = String::new();
    let _ = writeln!(s, "<p class=\"summary\">{}</p>", esc(&super::header::summary(trace)));
    if predictions {
        s.push_str(&super::html_predictions::section(trace, sfx));
    }
    if let Some(rows) = &views.generation_rows {
        s.push_str(&super::html_generate::section(trace, rows, out.precision, sfx));
    }
    let _ = writeln!(s, "<section id=\"overview{sfx}\">\n<h2>Every head</h2>");
    s.push_str(
        "<p class=\"rule\">Layers down, heads across, one pixel per weight; click a map to open it below.</p>\n",
    );
    let _ = writeln!(s, "<div id=\"overview-grid{sfx}\" class=\"overview-grid\"></div>\n</section>");
    let _ = writeln!(s, "<section id=\"attention{sfx}\">\n<h2>Attention weights</h2>");
    let _ = writeln!(s, "<div class=\"controls\"><label>Layer <select id=\"layer{sfx}\"></select></label>");
    let _ = writeln!(s, "<label>Head <select id=\"head{sfx}\"></select></label>");
    // A toggle, not a flag: the page holds every weight, so the reader can switch scales while
    // comparing heads without writing the page again; it starts as the terminal heatmap does.
    let _ = writeln!(s, "<label><input type=\"checkbox\" id=\"shared{sfx}\"> shared 0–1 colour scale</label></div>");
    for r in &maps.rules {
        let _ = writeln!(s, "<p class=\"rule\">View: {}.</p>", esc(r));
    }
    if maps.pad.contains(&true) || maps.key_pad().contains(&true) {
        s.push_str("<p class=\"rule\">Pads (--pad-to) are labelled in grey italics; their keys are hatched: ");
        s.push_str("the attention mask hides them.</p>\n");
    }
    let _ = writeln!(
        s,
        "<p class=\"rule\" id=\"scale-rule{sfx}\">Rows are queries, columns keys; colour runs from 0 to each map's \
         largest weight.</p>"
    );
    let _ = writeln!(s, "<div id=\"tip{sfx}\" class=\"tip\">Hover a cell to see its weight.</div>");
    let _ = writeln!(s, "<div id=\"maps{sfx}\" class=\"maps\"></div>\n</section>");
    if let Some(p) = patch {
        patch_section(&mut s, (p, views.patch_text().title), out.precision, sfx);
    }
    attribution_section(&mut s, trace, out, sfx)?;
    if let Some(f) = focus {
        let mut text = Vec::new();
        let plain = Output { color: false, width: out.width.max(100), ..out.clone() };
        focus::write(f, &plain, &mut text)?;
        let _ = write!(s, "<section id=\"focus{sfx}\">\n<h2>Focus</h2>\n<pre>");
        // Line by line: `esc` shows a control character, a line break too, as an escape.
        let text = String::from_utf8_lossy(&text);
        s.push_str(&text.trim_start().lines().map(esc).collect::<Vec<_>>().join("\n"));
        s.push_str("</pre>\n</section>\n");
    }
    let _ = writeln!(s, "<section id=\"steps{sfx}\">\n<h2>Steps</h2>");
    if out.views.html_tables {
        let labels = (trace.labels(), trace.key_labels());
        for step in trace.steps.iter().filter(|st| st.name != "attn.weights") {
            step_tables(&mut s, step, (&labels.0, &labels.1), out.precision, sfx);
        }
    } else {
        s.push_str("<p class=\"rule\">A real model's step tables are left out unless --steps asks for them ");
        s.push_str("(e.g. --steps attn --layer 0).</p>\n");
    }
    s.push_str("</section>\n");
    // `<` cannot appear in JSON outside strings, so escaping it keeps "</script>" in a token
    // from closing the block while JSON.parse still reads the same text.
    let data = data_json(maps, out.precision).replace('<', "\\u003c");
    let _ = writeln!(s, "<script id=\"data{sfx}\" type=\"application/json\">{data}</script>");
    Ok(s)
}

/// `--patch`: the sweep's effects as a static table, each cell on its colour.
fn patch_section(s: &mut String, (p, title): (&PatchGrid, &str), precision: usize, sfx: &str) {
    let path = title.starts_with("path patching");
    let h2 = if title == crate::views::patch::ATTRIBUTION_TITLE {
        "Attribution patching (gradient approximation)".to_string()
    } else if path {
        title.replacen('p', "P", 1) // digits, dots, colons, commas: nothing to escape
    } else {
        "Activation patching".to_string()
    };
    let _ = writeln!(s, "<section id=\"patching{sfx}\">\n<h2>{h2}</h2>");
    let scale =
        if path { "0 = the clean run, 1 = the corrupted run" } else { "0 = the corrupted run, 1 = the clean run" };
    let _ = writeln!(
        s,
        "<p class=\"rule\">Effect of each patch, layers × {}: {scale}; colour from {:.2} to {:.2}.</p>",
        p.across, p.lo, p.hi
    );
    grid_table(s, p, precision);
    s.push_str("</section>\n");
}

/// `--attribute`: the heads' terms as a grid on the diverging scale, then the sum check and the
/// ranked terms and sources as the terminal shows them.
fn attribution_section(s: &mut String, trace: &Trace, out: &Output, sfx: &str) -> io::Result<()> {
    let (Some(a), Some(r)) = (&trace.attribution, crate::views::attribute::ranked(trace)) else { return Ok(()) };
    let _ = writeln!(s, "<section id=\"attribution{sfx}\">\n<h2>Direct logit attribution</h2>");
    let _ = writeln!(
        s,
        "<p class=\"rule\">Each head's share of {}, layers × heads: red toward the answer, blue against, white 0.</p>",
        esc(&crate::views::attribute::metric(&r))
    );
    grid_table(s, &crate::views::attribute::grid(a), out.precision);
    let mut text = Vec::new();
    super::attribute::write(a, &r, out.precision, out.width.max(100), &mut text)?;
    s.push_str("<pre>");
    s.push_str(&String::from_utf8_lossy(&text).trim_start().lines().map(esc).collect::<Vec<_>>().join("\n"));
    s.push_str("</pre>\n</section>\n");
    Ok(())
}

/// A grid (`views::grid`: the patching effects, a comparison's head divergences) as a static
/// table, each cell on its colour from `p.lo` to `p.hi`.
pub fn grid_table(s: &mut String, p: &PatchGrid, precision: usize) {
    s.push_str("<table class=\"patch\"><thead><tr><th></th>");
    for c in &p.cols {
        let _ = write!(s, "<th>{}</th>", esc(c));
    }
    s.push_str("</tr></thead><tbody>\n");
    let n = p.cols.len();
    for (r, label) in p.rows.iter().enumerate() {
        let _ = write!(s, "<tr><th>{}</th>", esc(label));
        for c in 0..n {
            let v = p.values[r * n + c];
            let rgb = grid_colour(v, p.lo, p.hi, p.signed);
            let fg = if dark_text(rgb) { "#000" } else { "#fff" };
            let _ = write!(s, "<td style=\"background:{};color:{fg}\">{v:.precision$}</td>", hex(rgb));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table>\n");
}

/// The maps and what the script needs to draw them: `labels` for the rows (queries), and
/// `keys` (with `key_pad`) for the columns only when the keys are another sequence's
/// tokens; each map's `values` are rows of `keys.length` (else `labels.length`) weights.
fn data_json(maps: &Maps, precision: usize) -> String {
    let (n, cols) = (maps.rows(), maps.cols());
    let colors: Vec<String> = VIRIDIS.iter().map(|c| format!("[{},{},{}]", c[0], c[1], c[2])).collect();
    let mut layers: Vec<String> = Vec::new();
    for l in maps.layers() {
        let entries: Vec<String> = maps
            .layer(l)
            .iter()
            .map(|m| {
                // One buffer for the whole map (a server draws 276,480 weights per request for
                // SmolLM2 at 32 tokens: a String per number cost more than the numbers).
                let mut rows = Vec::new();
                // Writing into a Vec cannot fail.
                let _ = super::json::write_f32_nested(&mut rows, &[n, cols], &m.values[..n * cols]);
                let rows = String::from_utf8(rows).unwrap_or_default();
                let head = m.head.map_or("\"mean\"".to_string(), |h| format!("\"{h}\""));
                format!("{{\"head\":{head},\"label\":\"{}\",\"values\":{rows}}}", m.head_label())
            })
            .collect();
        layers.push(format!("{{\"layer\":{l},\"maps\":[{}]}}", entries.join(",\n")));
    }
    // Which labels are pads, only when there are any.
    let json = |v: &[bool]| serde_json::to_string(v).unwrap_or_default();
    let mut pad = if maps.pad.contains(&true) { format!("\"pad\":{},", json(&maps.pad)) } else { String::new() };
    if let Some(k) = &maps.keys {
        pad += &format!("\"keys\":{},", serde_json::to_string(&k.labels).unwrap_or_default());
        if k.pad.contains(&true) {
            pad += &format!("\"key_pad\":{},", json(&k.pad));
        }
    }
    format!(
        "{{\"precision\":{precision},\"labels\":{},{pad}\"colors\":[{}],\"layers\":[\n{}]}}",
        serde_json::to_string(&maps.labels).unwrap_or_default(),
        colors.join(","),
        layers.join(",\n")
    )
}

/// One table per head (or one for the step), rows labelled by token (`labels`), `key_pos`
/// columns by key token (`keys`, `Trace::key_labels`).
fn step_tables(s: &mut String, step: &Step, (labels, keys): (&[String], &[String]), precision: usize, sfx: &str) {
    let (groups, rows, cols) = match step.shape.as_slice() {
        [c] => (1, 1, *c),
        [r, c] => (1, *r, *c),
        [g, r, c] => (*g, *r, *c),
        _ => return,
    };
    let by_key = step.dims.last() == Some(&"key_pos");
    let by_pos = step.dims.len() == 1 && step.dims[0] == "pos";
    let cell = |i: usize| -> String {
        match &step.values {
            Values::F32(v) if v[i].is_infinite() => (if v[i] > 0.0 { "inf" } else { "-inf" }).into(),
            Values::F32(v) => format!("{:.precision$}", v[i]),
            Values::Bool(v) => (if v[i] { "masked" } else { "·" }).into(),
            Values::Int(v) => v[i].to_string(),
            // The `tokens` step holds the tokens as spelled (`ĠcafÃ©`); the page shows their
            // labels (`·café`), as the terminal's token table does.
            Values::Str(v) if v.len() == labels.len() => labels[i].clone(),
            Values::Str(v) => v[i].clone(),
        }
    };
    for g in 0..groups {
        let head = if step.is_per_head() {
            format!(" · head {}", step.heads.as_ref().map_or(g, |hs| hs[g]))
        } else {
            String::new()
        };
        let shape: Vec<String> = step.shape.iter().map(|d| d.to_string()).collect();
        let _ = writeln!(
            s,
            "<h3 id=\"{}{}{sfx}\">{}{head} <span class=\"dims\">[{} = {}]</span></h3>",
            esc(&step.id),
            if step.is_per_head() { format!("-h{g}") } else { String::new() },
            esc(&step.id),
            step.dims.join(" × "),
            shape.join(" × ")
        );
        s.push_str("<table class=\"step\"><thead><tr><th></th>");
        for c in 0..cols {
            let label = if by_key { keys.get(c).cloned().unwrap_or_default() } else { c.to_string() };
            let _ = write!(s, "<th>{}</th>", esc(&label));
        }
        s.push_str("</tr></thead><tbody>\n");
        for r in 0..rows {
            let label =
                if by_pos { String::new() } else { format!("{r} {}", labels.get(r).map_or("", |t| t.as_str())) };
            let _ = write!(s, "<tr><th>{}</th>", esc(&label));
            for c in 0..cols {
                let _ = write!(s, "<td>{}</td>", esc(&cell((g * rows + r) * cols + c)));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</tbody></table>\n");
    }
}
