//! `attn-trace compare`: its command line. The main command's flags are its own (flattened
//! from [`Cli`]), so a model, token or toy-model flag means in a comparison exactly what it
//! means in a trace, and applies to both sides; `--model` is given twice, once per side.
//! Flags that shape one trace's output or change its forward pass (views, interventions,
//! trace files) are hidden here and refused when given. Parsed by command.rs on the word
//! `compare`, as `diff` is.

use crate::cli::Cli;
use crate::error::usage;
use anyhow::Result;
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SideArg {
    A,
    B,
}

/// Trace one prompt through two models in lockstep and report where they part: every step
/// ranked by relative error, the residual stream's divergence layer by layer, the first step
/// past --threshold, every head ranked by the Jensen–Shannon divergence of its attention, and
/// the next-token predictions side by side.
///
/// Exit status: 0 when every step both models have is within --threshold, 1 when one is past
/// it, 2 for unusable input (different architectures or vocabularies, a prompt the tokenizers
/// split differently without --ids-from).
#[derive(Debug, Clone, Parser)]
#[command(name = "attn-trace compare", version, max_term_width = 100)]
#[command(
    after_help = "MODEL is a Hugging Face folder or ORG/NAME, a GGUF file, ollama:NAME, a toy weights file (.safetensors, .json), or `toy` for the toy model the flags describe; B is the reference. The report is described in docs/COMPARE.md."
)]
pub struct CompareCli {
    #[command(flatten)]
    pub run: Cli,
    /// A step diverges when ‖a − b‖ / ‖b‖ over its elements is above X (exit 1).
    #[arg(long, value_name = "X", default_value_t = 1e-4, allow_negative_numbers = true, help_heading = "Comparison")]
    pub threshold: f64,
    /// Give both models the token ids of side A's (or B's) tokenizer, when the two split the
    /// prompt differently.
    #[arg(long, value_enum, value_name = "SIDE", help_heading = "Comparison")]
    pub ids_from: Option<SideArg>,
    /// Rows of each ranked table in the text report (--format json lists every row).
    #[arg(long, value_name = "N", default_value_t = 10, help_heading = "Comparison")]
    pub top: usize,
}

/// The main command's flags that do not apply to a comparison: hidden from its help and
/// refused when given (a value's default does not count).
pub const REFUSED: &[&str] = &[
    "pair",
    "more",
    "batch",
    "pad_to",
    "padding",
    "input",
    "weights",
    "save_weights",
    "steps",
    "layer",
    "head",
    "focus",
    "explain",
    "params",
    "merge_pieces",
    "average_heads",
    "completions",
    "man",
    "save_trace",
    "names",
    "check",
    "check_tol",
    "ablate",
    "ablate_mode",
    "ablate_expert",
    "knockout",
    "steer",
    "steer_from",
    "at_layer",
    "alpha",
    "lens",
    "stats",
    "induction",
    "rollout",
    "patch",
    "patch_what",
    "patch_step",
    "metric",
    "attribute",
    "at",
];

/// The command's definition: [`CompareCli`] with `--model` given once per side, and the
/// flags of [`REFUSED`] hidden. The Python API's options come from it too.
pub fn command() -> clap::Command {
    let mut cmd = CompareCli::command().mut_arg("model", |a| {
        a.action(clap::ArgAction::Append)
            .value_name("MODEL")
            .help("A model, once for each side: A (under test) first, then B (the reference)")
            .help_heading("Comparison")
    });
    let helps = [
        ("format", "Report format: table (the report), json (every row), heatmap (every head's divergence as a grid)"),
        ("html", "Also write the comparison as one self-contained HTML page: the report, both head grids, every step"),
        ("svg", "Also write both head grids (the mean and the largest divergence over the queries) as SVG"),
        ("top_k", "With language models: each side's most probable next tokens per position (the JSON report)"),
    ];
    for (id, help) in helps {
        cmd = cmd.mut_arg(id, |a| a.help(help));
    }
    for id in REFUSED {
        cmd = cmd.mut_arg(*id, |a| a.hide(true));
    }
    cmd.term_width(crate::cli::help_width())
}

/// A parsed command line: the flags, the two `--model` values as given, and the refused
/// flags that were given.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub cli: CompareCli,
    pub models: Vec<String>,
    pub refused: Vec<String>,
}

/// Parses `args` (`args[0]` is the program's name).
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed, clap::Error> {
    let mut m = command().try_get_matches_from(args)?;
    let models: Vec<String> = m.get_many::<String>("model").into_iter().flatten().cloned().collect();
    let refused = given(&m, REFUSED);
    let cli = CompareCli::from_arg_matches_mut(&mut m)?;
    Ok(Parsed { cli, models, refused })
}

/// The flags of `ids` given on the command line, as `--flag`.
fn given(m: &ArgMatches, ids: &[&str]) -> Vec<String> {
    ids.iter()
        .filter(|id| m.value_source(id) == Some(ValueSource::CommandLine))
        .map(|id| match *id {
            "pair" | "more" => "a second sentence".to_string(),
            id => format!("--{}", id.replace('_', "-")),
        })
        .collect()
}

/// What one `--model` value names.
#[derive(Debug, Clone, PartialEq)]
pub enum Spec {
    /// The toy model the flags describe, drawn from its seed (`toy`).
    Toy,
    /// A toy model's weights file (`.safetensors`, `.json`).
    Weights(PathBuf),
    /// A real model (`--model` as the main command reads it).
    Model(String),
}

impl Spec {
    pub fn of(value: &str) -> Spec {
        let lower = value.to_ascii_lowercase();
        if value == "toy" {
            Spec::Toy
        } else if lower.ends_with(".safetensors") || lower.ends_with(".json") {
            Spec::Weights(PathBuf::from(value))
        } else {
            Spec::Model(value.to_string())
        }
    }
}

impl Parsed {
    /// Checks the comparison's own flags, and refuses the main command's that do not apply.
    pub fn check(&self) -> Result<()> {
        if let Some(flag) = self.refused.first() {
            return Err(usage(
                flag,
                "it does not apply to compare, which traces one prompt through two models",
                "drop it; attn-trace compare --help lists the flags that apply",
            ));
        }
        if self.models.len() != 2 {
            let given = match self.models.len() {
                0 => "none was given".to_string(),
                1 => "one was given".to_string(),
                n => format!("{n} were given"),
            };
            return Err(usage(
                "compare",
                format!("it takes two models, --model A (under test) and --model B (the reference); {given}"),
                "pass --model twice",
            ));
        }
        let t = self.cli.threshold;
        if !t.is_finite() || t < 0.0 {
            return Err(usage(
                "--threshold",
                format!("{t} is not a finite, non-negative number"),
                "pass e.g. --threshold 1e-4",
            ));
        }
        if self.cli.run.format == crate::cli::Format::Jsonl {
            return Err(usage("--format jsonl", "a comparison is one report", "use --format table, json or heatmap"));
        }
        Ok(())
    }

    /// The command line of each side: the flags as given, with that side's model, as a
    /// stream of steps (each side's steps are compared and dropped part by part), and without
    /// the files the comparison writes itself.
    pub fn sides(&self) -> [Cli; 2] {
        let side = |value: &str| {
            let mut cli = self.cli.run.clone();
            (cli.model, cli.weights) = match Spec::of(value) {
                Spec::Toy => (None, None),
                Spec::Weights(path) => (None, Some(path)),
                Spec::Model(spec) => (Some(spec), None),
            };
            cli.format = crate::cli::Format::Jsonl;
            (cli.html, cli.svg) = (None, None);
            cli
        };
        [side(&self.models[0]), side(&self.models[1])]
    }
}
