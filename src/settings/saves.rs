//! What a run writes besides stdout and how `--check` compares, as [`super::Settings`] holds
//! it (`Settings::outputs`); outputs.rs checks the flags into it.

use std::path::PathBuf;

/// `--check`'s tolerance when none is given: transformers and attn-trace agree to ~1e-6 on
/// MiniLM, and candle's one-pass LayerNorm adds about as much; 1e-4 leaves room for longer
/// inputs while catching any real difference (a wrong weight moves outputs by ≫ 1e-3).
pub const CHECK_TOL: f64 = 1e-4;

/// `--check-tol`'s default for a language model's logits and final hidden states: their sums
/// run over every layer and the vocabulary's rows (measured against candle-transformers:
/// SmolLM2-135M 3.2e-5 at 6 tokens, 4.4e-5 at 450; the tiny fixtures 1e-6 to 8e-6).
pub const CHECK_TOL_DECODER: f64 = 1e-3;

/// `--check`'s tolerance: the one given, or the default for what is compared.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CheckTol(pub Option<f64>);

impl CheckTol {
    /// The tolerance for an encoder's output (`decoder` false) or a language model's logits.
    pub fn of(self, decoder: bool) -> f64 {
        self.0.unwrap_or(if decoder { CHECK_TOL_DECODER } else { CHECK_TOL })
    }
}

/// Which file format `--save-trace` writes, chosen by the path's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceKind {
    Safetensors,
    Npz,
}

/// Which names `--save-trace` gives the tensors (`--names`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TraceNames {
    /// Step ids, attn-trace's layouts.
    #[default]
    AttnTrace,
    /// TransformerLens's hook names and cache layouts (export/tl.rs).
    TransformerLens,
}

#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// `--save-trace FILE`, with the format its extension names.
    pub save_trace: Option<(PathBuf, TraceKind)>,
    /// `--save-steps`: the steps `--save-trace` writes, as typed (None: every step).
    pub save_steps: Option<String>,
    /// `--names`: the names of `--save-trace`'s tensors.
    pub trace_names: TraceNames,
    /// `--save-weights FILE` (safetensors).
    pub save_weights: Option<PathBuf>,
    /// `--check`, with its tolerance.
    pub check: Option<CheckTol>,
}
