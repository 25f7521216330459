//! The flags that write files or make a run test material (`--save-weights`, `--save-trace`,
//! `--names`, `--check`, `--check-tol`), checked before anything is computed. (Views with `--format
//! jsonl` are refused in views.rs; `--check`'s limits that depend on the model are in plan.rs.)

use crate::cli::{Cli, NamesArg};
use crate::error::{usage, UsageError};
use crate::trace::Selection;
use anyhow::Result;
use std::path::Path;

pub use super::saves::{CheckTol, Outputs, TraceKind, TraceNames, CHECK_TOL, CHECK_TOL_DECODER};

/// The format `--save-trace` writes for this path; other extensions are a usage error.
pub fn kind_for(path: &Path) -> Result<TraceKind> {
    match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("safetensors") => Ok(TraceKind::Safetensors),
        Some("npz") => Ok(TraceKind::Npz),
        _ => Err(usage(
            format!("--save-trace {}", path.display()),
            "the file name must end in .safetensors or .npz (the extension chooses the format)",
            "e.g. --save-trace trace.safetensors or --save-trace trace.npz",
        )),
    }
}

/// Checks the output and testing flags among themselves.
pub fn options(cli: &Cli) -> Result<Outputs> {
    let save_trace = cli.save_trace.as_ref().map(|p| Ok::<_, anyhow::Error>((p.clone(), kind_for(p)?))).transpose()?;
    let trace_names = match cli.names {
        Some(_) if save_trace.is_none() => {
            return Err(usage(
                "--names",
                "it names the tensors --save-trace writes",
                "add --save-trace FILE, or drop --names",
            ))
        }
        Some(NamesArg::TransformerLens) => TraceNames::TransformerLens,
        Some(NamesArg::AttnTrace) | None => TraceNames::AttnTrace,
    };
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
        t => CheckTol(t),
    };
    if cli.save_steps.is_some() && save_trace.is_none() {
        return Err(usage(
            "--save-steps",
            "it narrows what --save-trace writes",
            "add --save-trace FILE, or drop --save-steps",
        ));
    }
    let save_steps = cli.save_steps.clone();
    let outputs = Outputs { save_trace, save_steps, trace_names, save_weights: cli.save_weights.clone(), check: None };
    if !cli.check {
        return Ok(outputs);
    }
    if cli.model.is_none() {
        return Err(usage(
            "--check",
            "it recomputes a real model with an independent implementation, and a toy model has none",
            "pass --model DIR, or drop --check",
        ));
    }
    if cli.causal {
        return Err(usage("--check", "candle's BertModel has no causal mask", "drop --causal or --check"));
    }
    Ok(Outputs { check: Some(tol), ..outputs })
}

/// Flags that a batch (several sentences, each traced on its own) cannot honour: each writes
/// one file or reads one input for one run, or replaces the sentence. (`--html` and `--svg`
/// give a section per sentence.)
pub fn check_batch(s: &super::Settings) -> Result<()> {
    let matrix = matches!(&s.model, super::ModelChoice::Toy(t) if t.matrix.is_some());
    for (flag, given) in [
        ("--save-trace", s.outputs.save_trace.is_some()),
        ("--save-weights", s.outputs.save_weights.is_some()),
        ("--check", s.outputs.check.is_some()),
        ("--patch", s.analysis.patch.is_some()),
        ("--induction", s.analysis.induction.is_some()),
        ("--input", matrix),
    ] {
        if given {
            return Err(usage(
                flag,
                "it applies to one run, and several sentences make a batch (one trace each)",
                format!("trace one sentence with {flag}, or drop {flag}"),
            ));
        }
    }
    Ok(())
}

/// `--pad-to N` and `--padding left|right`: pads token ids (a real model's, or the toy
/// model's with its `<pad>` token), and only where the run has one input to pad.
pub fn padding(cli: &Cli) -> Result<Option<(usize, bool)>> {
    let Some(n) = super::nonzero("--pad-to", cli.pad_to)? else {
        if cli.padding.is_some() {
            return Err(usage("--padding", "it says where --pad-to puts the pad tokens", "add --pad-to N"));
        }
        return Ok(None);
    };
    if cli.input.is_some() {
        return Err(usage("--pad-to", "a raw --input matrix has no tokens to pad", "drop --pad-to or --input"));
    }
    // A toy pad past the vocabulary has no row in the token table that the file would store.
    let toy_weights = cli.model.is_none() && cli.save_weights.is_some();
    for (flag, given) in [
        ("--check", cli.check),
        ("--patch", cli.patch.is_some()),
        ("--induction", cli.induction.is_some()),
        ("--save-weights", toy_weights),
    ] {
        if given {
            return Err(usage(flag, "it does not take a padded input", format!("drop {flag} or --pad-to")));
        }
    }
    Ok(Some((n, cli.padding == Some(crate::cli::PaddingArg::Left))))
}

/// What `--save-trace` records for its file: every step of every layer and head, or the
/// steps `--save-steps` names (as `--steps` names them), whatever `--steps`, `--layer` and
/// `--head` print. None without `--save-trace`.
pub fn save_selection(outputs: &Outputs, layers: usize) -> Result<Option<Selection>> {
    let (Some(_), Some(list)) = (&outputs.save_trace, &outputs.save_steps) else {
        return Ok(outputs.save_trace.as_ref().map(|_| Selection::default()));
    };
    let steps = crate::trace::aliases::parse(list, layers).map_err(|e| match e.downcast::<UsageError>() {
        // The list's errors are said of the flag that gave it.
        Ok(u) => anyhow::Error::new(UsageError(u.0.replacen("--steps", "--save-steps", 1))),
        Err(e) => e,
    })?;
    Ok(Some(Selection { steps: Some(steps), layer: None, head: None }))
}
