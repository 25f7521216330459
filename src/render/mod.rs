//! Renderers: one file per output format. Each reads a [`Trace`] and writes bytes; none does
//! tensor math, and none depends on the terminal, so the same command gives the same bytes.

pub mod focus;
pub mod heatmap;
pub mod html;
pub mod json;
pub mod jsonl;
pub mod summary;
pub mod svg;
pub mod table;
pub mod views;

use crate::cli::Format;
use crate::settings::Output;
use crate::trace::Trace;
use crate::views::Views;
use std::io::Write;

pub fn render(trace: &Trace, out: &Output, w: &mut dyn Write) -> std::io::Result<()> {
    render_views(trace, &Views::default(), out, w)
}

/// Renders the trace with the views derived from it (`--focus`, `--merge-pieces`, …).
pub fn render_views(trace: &Trace, views: &Views, out: &Output, w: &mut dyn Write) -> std::io::Result<()> {
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
            if out.summary {
                summary::write(trace, out.width, w)?;
            } else {
                table::write(shown, out.precision, out.width, w)?;
            }
            if let Some(maps) = derived {
                views::write_tables(maps, out.precision, out.width, w)?;
            }
            if let Some(f) = &views.focus {
                focus::write(f, out, w)?;
            }
            Ok(())
        }
        Format::Json => {
            let mut extra = Vec::new();
            if let Some(f) = &views.focus {
                extra.push(("focus", focus::to_json(f)));
            }
            if let Some(maps) = derived {
                extra.push(("views", views::to_json(maps)));
            }
            if let Some(check) = &trace.check {
                extra.push(("check", check.to_string()));
            }
            json::write_with(trace, &extra, w)
        }
        Format::Heatmap => heatmap::write(trace, views, out, w),
        Format::Jsonl => jsonl::write(trace, w),
    }
}
