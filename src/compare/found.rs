//! What a comparison found, as plain data for the reports: every common step's error in trace
//! order, the residual stream's error layer by layer, every head's divergence, the
//! predictions side by side, and the steps one side has alone. The rankings are computed here
//! (the reports only write them out).

use super::measure::{Error, HeadJs};
use crate::trace::{Dim, Prediction};
use crate::views::grid::{Grid, GridText};

/// One step both sides have.
#[derive(Debug, Clone)]
pub struct StepDiff {
    pub id: String,
    pub layer: Option<usize>,
    pub dims: Vec<Dim>,
    pub shape: Vec<usize>,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Numbers, compared.
    Values(Error),
    /// Ids or a mask: equal or not.
    Equal(bool),
    /// The shapes differ (B's shape; `shape` is A's): nothing was compared.
    Shapes(Vec<usize>),
}

impl StepDiff {
    /// ‖a − b‖ / ‖b‖; 0 or infinity for ids and masks; infinity for a shape mismatch.
    pub fn relative(&self) -> f64 {
        match &self.outcome {
            Outcome::Values(e) => e.relative,
            Outcome::Equal(true) => 0.0,
            Outcome::Equal(false) | Outcome::Shapes(_) => f64::INFINITY,
        }
    }

    /// Past the threshold (NaN is past every threshold).
    pub fn diverges(&self, threshold: f64) -> bool {
        let r = self.relative();
        r.is_nan() || r > threshold
    }
}

/// The residual stream after one part: the embeddings (`layer` None) or a layer's output.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerDiff {
    pub layer: Option<usize>,
    pub error: Error,
}

/// One position's next-token predictions on both sides and how far their distributions are.
#[derive(Debug, Clone, PartialEq)]
pub struct Position {
    /// Each side's most probable tokens (`--top-k`), most probable first.
    pub a: Vec<Prediction>,
    pub b: Vec<Prediction>,
    /// KL(B ‖ A) in nats, when both sides' logits were compared.
    pub kl: Option<f64>,
}

impl Position {
    /// Whether the most probable next token is the same on both sides.
    pub fn agree(&self) -> bool {
        self.a.first().map(|p| p.id) == self.b.first().map(|p| p.id)
    }
}

/// Each side as the report names it.
#[derive(Debug, Clone, PartialEq)]
pub struct SideInfo {
    /// The `--model` value as given.
    pub given: String,
    /// The family (`llama`, `bert`, `toy`).
    pub family: String,
    /// How its parameters are stored (`gguf q4_1`, `bf16`, `f32`), when the source says.
    pub stored: Option<String>,
}

/// Everything a comparison found.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub sides: [SideInfo; 2],
    /// The prompt as given.
    pub sentence: Option<String>,
    /// The tokens both sides ran on (A's labels) and their ids.
    pub labels: Vec<String>,
    pub ids: Option<Vec<u32>>,
    /// `--ids-from`: which side's tokenizer made the ids, when the two split the prompt
    /// differently ("a" or "b").
    pub ids_from: Option<&'static str>,
    pub threshold: f64,
    /// Every step both sides have, in trace order.
    pub steps: Vec<StepDiff>,
    /// The embeddings, then every layer.
    pub layers: Vec<LayerDiff>,
    /// Every head, layer by layer.
    pub heads: Vec<HeadJs>,
    /// Per position, with a language-model head on both sides.
    pub predictions: Option<Vec<Position>>,
    /// Steps only A has, only B has (trace order).
    pub only: [Vec<String>; 2],
    pub notes: Vec<String>,
}

impl Comparison {
    /// Whether every common step is within the threshold.
    pub fn ok(&self) -> bool {
        !self.steps.iter().any(|s| s.diverges(self.threshold))
    }

    /// The first step in trace order past the threshold.
    pub fn first(&self) -> Option<&StepDiff> {
        self.steps.iter().find(|s| s.diverges(self.threshold))
    }

    /// The steps from the largest relative error down (NaN first, then infinity; equal
    /// errors in trace order).
    pub fn ranked_steps(&self) -> Vec<&StepDiff> {
        let mut v: Vec<&StepDiff> = self.steps.iter().collect();
        v.sort_by(|x, y| descending(x.relative(), y.relative()));
        v
    }

    /// The heads from the largest mean divergence down (then the largest maximum; equal ones
    /// in layer and head order).
    pub fn ranked_heads(&self) -> Vec<&HeadJs> {
        let mut v: Vec<&HeadJs> = self.heads.iter().collect();
        v.sort_by(|x, y| descending(x.mean, y.mean).then(descending(x.max, y.max)));
        v
    }

    /// Positions whose most probable next token differs.
    pub fn disagreements(&self) -> usize {
        self.predictions.iter().flatten().filter(|p| !p.agree()).count()
    }

    /// The mean and the largest KL over the positions, with the largest's position.
    pub fn kl_summary(&self) -> Option<(f64, f64, usize)> {
        let kls: Vec<f64> = self.predictions.as_ref()?.iter().filter_map(|p| p.kl).collect();
        if kls.is_empty() {
            return None;
        }
        let (at, max) =
            kls.iter().enumerate().fold((0, f64::NEG_INFINITY), |m, (i, &k)| if k > m.1 { (i, k) } else { m });
        Some((kls.iter().sum::<f64>() / kls.len() as f64, max, at))
    }

    /// The heads as the heatmaps draw them: layers down, heads across, each head's mean (or,
    /// with `max`, largest) divergence, coloured from 0 to the largest in the grid.
    pub fn head_grid(&self, max: bool) -> Option<Grid> {
        let layers = self.heads.iter().map(|h| h.layer + 1).max()?;
        let heads = self.heads.iter().map(|h| h.head + 1).max()?;
        let mut values = vec![0f32; layers * heads];
        for h in &self.heads {
            values[h.layer * heads + h.head] = if max { h.max } else { h.mean } as f32;
        }
        let hi = values.iter().copied().filter(|v| v.is_finite()).fold(0f32, f32::max);
        Some(Grid {
            down: "layers",
            across: "heads",
            rows: (0..layers).map(|l| format!("layer {l}")).collect(),
            cols: (0..heads).map(|h| format!("head {h}")).collect(),
            values,
            lo: 0.0,
            hi: if hi > 0.0 { hi } else { 1.0 },
            signed: false,
        })
    }
}

/// What the two head grids show, in the renderers' words.
pub const MEAN_TEXT: GridText<'static> = GridText {
    title: "attention JS divergence, mean over queries (bits)",
    scale: "0 = the same attention",
    value: "js-mean",
    group: "divergence",
};

pub const MAX_TEXT: GridText<'static> = GridText {
    title: "attention JS divergence, largest over queries (bits)",
    scale: "0 = the same attention",
    value: "js-max",
    group: "divergence",
};

/// Larger first, NaN before everything.
fn descending(x: f64, y: f64) -> std::cmp::Ordering {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => y.total_cmp(&x),
    }
}
