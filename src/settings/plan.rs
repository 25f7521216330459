//! The plan: the settings checked against the model the sources stage opened (its sizes and
//! tokens), still before any tensor is computed. It decides which steps the model records
//! (`record`) and which the output shows (`show`): views read steps that `--steps` may not
//! show (the focus walkthrough reads q, k, v…), so the two can differ.

use super::views::resolve;
use super::Settings;
use crate::cli::Format;
use crate::config::ModelConfig;
use crate::error::usage;
use crate::trace::steps;
use crate::trace::Selection;
use anyhow::Result;

/// What to record and show, and where the focus is. Plain data.
#[derive(Debug, Clone)]
pub struct Plan {
    /// What the model copies into the trace.
    pub record: Selection,
    /// What the output shows (a subset of `record`).
    pub show: Selection,
    /// `--focus`: the position of the token whose attention is walked through.
    pub focus: Option<usize>,
}

impl Plan {
    /// Checks `--layer`, `--head`, `--steps`, `--focus` and `--check` against the model.
    pub fn new(settings: &Settings, cfg: &ModelConfig, tokens: &[String]) -> Result<Plan> {
        let show = selection(settings, cfg.layers, cfg.heads)?;
        let focus = settings.output.views.focus.as_deref().map(|f| resolve(f, tokens)).transpose()?;
        if settings.outputs.check.is_some() && (cfg.scale - 1.0 / (cfg.d_k as f64).sqrt()).abs() > 1e-12 {
            return Err(usage(
                "--check",
                "candle's BertModel always scales scores by 1/√d_head",
                "drop --scale or --check",
            ));
        }
        let record = widen(settings, &show, focus.is_some());
        drawing_fits(settings, cfg, tokens.len())?;
        Ok(Plan { record, show, focus })
    }
}

/// `--steps`, `--layer` and `--head`, checked against the model's sizes.
fn selection(settings: &Settings, layers: usize, heads: usize) -> Result<Selection> {
    let s = &settings.select;
    if let Some(l) = s.layer {
        if l >= layers {
            return Err(usage(
                "--layer",
                format!("layer {l} does not exist; the model has {layers}"),
                format!("pass --layer 0 to {}", layers - 1),
            ));
        }
    }
    if let Some(h) = s.head {
        if h >= heads {
            return Err(usage(
                "--head",
                format!("head {h} does not exist; the model has {heads}"),
                format!("pass --head 0 to {}", heads - 1),
            ));
        }
    }
    Ok(Selection {
        steps: s.steps.as_deref().map(|list| steps::parse(list, layers)).transpose()?,
        layer: s.layer,
        head: s.head,
    })
}

/// The shown selection plus the steps the views read.
fn widen(settings: &Settings, shown: &Selection, focus: bool) -> Selection {
    let mut record = shown.clone();
    let v = &settings.output.views;
    let format = settings.output.format;
    // The heatmap shows nothing but the weights (and the focus): copying out every other
    // step of a real model would only cost time and memory.
    if format == Format::Heatmap && v.html.is_none() && record.steps.is_none() {
        record.steps = Some(std::iter::once("attn.weights".to_string()).collect());
    }
    if let Some(steps) = record.steps.as_mut() {
        if focus {
            steps.extend(crate::trace::steps::focus_steps(v.layer));
        }
        // The drawn maps need the weights whatever --steps says; derived tables and JSON
        // views only derive the weights that are shown.
        if format == Format::Heatmap || v.html.is_some() || v.svg.is_some() {
            steps.insert("attn.weights".to_string());
        }
    }
    record
}

/// Bytes an SVG and an HTML page take per attention weight drawn (measured: 114 and 60 at
/// 120 tokens), times 3 for the string's growth and the copy that is written.
const SVG_BYTES_PER_CELL: f64 = 120.0 * 3.0;
const HTML_BYTES_PER_CELL: f64 = 80.0 * 3.0;

/// `--svg` and `--html` build their whole document in memory: refuse one that would not fit
/// (an SVG of 3,000 tokens is gigabytes), before anything is computed.
fn drawing_fits(settings: &Settings, cfg: &ModelConfig, n: usize) -> Result<()> {
    let v = &settings.output.views;
    let layers = if settings.select.layer.is_some() { 1 } else { cfg.layers };
    let heads = if settings.select.head.is_some() || v.average_heads { 1 } else { cfg.heads };
    let cells = (layers as f64) * (heads as f64) * (n as f64) * (n as f64);
    let per_cell = if v.svg.is_some() { SVG_BYTES_PER_CELL } else { 0.0 }
        + if v.html.is_some() { HTML_BYTES_PER_CELL } else { 0.0 };
    if per_cell == 0.0 {
        return Ok(());
    }
    let need = cells * per_cell;
    let limit = settings.memory_available.map_or(settings.max_memory, |free| free.min(settings.max_memory));
    if need > limit as f64 {
        return Err(usage(
            "--svg/--html",
            format!(
                "{n} tokens draw {cells:.0} weights, about {} in memory, above the limit of {} (--max-memory or the memory available)",
                super::limits::human(need as u128),
                super::limits::human(limit)
            ),
            "draw one layer and head (--layer L --head H), or trace fewer tokens",
        ));
    }
    Ok(())
}
