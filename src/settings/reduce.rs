//! Views read from the attention weights as the model computes them, a tile of queries at a
//! time (`trace::rows`), rather than from recorded `attn.weights`: a long input's weights
//! then never exist whole (`config/tiles.rs`).

use super::{Format, Settings};
use crate::config::ModelConfig;
use crate::trace::Selection;
use std::collections::BTreeSet;

/// The summary table shows only what the weights say: every other step of a real model would
/// cost memory for nothing (gigabytes at 4,096 tokens). A trace file or another view that
/// reads the steps keeps them.
pub fn summary_alone(settings: &Settings, cfg: &ModelConfig, show: &Selection, focus: bool) -> bool {
    let (a, v) = (&settings.analysis, &settings.output.views);
    settings.output.summary
        && settings.output.format == Format::Table
        && show.steps.is_none()
        && !focus
        && !(a.rollout || v.derived() || v.html.is_some() || v.svg.is_some())
        && settings.outputs.save_trace.is_none()
        // What each generated token looked at reads the prompt's weights after the pass.
        && settings.generate.is_none()
        // An encoder–decoder's summary reads the attention `--stack` names (`views::stacks`).
        && cfg.parts.seq2seq.is_none()
}

/// What a run that shows the summary table alone records: nothing but, for a mixture of
/// experts, its routing (which experts each token went to).
pub fn summary_steps(cfg: &ModelConfig) -> BTreeSet<String> {
    let router = ["ffn.router.chosen", "ffn.router.weights"];
    router.iter().filter(|_| cfg.parts.experts.is_some()).map(|s| s.to_string()).collect()
}

/// Whether `--stats` is gathered tile by tile: not for an encoder–decoder (its statistics
/// read the attention `--stack` names) or a generation (its decode steps' weights are read
/// after the pass).
pub fn stats(settings: &Settings, cfg: &ModelConfig) -> bool {
    settings.analysis.stats && cfg.parts.seq2seq.is_none() && settings.generate.is_none()
}
