//! The flags that make a run test material (`--save-trace`, `--check`, `--check-tol`),
//! checked before anything is computed. (Views with `--format jsonl` are refused in views.rs.)

use crate::cli::Cli;
use crate::config::ModelConfig;
use crate::error::usage;
use anyhow::Result;
use std::path::PathBuf;

/// `--check`'s tolerance when none is given: transformers and attn-trace agree to ~1e-6 on
/// MiniLM, and candle's one-pass LayerNorm adds about as much; 1e-4 leaves room for longer
/// inputs while catching any real difference (a wrong weight moves outputs by ≫ 1e-3).
pub const CHECK_TOL: f64 = 1e-4;

#[derive(Debug, Clone, Default)]
pub struct Testing {
    /// `--save-trace FILE` (its extension already checked).
    pub save_trace: Option<PathBuf>,
    /// `--check`, with its tolerance.
    pub check: Option<f64>,
    /// `--quiet`: no note when the check passes.
    pub quiet: bool,
}

/// Checks the testing flags; `real` is the model's config when `--model` was given.
pub fn options(cli: &Cli, real: Option<&ModelConfig>) -> Result<Testing> {
    if let Some(path) = &cli.save_trace {
        crate::export::kind_for(path)?;
    }
    let tol = match cli.check_tol {
        Some(t) if !t.is_finite() || t < 0.0 => {
            return Err(usage(
                "--check-tol",
                format!("{t} is not a finite, non-negative number"),
                "pass e.g. --check-tol 1e-4",
            ))
        }
        Some(_) if !cli.check => {
            return Err(usage("--check-tol", "it applies to --check", "add --check, or drop --check-tol"))
        }
        t => t.unwrap_or(CHECK_TOL),
    };
    if !cli.check {
        return Ok(Testing { save_trace: cli.save_trace.clone(), check: None, quiet: cli.quiet });
    }
    let Some(cfg) = real else {
        return Err(usage(
            "--check",
            "it recomputes a real model with candle-transformers' BertModel",
            "pass --model DIR, or drop --check",
        ));
    };
    if cfg.causal {
        return Err(usage("--check", "candle's BertModel has no causal mask", "drop --causal or --check"));
    }
    if (cfg.scale - 1.0 / (cfg.d_k as f64).sqrt()).abs() > 1e-12 {
        return Err(usage(
            "--check",
            "candle's BertModel always scales scores by 1/√d_head",
            "drop --scale or --check",
        ));
    }
    Ok(Testing { save_trace: cli.save_trace.clone(), check: Some(tol), quiet: cli.quiet })
}
