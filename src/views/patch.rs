//! A patching sweep laid out for the heatmaps (terminal, HTML, SVG): layers down, heads (or
//! positions) across, one effect per cell, and the ends of the colour scale. The scale runs
//! from min(0, smallest effect) to max(1, largest effect): 0 (the corrupted run) and 1 (the
//! clean run) are always on it, so two sweeps' colours mean the same where they overlap, and
//! effects beyond them (a head that overshoots, or pushes the wrong way) keep their own colour.

use crate::analysis::patch::{Method, Sweep, What};

/// The grid the heatmaps draw (its struct is shared with other grids: `grid.rs`).
pub type PatchGrid = super::grid::Grid;

/// What the patching grid shows, in the renderers' words.
pub const TEXT: super::grid::GridText<'static> = super::grid::GridText {
    title: "patching effect",
    scale: "0 = corrupted, 1 = clean",
    value: "effect",
    group: "patching",
};

/// The grid's text for a sweep computed by `method`: attribution patching's grid is titled
/// as the estimate it is.
pub fn text(method: Option<Method>) -> super::grid::GridText<'static> {
    match method {
        Some(Method::Attribution) => TEXT.with_title(ATTRIBUTION_TITLE),
        Some(Method::Path) => PATH_TEXT,
        _ => TEXT,
    }
}

/// What a path-patching grid shows: each cell's effect is the share of the corruption's
/// change in the metric that the sender's path carries (`analysis/patch/path.rs`).
pub const PATH_TEXT: super::grid::GridText<'static> = super::grid::GridText {
    title: "path patching",
    scale: "0 = clean, 1 = corrupted",
    value: "effect",
    group: "patching",
};

/// A path-patching grid's title, with its receivers as `--patch-path` names them.
pub fn path_title(receivers: &str) -> String {
    format!("path patching → {receivers}")
}

/// The title of an attribution-patching grid, in every renderer.
pub const ATTRIBUTION_TITLE: &str = "attribution patching (gradient approximation)";

/// The note for a sweep whose effects are undefined: the clean and corrupted runs give the
/// same metric, so no patch can restore anything (effect = 0/0).
pub fn note(sweep: &Sweep) -> Option<String> {
    sweep.rows.iter().any(|r| r.effect.is_none()).then(|| {
        format!(
            "--patch: the clean and corrupted runs give the same metric ({}), so every effect is 0/0 and is left \
             undefined (null in JSON, — in tables); each patched run's metric is still shown",
            sweep.clean
        )
    })
}

/// One cell of a sweep in the ranked list that ends the grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub layer: usize,
    /// The head, or the position with `--patch-what resid` or `--patch-step`.
    pub index: usize,
    /// A per-head step's head (`--patch-step`).
    pub head: Option<usize>,
    pub effect: f64,
}

/// The sweep's cells with a defined effect, largest |effect| first (ties in the sweep's
/// order), as `--attribute` ranks its terms: the heads (or positions) that matter most,
/// restoring the clean run (positive) or pushing away from it (negative).
pub fn ranked(sweep: &Sweep) -> Vec<Cell> {
    let mut cells: Vec<Cell> = sweep
        .rows
        .iter()
        .filter_map(|r| Some(Cell { layer: r.layer, index: r.index, head: r.head, effect: r.effect? }))
        .collect();
    cells.sort_by(|x, y| y.effect.abs().total_cmp(&x.effect.abs()));
    cells
}

/// The lines of a sweep's grid: one per layer (`layer 3`), or per layer and head for a
/// per-head step's sweep (`layer 3 head 1`), in the rows' order.
pub fn lines(sweep: &Sweep) -> Vec<String> {
    let mut lines: Vec<(usize, Option<usize>)> = sweep.rows.iter().map(|r| (r.layer, r.head)).collect();
    lines.dedup();
    lines
        .into_iter()
        .map(|(l, h)| match h {
            Some(h) => format!("layer {l} head {h}"),
            None => format!("layer {l}"),
        })
        .collect()
}

/// The grid of `sweep`, whose positions are labelled with the clean sentence's `tokens`.
pub fn grid(sweep: &Sweep, tokens: &[String]) -> PatchGrid {
    let rows = lines(sweep);
    let count = sweep.rows.len().checked_div(rows.len()).unwrap_or(0);
    let (across, cols): (_, Vec<String>) = match sweep.what {
        What::Heads => ("heads", (0..count).map(|h| format!("head {h}")).collect()),
        _ => ("positions", (0..count).map(|p| format!("{p} {}", tokens.get(p).map_or("", String::as_str))).collect()),
    };
    let down = if sweep.what.per_head() { "layers and heads" } else { "layers" };
    // `+ 0.0` turns −0 (a patch that changes nothing) into 0, so it is not written "-0.00";
    // an undefined effect (the runs do not differ on the metric) is NaN, drawn without colour.
    let values: Vec<f32> = sweep.rows.iter().map(|r| r.effect.map_or(f32::NAN, |e| e as f32 + 0.0)).collect();
    let finite = values.iter().copied().filter(|v| v.is_finite());
    let lo = finite.clone().fold(0f32, f32::min);
    let hi = finite.fold(1f32, f32::max);
    PatchGrid { down, across, rows, cols, values, lo, hi, signed: false }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::patch::{Metric, Row};

    #[test]
    fn the_scale_always_holds_zero_and_one() {
        let row = |layer, index, effect| Row { layer, index, head: None, metric: 0.0, effect: Some(effect) };
        let sweep = Sweep {
            method: crate::analysis::patch::Method::Exact,
            what: What::Resid,
            metric: Metric::OutputDistance,
            clean: 0.0,
            corrupted: 1.0,
            rows: vec![row(0, 0, 0.25), row(0, 1, -0.5), row(1, 0, 0.5), row(1, 1, 0.75)],
            layer_runs: 0,
            layer_runs_without_reuse: 0,
            receivers: None,
        };
        let g = grid(&sweep, &["a".into(), "b".into()]);
        assert_eq!((g.lo, g.hi), (-0.5, 1.0));
        assert_eq!(g.rows, ["layer 0", "layer 1"]);
        assert_eq!(g.cols, ["0 a", "1 b"]);
        assert_eq!(g.values, [0.25, -0.5, 0.5, 0.75]);
        let order: Vec<(usize, usize)> = ranked(&sweep).iter().map(|c| (c.layer, c.index)).collect();
        assert_eq!(order, [(1, 1), (0, 1), (1, 0), (0, 0)], "largest |effect| first");
    }
}
