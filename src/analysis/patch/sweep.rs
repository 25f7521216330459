//! What a patching sweep is and reports: what it patches, how, its metric, and one row per
//! patched run (`mod.rs` says what the effect measures).

/// What is patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    /// Each head's context (`attn.context`), at every position.
    Heads,
    /// The layer output at each position (the residual stream).
    Resid,
    /// One step of the catalogue (`--patch-step`, an in-layer name), at each position of each
    /// layer, and of each head where the step has heads (TransformerLens's
    /// `get_act_patch_*` family).
    Step(&'static str),
}

impl What {
    /// The step a patch of `self` replaces in each layer (`layers.L.output` is the layer's
    /// output, an unrecorded hook site).
    pub fn step(self) -> &'static str {
        match self {
            What::Heads => "attn.context",
            What::Resid => "output",
            What::Step(step) => step,
        }
    }

    /// Whether a `Step` sweep has a cell per head and position (its step's first axis is
    /// `head`: `[head, pos, d]` or `[head, query_pos, key_pos]`).
    pub fn per_head(self) -> bool {
        matches!(self, What::Step(step) if crate::trace::steps::raw_dims(step).first() == Some(&"head"))
    }
}

/// How the grid is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// One patched run per cell (`activation.rs`).
    Exact,
    /// One clean run, one corrupted run and one backward pass: the first-order estimate of
    /// every cell at once (`attribution.rs`).
    Attribution,
    /// Path patching: each head's output along its direct path into the receivers taken from
    /// the corrupted run, in the clean run (`path.rs`).
    Path,
}

/// The metric, with what it needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// logit[a] − logit[b] at `position` (the last one for a language model, the `[MASK]`
    /// for a masked-LM encoder).
    LogitDiff { a: u32, b: u32, position: usize },
    /// The output's distance from the clean output.
    OutputDistance,
}

/// One patched run.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub layer: usize,
    /// The head (`Heads`) or the position (`Resid`, `Step`).
    pub index: usize,
    /// A per-head `Step` sweep's head.
    pub head: Option<usize>,
    pub metric: f64,
    /// `None` when the clean and corrupted metrics are equal (the effect would be 0/0).
    pub effect: Option<f64>,
}

/// A whole sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    pub method: Method,
    pub what: What,
    pub metric: Metric,
    pub clean: f64,
    pub corrupted: f64,
    pub rows: Vec<Row>,
    /// Layer runs computed, and what full runs without reuse would have cost.
    pub layer_runs: usize,
    pub layer_runs_without_reuse: usize,
    /// Path patching's receivers, as `--patch-path` names them (`logits`, `9.6:q,…`).
    pub receivers: Option<String>,
}

/// (patched − corrupted) / (clean − corrupted), or `None` where the denominator is 0 (the
/// runs do not differ on the metric) or not finite.
pub fn effect(patched: f64, clean: f64, corrupted: f64) -> Option<f64> {
    let span = clean - corrupted;
    (span != 0.0 && span.is_finite()).then(|| (patched - corrupted) / span)
}
