//! Renderers: one file per output format. Each reads a [`Trace`] and writes bytes; none does
//! tensor math, and none depends on the terminal, so the same command gives the same bytes.

// One file per format…
pub mod analysis;
pub mod attribute;
pub mod batch;
pub mod focus;
pub mod generate;
pub mod header;
pub mod heatmap;
pub mod html;
pub mod html_generate;
pub mod html_predictions;
pub mod json;
pub mod jsonl;
pub mod lens;
pub mod maps;
pub mod predictions;
pub mod summary;
pub mod svg;
pub mod table;
// …and the helpers they share.
pub mod colour;
pub mod numbers;
pub mod text;

use crate::settings::{Format, Output};
use crate::trace::Trace;
use crate::views::Views;

use std::io::Write;

/// Renders the trace with the views derived from it (`--focus`, `--merge-pieces`, …) in the
/// format `out` names; `check` is `--check`'s report for the JSON document.
pub fn render(
    trace: &Trace,
    views: &Views,
    out: &Output,
    check: Option<&serde_json::Value>,
    w: &mut dyn Write,
) -> std::io::Result<()> {
    let derived = views.maps.as_ref().filter(|_| out.views.derived());
    match out.format {
        Format::Table => {
            // A derived view takes the place of the weights tables it was derived from.
            let plain;
            let shown = match derived {
                Some(_) => {
                    plain = Trace {
                        steps: trace.steps.iter().filter(|s| s.name != "attn.weights").cloned().collect(),
                        ..trace.clone()
                    };
                    &plain
                }
                None => trace,
            };
            if let Some(links) = &views.summary {
                summary::write((trace, views.stacks.as_ref()), links, out.width, w)?;
            } else {
                table::write(shown, out.precision, out.width, w)?;
            }
            if let Some(maps) = derived {
                maps::write_tables(maps, out.precision, out.width, w)?;
            }
            if views.default_tables {
                summary::write_hint(true, w)?;
            }
            write_after_tables(trace, views, out, w)
        }
        Format::Json => write_json(trace, views, (derived, check), w),
        Format::Heatmap => heatmap::write(trace, views, out, w),
        Format::Jsonl => jsonl::write(trace, w),
    }
}

/// The JSON document: the trace, then each view and report that the run has.
fn write_json(
    trace: &Trace,
    views: &Views,
    (derived, check): (Option<&crate::views::maps::Maps>, Option<&serde_json::Value>),
    w: &mut dyn Write,
) -> std::io::Result<()> {
    let mut extra = Vec::new();
    if let Some(f) = &views.focus {
        extra.push(("focus", focus::to_json(f)));
    }
    if let Some(m) = derived {
        extra.push(("views", maps::to_json(m)));
    }
    if let Some(check) = check {
        extra.push(("check", check.to_string()));
    }
    // `--show-positions`: the positions every position-indexed array holds.
    extra.extend(trace.shown_positions.as_ref().map(|p| ("positions", serde_json::to_string(p).unwrap_or_default())));
    if let Some(p) = predictions::to_json(trace) {
        extra.push(("predictions", p));
    }
    extra.extend(lens::json(trace));
    if let Some(s) = &views.stats {
        extra.push(("stats", analysis::stats_json(s)));
    }
    if let Some(r) = &views.rollout {
        extra.push(("rollout", analysis::rollout_json(r)));
    }
    if let Some(p) = &views.patching {
        extra.push(("patching", analysis::patching_json(p)));
    }
    if let Some(g) = generate::to_json(trace, views.generation.as_deref()) {
        extra.push(("generation", g));
    }
    if let Some(a) = &trace.attribution {
        extra.push(("attribution", attribute::to_json(a)));
    }
    if let Some(s) = views.stacks.as_ref().filter(|s| !s.alignment.is_empty()) {
        extra.push(("alignment", summary::alignment_json(&s.alignment)));
    }
    if !views.notes.is_empty() {
        extra.push(("notes", serde_json::to_string(&views.notes).unwrap_or_default()));
    }
    json::write_with(trace, &extra, w)
}

/// What follows the tables: predictions, the lens, statistics, rollout, patching, the
/// attribution, the parameters and the focus walkthrough.
fn write_after_tables(trace: &Trace, views: &Views, out: &Output, w: &mut dyn Write) -> std::io::Result<()> {
    predictions::write(trace, out.width, w)?;
    generate::write(trace, views.generation.as_deref(), out.width, w)?;
    lens::write(trace, out.width, w)?;
    if let Some(s) = &views.stats {
        analysis::write_stats(s, out.precision, out.width, w)?;
    }
    if let Some(r) = &views.rollout {
        analysis::write_rollout(trace, r, out.precision, out.width, w)?;
    }
    analysis::write_patching(trace, views, out.precision, out.width, w)?;
    if let (Some(a), Some(r)) = (&trace.attribution, &views.attribution) {
        attribute::write(a, r, out.precision, out.width, w)?;
    }
    if let Some(p) = &views.params {
        table::write_params(p, out.precision, out.width, w)?;
    }
    if let Some(f) = &views.focus {
        focus::write(f, out, w)?;
    }
    Ok(())
}
