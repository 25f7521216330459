//! What was changed in the forward pass: ablations, knockouts, steering, replaced steps.

use serde::Serialize;

/// Changes to the forward pass (issue: interventions).
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Interventions {
    /// Ablated heads as (layer, head): their context is zero, or its mean over positions,
    /// before the output projection.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ablate: Vec<(usize, usize)>,
    /// An encoder–decoder's decoder: ablated cross-attention heads as (layer, head)
    /// (`--ablate cross.L.H`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ablate_cross: Vec<(usize, usize)>,
    /// `zero` or `mean` (with `ablate` or `ablate_cross`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ablate_mode: Option<AblateMode>,
    /// Hidden query→key edges: their score is −inf before the softmax.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub knockout: Vec<Knockout>,
    /// `--ablate-expert`: experts removed from routing, as (layer, expert): their router
    /// logit is −inf, so the softmax gives them nothing and top-k never picks them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ablate_expert: Vec<(usize, usize)>,
    /// `--induction N`: the input is N random tokens repeated twice (not the sentence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub induction: Option<usize>,
    /// `--steer`, `--steer-from`: vectors added to the residual stream after a layer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steer: Vec<Steer>,
    /// `--ablate STEP`: steps zeroed, or replaced by their mean over positions (`ablate_mode`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ablate_steps: Vec<String>,
    /// `--set STEP=FILE`: steps replaced by saved tensors.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<SetStep>,
}

/// One step replaced by a saved tensor (`--set STEP=FILE`): its id and file; the values stay
/// out of the JSON (the file holds them).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetStep {
    pub step: String,
    pub file: String,
    #[serde(skip)]
    pub shape: Vec<usize>,
    #[serde(skip)]
    pub values: std::sync::Arc<Vec<f32>>,
}

/// One steering vector (activation addition, Turner et al. 2023): `alpha × vector` is added
/// to layer `layer`'s output at every absolute position from `from` on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Steer {
    pub layer: usize,
    pub alpha: f32,
    pub from: usize,
    /// Where the vector came from: a file (`v.npy`, `t.json#layers.3.add_norm2.sum[5]`) or
    /// `"Love" - "Hate" after layer L` for `--steer-from`.
    pub source: String,
    /// The vector itself, d_model values (before `alpha`).
    pub vector: Vec<f32>,
}

/// What an ablated head's context becomes (`--ablate-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AblateMode {
    /// Zero, as transformers' `head_mask`.
    #[default]
    Zero,
    /// Its mean over positions.
    Mean,
}

impl AblateMode {
    /// The name the JSON document and the table header use.
    pub fn name(self) -> &'static str {
        match self {
            AblateMode::Zero => "zero",
            AblateMode::Mean => "mean",
        }
    }
}

/// One knocked-out edge; `head` None is every head of the layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Knockout {
    pub layer: usize,
    pub head: Option<usize>,
    pub query: usize,
    pub key: usize,
}

impl Interventions {
    pub fn is_empty(&self) -> bool {
        self.ablate.is_empty()
            && self.ablate_cross.is_empty()
            && self.knockout.is_empty()
            && self.induction.is_none()
            && self.ablate_expert.is_empty()
            && self.steer.is_empty()
            && self.set.is_empty()
            && self.ablate_steps.is_empty()
    }
}
