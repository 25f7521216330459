//! Views: everything derived from a finished trace for showing it: the attention maps that
//! are drawn or merged ([`maps`]), the `--focus` walkthrough ([`focus`]) and the real-model
//! summary's strongest links ([`summary`]). The arithmetic lives here; renderers only lay
//! the results out. Views never change a step's values: derived numbers sit next to the trace.

pub mod analysis;
pub mod attribute;
mod derived;
pub mod explain;
pub mod focus;
pub mod generate;
pub mod grid;
pub mod maps;
pub mod params;
pub mod patch;
pub mod positions;
pub mod stacks;
pub mod summary;
pub use derived::Views;

use crate::settings::plan::Plan;
use crate::settings::{Format, Output};
use crate::trace::{Recorder, Trace};
use anyhow::Result;
use maps::Maps;
use std::sync::{Arc, Mutex};
use summary::LayerLinks;

/// The views a run gathers while the model computes (`Plan::reduce_summary`,
/// `Plan::reduce_stats`): attached to the recorder before the pass, read after it.
pub struct Reducing {
    summary: Option<Arc<Mutex<Vec<LayerLinks>>>>,
    stats: Option<Arc<Mutex<analysis::StatsRows>>>,
}

impl Reducing {
    /// Attaches the plan's reducers to `rec`, a run over `tokens` (`decoder`: a language model).
    pub fn attach(plan: &Plan, rec: &mut Recorder, tokens: &[String], decoder: bool) -> Reducing {
        let heads = plan.view_record.head.clone();
        let summary = plan.reduce_summary.then(|| summary::reduce_as_recorded(rec, tokens, decoder, heads.clone()));
        let stats = plan.reduce_stats.then(|| {
            let induction = rec.trace().config.interventions.induction;
            let stats = Arc::new(Mutex::new(analysis::StatsRows::new(heads, induction)));
            let sink = stats.clone();
            rec.read_rows(Box::new(move |tile| {
                if let Ok(mut s) = sink.lock() {
                    s.add(tile);
                }
            }));
            stats
        });
        Reducing { summary, stats }
    }

    /// Puts what was gathered into `views`.
    pub fn fill(self, views: &mut Views) -> Result<()> {
        let lock = || anyhow::anyhow!("internal: a reducer's lock was poisoned");
        if let Some(links) = self.summary {
            views.summary = Some(std::mem::take(&mut *links.lock().map_err(|_| lock())?));
        }
        if let Some(stats) = self.stats {
            let stats =
                std::mem::replace(&mut *stats.lock().map_err(|_| lock())?, analysis::StatsRows::new(None, None));
            views.stats = Some(stats.finish());
        }
        Ok(())
    }
}

/// Whether this run draws attention maps (as opposed to only deriving them for tables).
fn draws_maps(out: &Output) -> bool {
    out.format == Format::Heatmap || out.views.html.is_some() || out.views.svg.is_some()
}

/// Derives the views from the trace, then keeps only the steps the plan shows (the others
/// were recorded only for the views).
pub fn derive(trace: Trace, plan: &Plan, out: &Output) -> Result<(Trace, Views)> {
    // An encoder–decoder's views are drawn from one of its attentions (`--stack`).
    let Some(seen) = stacks::seen_as(&trace, out.views.stack) else { return derive_one(trace, plan, out) };
    // The alignment reads the cross-attention, which `seen` already is by default.
    let alignment = match out.views.stack {
        crate::settings::views::StackView::Cross => stacks::alignment(&seen, 3),
        _ => stacks::seen_as(&trace, crate::settings::views::StackView::Cross)
            .map(|c| stacks::alignment(&c, 3))
            .unwrap_or_default(),
    };
    let labels = seen.without_steps();
    let (_, mut views) = derive_one(seen, plan, out)?;
    let o = &out.views;
    let pages = if o.html.is_some() { stacks::pages(&trace, o.merge_pieces, o.average_heads) } else { Vec::new() };
    views.stacks = Some(stacks::Stacks { seen: labels, alignment, pages });
    let mut trace = trace;
    trace.steps.retain(|s| plan.show.wants(&s.id, s.layer, &s.name));
    Ok((trace, views))
}

/// [`derive`] for one stack's trace.
fn derive_one(mut trace: Trace, plan: &Plan, out: &Output) -> Result<(Trace, Views)> {
    let o = &out.views;
    let focus = plan.focus.map(|p| focus::derive(&trace, p, o.layer)).transpose()?;
    let focus = focus.map(|f| if o.strongest_head && f.heads.len() > 1 { f.strongest() } else { f });
    let focus = focus.map(|f| focus::Focus { pieces: plan.focus_pieces.clone(), ..f });
    // Statistics and rollout read the weights before `--steps` narrows what is shown.
    let stats = (out.stats && !plan.reduce_stats).then(|| analysis::stats(&trace));
    let rollout = out.rollout.then(|| analysis::rollout(&trace));
    // What each generated token looked at reads the prompt's weights, shown or not.
    let generation = generate::sources(&trace, 3);
    let generation_maps = if draws_maps(out) { generate::maps(&trace) } else { Vec::new() };
    let generation_rows = o.html.is_some().then(|| generate::rows(&trace)).flatten();
    // `--steps none` shows no step, the weights included: a heatmap then draws only its grids
    // (patching, attribution), unless a page or a picture is drawn from the maps.
    let none = plan.show.steps.as_ref().is_some_and(|s| s.is_empty()) && o.html.is_none() && o.svg.is_none();
    let maps = (!none && (draws_maps(out) || o.derived())).then(|| maps::maps(&trace, o.merge_pieces, o.average_heads));
    let show = &plan.show;
    trace.steps.retain(|s| show.wants(&s.id, s.layer, &s.name));
    for d in trace.generation.iter_mut().flat_map(|g| g.steps.iter_mut()) {
        // A decode step's step is selected by its id without the `gen.{t}.` prefix.
        d.steps
            .retain(|s| show.wants(crate::trace::generate::split_gen(&s.id).map_or(&s.id, |x| x.1), s.layer, &s.name));
    }
    // Derived tables and JSON views show only the weights that were asked for.
    let maps = match maps {
        Some(m) if !draws_maps(out) => {
            let kept: Vec<usize> =
                trace.steps.iter().filter(|s| s.name == "attn.weights").filter_map(|s| s.layer).collect();
            Some(Maps { maps: m.maps.into_iter().filter(|x| kept.contains(&x.layer)).collect(), ..m })
        }
        other => other,
    };
    let summary = (out.summary && out.format == Format::Table).then(|| summary::summarize(&trace));
    let default_tables = out.format == Format::Table && !out.summary && plan.show.steps.is_none();
    let attribution_grid = trace.attribution.as_ref().map(attribute::grid);
    let attribution = attribute::ranked(&trace);
    let mut views = Views {
        focus,
        maps,
        summary,
        default_tables,
        stats,
        rollout,
        generation,
        generation_maps,
        attribution,
        attribution_grid,
        generation_rows,
        ..Default::default()
    };
    views.screen_notes = explain::notes(&trace, &views, show, out);
    Ok((trace, views))
}
