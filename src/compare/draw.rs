//! The comparison's pictures, drawn by the renderers that draw a patching sweep's grid
//! (`render::heatmap::write_grid`, `render::svg::write_grids`, `render::html::grid_table`):
//! every head's Jensen–Shannon divergence as a layer × head grid, its mean over the queries
//! and its largest, in the terminal (`--format heatmap`), as SVG (`--svg`) and in an HTML page
//! (`--html`) that also holds the text report and every ranked row.

use super::found::{Comparison, Outcome, MAX_TEXT, MEAN_TEXT};
use super::report::{sci, write_header, write_text};
use crate::render::text::esc;
use crate::settings::Output;
use crate::views::grid::{Grid, GridText};
use std::fmt::Write as _;
use std::io::{self, Write};

fn grids(c: &Comparison) -> Vec<(Grid, GridText<'static>)> {
    [(c.head_grid(false), MEAN_TEXT), (c.head_grid(true), MAX_TEXT)]
        .into_iter()
        .filter_map(|(g, t)| g.map(|g| (g, t)))
        .collect()
}

/// `--format heatmap`: the sides and tokens, then both grids.
pub fn heatmap(c: &Comparison, out: &Output, w: &mut dyn Write) -> io::Result<()> {
    write_header(c, out.width, w)?;
    let drawn = grids(c);
    if drawn.is_empty() {
        writeln!(w, "\n(no attention weights were compared)")?;
    }
    for (g, text) in &drawn {
        crate::render::heatmap::write_grid(g, *text, out, w)?;
    }
    Ok(())
}

/// `--svg FILE`: both grids, one under the other.
pub fn svg(c: &Comparison, out: &Output, w: &mut dyn Write) -> io::Result<()> {
    let drawn = grids(c);
    let refs: Vec<(&Grid, GridText)> = drawn.iter().map(|(g, t)| (g, *t)).collect();
    let title = format!("attn-trace compare: {} against {}", c.sides[0].given, c.sides[1].given);
    let sentence = c.sentence.clone().unwrap_or_else(|| c.labels.join(" "));
    let note = format!("“{sentence}”. Colour: 0 to each grid's largest divergence.");
    crate::render::svg::write_grids(&title, &note, &refs, out.precision.min(4), w)
}

/// `--html FILE`: the text report (`top` rows of each ranking), both grids, then every step
/// ranked as a table.
pub fn html(c: &Comparison, top: usize, out: &Output, w: &mut dyn Write) -> io::Result<()> {
    let title = format!("compare {} against {}", c.sides[0].given, c.sides[1].given);
    let mut s = crate::render::html::head(&title);
    let _ = writeln!(s, "<h1>attn-trace compare</h1>");
    let mut text = Vec::new();
    write_text(c, top, out.width.max(100), &mut text)?;
    let text = String::from_utf8_lossy(&text);
    let _ = writeln!(s, "<section id=\"report\">\n<h2>Report</h2>\n<pre>{}</pre>\n</section>", esc_lines(&text));
    s.push_str("<section id=\"heads\">\n<h2>Every head</h2>\n");
    for (g, text) in grids(c) {
        let _ = writeln!(
            s,
            "<p class=\"rule\">{}, layers × heads: {}; colour from {:.2} to {:.2}.</p>",
            esc(text.title),
            esc(text.scale),
            g.lo,
            g.hi
        );
        crate::render::html::grid_table(&mut s, &g, out.precision);
    }
    s.push_str("</section>\n");
    steps_table(&mut s, c);
    s.push_str("</body>\n</html>\n");
    w.write_all(s.as_bytes())
}

/// Each line escaped (a control character is shown, not sent).
fn esc_lines(text: &str) -> String {
    text.trim_end().lines().map(esc).collect::<Vec<_>>().join("\n")
}

/// Every common step, ranked, as a table.
fn steps_table(s: &mut String, c: &Comparison) {
    s.push_str("<section id=\"steps\">\n<h2>Every step</h2>\n<table class=\"step\"><thead><tr><th>rank</th>");
    s.push_str(
        "<th>step</th><th>relative error</th><th>max |a − b|</th><th>past the threshold</th></tr></thead><tbody>\n",
    );
    for (i, step) in c.ranked_steps().iter().enumerate() {
        let max = match &step.outcome {
            Outcome::Values(e) => sci(e.max_abs),
            Outcome::Equal(eq) => (if *eq { "equal" } else { "differ" }).to_string(),
            Outcome::Shapes(_) => "shapes differ".to_string(),
        };
        let past = if step.diverges(c.threshold) { "yes" } else { "" };
        let _ = writeln!(
            s,
            "<tr><td>{}</td><th>{}</th><td>{}</td><td>{max}</td><td>{past}</td></tr>",
            i + 1,
            esc(&step.id),
            sci(step.relative())
        );
    }
    s.push_str("</tbody></table>\n</section>\n");
}
