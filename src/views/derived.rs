//! What the views derive from one trace, gathered in one value the renderers read.

use super::focus::Focus;
use super::maps::Maps;
use super::summary::LayerLinks;
use super::{analysis, attribute, generate, grid, patch, stacks};

/// Everything the views derived from one trace.
#[derive(Debug, Clone, Default)]
pub struct Views {
    pub focus: Option<Focus>,
    /// `--params`: the parameters of the shown layers as 2-D or 1-D tensors named by their
    /// weight-file names (attached by `run`, which holds them).
    pub params: Option<Vec<crate::trace::Step>>,
    /// Present when a view draws attention maps (heatmap, --html, --svg) or derives them.
    pub maps: Option<Maps>,
    /// The real-model summary table's numbers (tables without --steps).
    pub summary: Option<Vec<LayerLinks>>,
    /// A toy model's tables without --steps: every step is shown, and the tables end with
    /// how to show fewer (`render::summary::write_hint`), as a real model's summary does.
    pub default_tables: bool,
    /// Notes that explain what the screen shows ([`explain`](super::explain)): said on stderr once the output
    /// is written, never part of the document or the page.
    pub screen_notes: Vec<String>,
    /// `--stats`: every recorded head's statistics.
    pub stats: Option<Vec<analysis::HeadStats>>,
    /// `--rollout`: the rollout after every layer.
    pub rollout: Option<Vec<(usize, Vec<f64>)>>,
    /// `--patch`: the sweep, and the corrupted sentence's tokens (attached by `run`).
    pub patching: Option<(crate::analysis::patch::Sweep, Vec<String>)>,
    /// `--patch`: the corrupted sentence's token labels (`Trace::label`), for the tables.
    pub corrupted_labels: Vec<String>,
    /// `--patch`: the sweep as the heatmaps draw it.
    pub patch_grid: Option<patch::PatchGrid>,
    /// `--patch`: the sweep's cells ranked, largest |effect| first.
    pub patch_ranked: Vec<patch::Cell>,
    /// `--patch --metric A B`: the answers' labels as the tables spell tokens (`·Paris`),
    /// for the header (attached by `run`, which has the tokenizer).
    pub metric_labels: Option<(String, String)>,
    /// `--patch-path`: the grid's title, "path patching → RECEIVERS".
    pub patch_title: Option<String>,
    /// `--generate`: each generated token's strongest sources (per layer and overall), and
    /// each layer's map of generated tokens over every position.
    pub generation: Option<Vec<generate::TokenSources>>,
    pub generation_maps: Vec<generate::GenerationMap>,
    /// `--attribute`: the terms and sources ranked, and the heads' grid (signed).
    pub attribution: Option<attribute::Ranked>,
    pub attribution_grid: Option<grid::Grid>,
    /// `--generate` with `--html`: every head's row of the steps that chose the tokens.
    pub generation_rows: Option<generate::GenerationRows>,
    /// An encoder–decoder: the trace as `--stack` sees it (labels) and the alignment table.
    pub stacks: Option<stacks::Stacks>,
    /// The run's notes (also on stderr): JSON's `notes`, so that a document says how its
    /// numbers were defined where the arithmetic alone does not (attached by `run`).
    pub notes: Vec<String>,
}

impl Views {
    /// Attaches a patching sweep (computed after the trace), the corrupted sentence's tokens
    /// and their labels, and its heatmap grid (positions labelled by the clean `labels`).
    pub fn attach_patching(
        &mut self,
        sweep: crate::analysis::patch::Sweep,
        (corrupted, corrupted_labels): (Vec<String>, Vec<String>),
        labels: &[String],
    ) {
        self.patch_grid = Some(patch::grid(&sweep, labels));
        self.patch_ranked = patch::ranked(&sweep);
        self.patch_title = sweep.receivers.as_deref().map(patch::path_title);
        self.corrupted_labels = corrupted_labels;
        self.patching = Some((sweep, corrupted));
    }

    /// The patching grid's title and scale, as its method labels it.
    pub fn patch_text(&self) -> grid::GridText<'_> {
        let text = patch::text(self.patching.as_ref().map(|(s, _)| s.method));
        match &self.patch_title {
            Some(title) => text.with_title(title),
            None => text,
        }
    }
}
