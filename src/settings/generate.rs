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
    if cli.pad_to.is_some() {
        // The decode steps continue the prompt's last position; behind a pad they would not.
        return Err(usage(
            "--generate with --pad-to",
            "a generation continues one prompt from its last token, and pads would stand between them",
            "drop --pad-to",
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

/// How many of the `max_new` tokens asked for a generation can write after a prompt of
/// `prompt` tokens, on a model whose last position is `max_len − 1`: it stops when the next
/// decode step would stand past it (docs/OPTIONS.md), after `max_len + 1 − prompt` tokens
/// (the last one chosen is never run). More tokens than the whole window holds are refused:
/// no prompt leaves room for them, so the number is a slip (`--generate 1000000000000`), and
/// the memory estimate must not size a generation that cannot happen.
pub fn new_tokens(asked: &Generation, prompt: usize, max_len: usize) -> Result<usize> {
    let room = (max_len + 1).saturating_sub(prompt).max(1);
    if asked.max_new > max_len {
        return Err(usage(
            format!("--generate {}", asked.max_new),
            format!("more tokens than the model's whole context window holds ({max_len} positions)"),
            format!(
                "pass --generate {room} or fewer: the prompt takes {prompt} position{}, and a generation stops at the \
                 window's end",
                if prompt == 1 { "" } else { "s" }
            ),
        ));
    }
    Ok(asked.max_new.min(room))
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
