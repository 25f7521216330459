//! `--generate N` and how its tokens are chosen (`--sample`, `--temperature`, `--top-p`,
//! `--sample-top-k`, `--sample-seed`, `--ignore-eos`, `--baseline`), checked among
//! themselves; that the model is a language model is checked once it is open.

use crate::cli::{self, Cli};
use crate::config::Strategy;
use crate::error::usage;
use anyhow::Result;

/// A generation asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub max_new: usize,
    pub ignore_eos: bool,
    pub strategy: Strategy,
    /// `--baseline`: generate without the interventions too.
    pub baseline: bool,
}

/// The generation the command line asks for, if any.
pub fn options(cli: &Cli) -> Result<Option<Generation>> {
    let Some(max_new) = cli.generate else { return Ok(None) };
    if max_new == 0 {
        return Err(usage("--generate", "0 tokens", "pass the number of tokens to generate, e.g. --generate 20"));
    }
    if cli.format == cli::Format::Jsonl {
        return Err(usage(
            "--generate",
            "--format jsonl streams one forward pass, and a generation is many",
            "use --format json",
        ));
    }
    if cli.ablate_mode == cli::AblateArg::Mean && cli.ablate.is_some() {
        return Err(usage(
            "--ablate-mode mean",
            "a head's mean over positions changes with every generated token, so the cached keys and values would \
             not match it",
            "use --ablate-mode zero with --generate",
        ));
    }
    let intervened = cli.ablate.is_some()
        || !cli.knockout.is_empty()
        || cli.ablate_expert.is_some()
        || !cli.steer.is_empty()
        || cli.steer_from.is_some();
    if cli.baseline && !intervened {
        return Err(usage(
            "--baseline",
            "there is no intervention to generate without",
            "add --ablate, --knockout, --ablate-expert or --steer",
        ));
    }
    let strategy = if cli.sample { sampling(cli)? } else { Strategy::Greedy };
    Ok(Some(Generation { max_new, ignore_eos: cli.ignore_eos, strategy, baseline: cli.baseline }))
}

/// `--sample`'s settings, each in its range.
fn sampling(cli: &Cli) -> Result<Strategy> {
    let temperature = cli.temperature.unwrap_or(1.0);
    if !(temperature.is_finite() && temperature > 0.0) {
        return Err(usage(
            "--temperature",
            format!("{temperature} is not a positive number"),
            "pass a temperature above 0, e.g. --temperature 0.7 (drop --sample for the most probable token)",
        ));
    }
    let top_p = cli.top_p.unwrap_or(1.0);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(usage("--top-p", format!("{top_p} is outside (0, 1]"), "pass a probability, e.g. --top-p 0.9"));
    }
    let top_k = match cli.sample_top_k {
        Some(0) => {
            return Err(usage(
                "--sample-top-k",
                "0 tokens",
                "pass at least 1, or drop --sample-top-k to keep every token",
            ))
        }
        k => k.unwrap_or(0),
    };
    Ok(Strategy::Sample { temperature, top_p, top_k, seed: cli.sample_seed.unwrap_or(0) })
}
