//! `attn-trace diff A B`: its command line, parsed by its own clap struct because the main
//! command's first positional argument is the sentence (main.rs dispatches on the word).

use clap::{Parser, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// The first divergence, a table of the largest error per step, then what is missing.
    Table,
    /// The same report as one JSON object.
    Json,
}

/// Compare two traces step by step and report where they part ways.
///
/// Exit status: 0 when every step both traces hold agrees within tolerance, 1 when a step
/// diverges (a value outside tolerance or a shape mismatch) or a step `--require` names is
/// missing from A, 2 for unusable input.
#[derive(Debug, Clone, Parser)]
#[command(name = "attn-trace diff", version, max_term_width = 100)]
#[command(after_help = "Inputs, name aliases and the report are described in docs/DIFF.md.")]
pub struct DiffCli {
    /// The trace under test: attn-trace JSON/JSONL, a --save-trace file (.safetensors,
    /// .npz), or your own JSON object / safetensors / npz of tensors named by step id.
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The reference trace, in any of the same forms.
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// Absolute tolerance.
    #[arg(long, value_name = "X", default_value_t = 1e-5, allow_negative_numbers = true)]
    pub atol: f64,
    /// Relative tolerance (times |b|).
    #[arg(long, value_name = "X", default_value_t = 1e-5, allow_negative_numbers = true)]
    pub rtol: f64,
    /// In attn.scores, values at or below this are masked positions and agree with each other
    /// (-inf, masked_fill(mask, -1e9) and torch.finfo.min give the same softmax).
    #[arg(long, value_name = "X", default_value_t = -1e4, allow_negative_numbers = true)]
    pub mask_floor: f64,
    /// Steps that A must hold, or fail (exit 1): `all` (every step of B) or a comma-separated
    /// list (step ids, or names such as attn.weights for every layer). Without it, steps only
    /// one side holds are listed, not failed.
    #[arg(long, value_name = "all|STEP,…")]
    pub require: Option<String>,
    /// Compare only these steps (comma-separated ids, in-layer names such as attn.scores for
    /// every layer, or --steps aliases such as qkv).
    #[arg(long, value_name = "STEP,…")]
    pub only: Option<String>,
    /// Leave these steps out of the comparison (same names as --only).
    #[arg(long, value_name = "STEP,…")]
    pub skip: Option<String>,
    /// Report format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: DiffFormat,
}
