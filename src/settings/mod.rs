//! Checked settings: what the command line asks for, validated, as plain data.
//!
//! [`Settings::from_cli`] is a pure function of the typed flags ([`Cli`]) and the
//! environment ([`Env`]): it reads no file, tokenizes nothing, allocates no tensor and prints
//! nothing, so every flag-only mistake is refused before anything is opened. What can only be
//! checked against the model (a layer number, a focus word, a step id's layer) is checked by
//! [`plan::Plan::new`] once the sources stage knows the model's sizes and tokens (pure too).

pub mod analysis;
mod answer;
pub mod attribute;
pub mod chat;
mod format;
pub mod generate;
pub mod limits;
mod model;
pub mod outputs;
pub mod plan;
pub mod recipe;
mod reduce;
pub mod shape;
pub mod stacks;
pub mod views;

use crate::cli::{self, Cli, Env};
use crate::error::usage;
use anyhow::Result;
use std::path::PathBuf;

pub use analysis::Analysis;
pub use chat::Chat;
pub use format::Format;
pub use recipe::{Given, Recipe, Weights};
pub use shape::Shape;

/// Where the sentence comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Text {
    /// No sentence: a raw `--input` matrix, or an error later.
    None,
    /// The first positional argument.
    Arg(String),
    /// `-`: standard input.
    Stdin,
    /// `--file FILE`.
    File(PathBuf),
    /// `--batch FILE`: one sentence per line, each traced on its own.
    Batch(PathBuf),
}

/// The toy tokenizer's flags (the vocabulary file is only named here; sources read it).
#[derive(Debug, Clone, PartialEq)]
pub struct ToyTokenizer {
    pub lowercase: bool,
    /// Characters deleted before splitting (seed 000 deletes ",").
    pub remove: String,
    pub remove_punctuation: bool,
    pub order: VocabOrder,
    /// `--vocab FILE`: a fixed vocabulary, token → id.
    pub vocab: Option<PathBuf>,
    pub unk: Option<String>,
    pub bos: Option<String>,
    pub eos: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VocabOrder {
    /// Ids in order of first appearance (seed 000).
    FirstSeen,
    /// Ids from the sorted word list, Python's `sorted` (seeds 003, 004): upper case first.
    Sorted,
}

/// The toy model's own inputs: where its parameters and input rows come from.
#[derive(Debug, Clone)]
pub struct Toy {
    pub tokenizer: ToyTokenizer,
    /// `--input FILE`: a raw `[pos, d_model]` matrix instead of embeddings.
    pub matrix: Option<PathBuf>,
    /// `--weights FILE` (or the Python API's `weights=` dict): parameters instead of seeded draws.
    pub weights: Option<Weights>,
    /// How seeded parameters are drawn (ignored with `--weights`).
    pub recipe: Recipe,
}

/// Which model runs.
#[derive(Debug, Clone)]
pub enum ModelChoice {
    /// The toy encoder, built from the flags.
    Toy(Box<Toy>),
    /// `--model DIR|ORG/NAME`: a pretrained checkpoint.
    Pretrained {
        spec: String,
        truncate: bool,
        /// Add the tokenizer's special tokens (BOS, [CLS], [SEP]); `--no-special-tokens` drops them.
        special: bool,
        /// `--arithmetic`: ggml applies to GGUF files (`sources` refuses it for others).
        arithmetic: crate::config::Arithmetic,
    },
}

/// `--steps`, `--layer`, `--head` as typed (the lists parsed, in increasing order);
/// [`plan::Plan`] checks them against the model.
#[derive(Debug, Clone, Default)]
pub struct Select {
    pub steps: Option<String>,
    pub layer: Option<Vec<usize>>,
    pub head: Option<Vec<usize>>,
}

/// `--layer` and `--head`: `3`, `0,3`, `1-4` or a mix (`0,2-3`), as a sorted list without
/// repeats.
pub(crate) fn index_list(flag: &str, given: &str) -> Result<Vec<usize>> {
    let bad = |why: String| {
        usage(
            format!("{flag} {}", crate::error::quote(given)),
            why,
            format!("pass a number, a list or a range, e.g. {flag} 0,3 or {flag} 1-4"),
        )
    };
    let number = |s: &str| {
        s.trim().parse::<usize>().map_err(|_| bad(format!("{} is not a number", crate::error::quote(s.trim()))))
    };
    let mut out = Vec::new();
    for item in given.split(',') {
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(bad(format!("the range {a}-{b} runs backwards")));
                }
                if b - a > 1 << 16 {
                    return Err(bad(format!("the range {a}-{b} is too long")));
                }
                out.extend(a..=b);
            }
            None => out.push(number(item)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// How the trace is shown.
#[derive(Debug, Clone)]
pub struct Output {
    pub format: Format,
    pub precision: usize,
    pub width: usize,
    /// Tables as a summary (a real model without --steps): see `render::summary`.
    pub summary: bool,
    /// Whether views that can colour should (`--color`, NO_COLOR, a terminal).
    pub color: bool,
    /// The views' flags (`--focus`, `--html`, …), checked.
    pub views: views::ViewOptions,
    /// A language model's next-token predictions per position (`--top-k`; 0: none).
    pub top_k: usize,
    /// `--stats` and `--rollout`: derived views to show; `--params`: the parameters as tables.
    pub stats: bool,
    pub rollout: bool,
    pub params: bool,
}

/// Everything one run needs to know, checked. Plain data: `Clone`, no open files.
#[derive(Debug, Clone)]
pub struct Settings {
    pub text: Text,
    /// A second sentence: a BERT model's sentence pair, or the second sentence of a batch;
    /// `--target`: an encoder–decoder's decoder text (teacher forcing).
    pub pair: Option<String>,
    pub target: Option<String>,
    /// Third and later sentences: a batch (`sources::batch` decides).
    pub more: Vec<String>,
    pub model: ModelChoice,
    pub shape: Shape,
    pub select: Select,
    pub output: Output,
    /// Files written besides stdout (`--save-weights`, `--save-trace`) and `--check`.
    pub outputs: outputs::Outputs,
    /// `--max-memory` in bytes, and the machine's available memory if known (a second cap).
    pub max_memory: u128,
    pub memory_available: Option<u128>,
    /// `--max-output`: the most bytes the printed output may take (None: no cap).
    pub max_output: Option<u128>,
    /// `--query-tile`: queries per tile of an attention that runs in tiles (`config::tiles`).
    pub query_tile: Option<usize>,
    /// Bytes a batch holds for earlier sentences (output, page parts), counted against the caps.
    pub held: u128,
    /// `--quiet`: no notes on stderr.
    pub quiet: bool,
    /// Interventions and analyses (`--ablate`, `--knockout`, `--lens`, `--stats`, `--rollout`).
    pub analysis: Analysis,
    /// `--pad-to N` and `--padding`: (N, pads on the left).
    pub padding: Option<(usize, bool)>,
    /// `--generate N` and how its tokens are chosen.
    pub generate: Option<generate::Generation>,
    /// `--chat`: the sentence as the user's turn of the model's chat template.
    pub chat: Option<Chat>,
}

/// Resolves `--color`: `always` and `never` are what they say; `auto` colours only a
/// terminal, and never when NO_COLOR is set to anything non-empty (no-color.org).
pub fn use_color(arg: cli::ColorArg, env: &Env) -> bool {
    match arg {
        cli::ColorArg::Always => true,
        cli::ColorArg::Never => false,
        cli::ColorArg::Auto => !env.no_color && env.stdout_is_terminal,
    }
}

/// Rejects a zero for a flag that names a size.
pub(crate) fn nonzero(flag: &str, v: Option<usize>) -> Result<Option<usize>> {
    match v {
        Some(0) => Err(usage(flag, "must be at least 1", format!("pass a positive number, e.g. {flag} 2"))),
        _ => Ok(v),
    }
}

impl Settings {
    /// Checks the command line. Pure: reads no file and prints nothing.
    pub fn from_cli(cli: Cli, env: &Env) -> Result<Settings> {
        check_output_flags(&cli)?;
        let model = match &cli.model {
            Some(spec) => model::pretrained(&cli, spec)?,
            None => model::toy(&cli)?,
        };
        let shape = shape::shape(&cli)?;
        let max_memory = limits::max_memory(&cli.max_memory, env.memory_available)?;
        let padding = outputs::padding(&cli)?;
        if let Some((n, _)) = padding {
            limits::check_positions("--pad-to", n, max_memory, env.memory_available)?;
        }
        let views = views::options(&cli, env)?;
        let outputs = outputs::options(&cli)?;
        let text = match (&cli.file, cli.sentence.as_deref()) {
            _ if cli.batch.is_some() => Text::Batch(cli.batch.clone().unwrap_or_default()),
            (Some(path), _) => Text::File(path.clone()),
            (None, Some("-")) => Text::Stdin,
            (None, Some(s)) => Text::Arg(s.to_string()),
            (None, None) => Text::None,
        };
        Ok(Settings {
            text,
            pair: cli.pair.clone(),
            target: cli.target.clone(),
            more: cli.more.clone(),
            model,
            shape,
            select: Select {
                steps: cli.steps.clone(),
                layer: cli.layer.as_deref().map(|l| index_list("--layer", l)).transpose()?,
                head: cli.head.as_deref().map(|h| index_list("--head", h)).transpose()?,
            },
            output: Output {
                format: cli.format.into(),
                precision: cli.precision,
                width: table_width(cli.width, env),
                summary: cli.model.is_some() && cli.format == cli::Format::Table && cli.steps.is_none(),
                color: use_color(cli.color, env),
                views,
                top_k: cli.top_k,
                stats: cli.stats,
                params: cli.params,
                rollout: cli.rollout,
            },
            outputs,
            max_memory,
            memory_available: env.memory_available,
            max_output: limits::output::max_output(&cli.max_output)?,
            query_tile: cli.query_tile.map(|t| usize::try_from(t).unwrap_or(usize::MAX)),
            held: 0,
            quiet: cli.quiet,
            analysis: analysis::options(&cli)?,
            padding,
            generate: generate::options(&cli)?,
            chat: chat::options(&cli)?,
        })
    }

    /// Whether a real model runs (`--model`).
    pub fn is_pretrained(&self) -> bool {
        matches!(self.model, ModelChoice::Pretrained { .. })
    }

    /// These settings for one sentence of a batch.
    pub fn for_sentence(&self, sentence: &str) -> Settings {
        Settings { text: Text::Arg(sentence.to_string()), pair: None, more: Vec::new(), ..self.clone() }
    }
}

/// `--width`, else the terminal's width when printing to one (at least 40, the narrowest
/// table), else 80: output that is not on a terminal never depends on it.
fn table_width(flag: Option<usize>, env: &Env) -> usize {
    match (flag, env.stdout_is_terminal, env.terminal_width) {
        (Some(w), _, _) => w,
        (None, true, Some(cols)) => cols.max(40),
        _ => 80,
    }
}

/// Checks the flags every run shares: output shape, numbers that must be finite.
fn check_output_flags(cli: &Cli) -> Result<()> {
    if cli.params && cli.format != cli::Format::Table {
        return Err(usage(
            "--params",
            "it prints the parameters as tables",
            "use --format table, or write them to a file with --save-weights",
        ));
    }
    if let Some(w) = cli.width.filter(|&w| w < 40) {
        return Err(usage("--width", format!("{w} is too narrow for a table"), "pass --width 40 or more"));
    }
    if cli.precision > 12 {
        return Err(usage(
            "--precision",
            format!("{} digits is more than f32 holds", cli.precision),
            "pass --precision 12 or fewer (JSON always has every digit)",
        ));
    }
    if let Some(eps) = cli.eps {
        if !eps.is_finite() || eps < 0.0 {
            return Err(usage("--eps", format!("{eps} is not a finite, non-negative number"), "pass e.g. --eps 1e-5"));
        }
    }
    if let Some(s) = cli.scale {
        if !s.is_finite() {
            return Err(usage("--scale", format!("{s} is not a finite number"), "pass e.g. --scale 0.5"));
        }
    }
    if let Some(t) = cli.rope_theta {
        if !t.is_finite() || t <= 1.0 {
            return Err(usage(
                "--rope-theta",
                format!("{t} is not a finite number above 1"),
                "pass e.g. --rope-theta 10000",
            ));
        }
        if cli.positions != Some(cli::PositionsArg::Rope) {
            return Err(usage(
                "--rope-theta",
                "it sets rotary positions' base",
                "add --positions rope, or drop --rope-theta",
            ));
        }
    }
    Ok(())
}
