//! Checked settings: what the command line asks for, validated, as plain data.
//!
//! [`Settings::from_cli`] is a pure function of the typed flags ([`Cli`]) and the
//! environment ([`Env`]): it reads no file, tokenizes nothing, allocates no tensor and prints
//! nothing, so every flag-only mistake is refused before anything is opened. What can only be
//! checked against the model (a layer number, a focus word, a step id's layer) is checked by
//! [`plan::Plan::new`] once the sources stage knows the model's sizes and tokens; that too is
//! pure. Every user-facing validation message of a flag lives in this folder.

pub mod analysis;
pub mod limits;
pub mod outputs;
pub mod plan;
pub mod recipe;
pub mod views;

use crate::cli::{self, Cli, Env};
use crate::config::{Activation, Norm, Positions};
use crate::error::usage;
use anyhow::Result;
use std::path::PathBuf;

pub use analysis::Analysis;
pub use recipe::Recipe;

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
    /// `--weights FILE`: parameters from a file instead of seeded draws.
    pub weights: Option<PathBuf>,
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
    },
}

/// The shape flags as typed (each `None` when not given): for the toy model they choose, for a
/// real model they may only restate what the checkpoint says.
#[derive(Debug, Clone, Default)]
pub struct Shape {
    pub d_model: Option<usize>,
    pub heads: Option<usize>,
    pub d_k: Option<usize>,
    pub d_v: Option<usize>,
    pub d_ff: Option<usize>,
    pub layers: Option<usize>,
    pub max_len: Option<usize>,
    pub positions: Option<Positions>,
    pub norm: Option<Norm>,
    pub activation: Option<Activation>,
    pub causal: bool,
    pub scale: Option<f64>,
    pub eps: Option<f64>,
    pub attn_bias: bool,
    pub no_ffn_bias: bool,
    /// The toy decoder's parts (`--rms-norm`, `--rope-theta`, `--gated`, `--kv-heads`,
    /// `--final-norm`, `--lm-head`).
    pub rms_norm: bool,
    pub rope_theta: Option<f64>,
    pub gated: bool,
    pub kv_heads: Option<usize>,
    pub final_norm: bool,
    /// `Some(tied)` for an LM head.
    pub lm_head: Option<bool>,
}

/// `--steps`, `--layer`, `--head` as typed; [`plan::Plan`] checks them against the model.
#[derive(Debug, Clone, Default)]
pub struct Select {
    pub steps: Option<String>,
    pub layer: Option<usize>,
    pub head: Option<usize>,
}

/// How the trace is shown.
#[derive(Debug, Clone)]
pub struct Output {
    pub format: cli::Format,
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
    /// `--stats` and `--rollout`: derived views to show.
    pub stats: bool,
    pub rollout: bool,
}

/// Everything one run needs to know, checked. Plain data: `Clone`, no open files.
#[derive(Debug, Clone)]
pub struct Settings {
    pub text: Text,
    /// A second sentence: a BERT model's sentence pair, or the second sentence of a batch.
    pub pair: Option<String>,
    /// Third and later sentences: a batch (`sources::batch` decides).
    pub more: Vec<String>,
    pub model: ModelChoice,
    pub shape: Shape,
    pub select: Select,
    pub output: Output,
    /// Files written besides stdout (`--save-weights`, `--save-trace`) and `--check`.
    pub outputs: outputs::Outputs,
    /// `--max-memory` in bytes.
    pub max_memory: u128,
    /// The machine's available memory, if known (a second cap).
    pub memory_available: Option<u128>,
    /// `--quiet`: no notes on stderr.
    pub quiet: bool,
    /// Interventions and analyses (`--ablate`, `--knockout`, `--lens`, `--stats`, `--rollout`).
    pub analysis: Analysis,
    /// `--pad-to N` and `--padding`: (N, pads on the left).
    pub padding: Option<(usize, bool)>,
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

impl From<cli::PositionsArg> for Positions {
    fn from(p: cli::PositionsArg) -> Self {
        match p {
            cli::PositionsArg::Learned => Positions::Learned,
            cli::PositionsArg::Sinusoidal => Positions::Sinusoidal,
            cli::PositionsArg::None => Positions::None,
            cli::PositionsArg::Rope => Positions::Rotary,
        }
    }
}

impl From<cli::NormArg> for Norm {
    fn from(n: cli::NormArg) -> Self {
        match n {
            cli::NormArg::Post => Norm::Post,
            cli::NormArg::Pre => Norm::Pre,
        }
    }
}

impl From<cli::ActivationArg> for Activation {
    fn from(a: cli::ActivationArg) -> Self {
        match a {
            cli::ActivationArg::Relu => Activation::Relu,
            cli::ActivationArg::Gelu => Activation::Gelu,
            cli::ActivationArg::Silu => Activation::Silu,
        }
    }
}

impl Settings {
    /// Checks the command line. Pure: reads no file and prints nothing.
    pub fn from_cli(cli: Cli, env: &Env) -> Result<Settings> {
        check_output_flags(&cli)?;
        let model = match &cli.model {
            Some(spec) => pretrained(&cli, spec)?,
            None => toy(&cli)?,
        };
        let shape = Shape {
            d_model: nonzero("--d-model", cli.d_model)?,
            heads: nonzero("--heads", cli.heads)?,
            d_k: nonzero("--d-k", cli.d_k)?,
            d_v: nonzero("--d-v", cli.d_v)?,
            d_ff: nonzero("--d-ff", cli.d_ff)?,
            layers: nonzero("--layers", cli.layers)?,
            max_len: nonzero("--max-len", cli.max_len)?,
            positions: cli.positions.map(Into::into),
            norm: cli.norm.map(Into::into),
            activation: cli.activation.map(Into::into),
            causal: cli.causal,
            scale: cli.scale,
            eps: cli.eps,
            attn_bias: cli.attn_bias,
            no_ffn_bias: cli.no_ffn_bias,
            rms_norm: cli.rms_norm,
            rope_theta: cli.rope_theta,
            gated: cli.gated,
            kv_heads: nonzero("--kv-heads", cli.kv_heads)?,
            final_norm: cli.final_norm,
            lm_head: cli.lm_head.map(|h| h == cli::LmHeadArg::Tied),
        };
        let max_memory = limits::parse_size(&cli.max_memory)?;
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
            more: cli.more.clone(),
            model,
            shape,
            select: Select { steps: cli.steps.clone(), layer: cli.layer, head: cli.head },
            output: Output {
                format: cli.format,
                precision: cli.precision,
                width: cli.width,
                summary: cli.model.is_some() && cli.format == cli::Format::Table && cli.steps.is_none(),
                color: use_color(cli.color, env),
                views,
                top_k: cli.top_k,
                stats: cli.stats,
                rollout: cli.rollout,
            },
            outputs,
            max_memory,
            memory_available: env.memory_available,
            quiet: cli.quiet,
            analysis: analysis::options(&cli)?,
            padding: outputs::padding(&cli)?,
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

/// The toy model's flags: sentence pairs and `--truncate` need a real model.
fn toy(cli: &Cli) -> Result<ModelChoice> {
    if cli.truncate || cli.no_special_tokens {
        let flag = if cli.truncate { "--truncate" } else { "--no-special-tokens" };
        return Err(usage(flag, "it applies to real models", format!("pass --model DIR too, or drop {flag}")));
    }
    if cli.unk.is_some() && cli.vocab.is_none() {
        return Err(usage("--unk", "it only applies to a fixed vocabulary", "pass --vocab FILE too, or drop --unk"));
    }
    let tokenizer = ToyTokenizer {
        lowercase: cli.lowercase,
        remove: cli.remove.clone(),
        remove_punctuation: cli.remove_punctuation,
        order: match cli.vocab_order {
            cli::VocabOrderArg::FirstSeen => VocabOrder::FirstSeen,
            cli::VocabOrderArg::Sorted => VocabOrder::Sorted,
        },
        vocab: cli.vocab.clone(),
        unk: cli.unk.clone(),
        bos: cli.bos.clone(),
        eos: cli.eos.clone(),
    };
    Ok(ModelChoice::Toy(Box::new(Toy {
        tokenizer,
        matrix: cli.input.clone(),
        weights: cli.weights.clone(),
        recipe: recipe::recipe(cli)?,
    })))
}

/// A real model's flags: toy-only flags are refused, the rest are checked against the model
/// by the sources stage.
fn pretrained(cli: &Cli, spec: &str) -> Result<ModelChoice> {
    for (flag, given) in [
        ("--weights", cli.weights.is_some()),
        ("--input", cli.input.is_some()),
        ("--vocab", cli.vocab.is_some()),
        ("--save-weights", cli.save_weights.is_some()),
        ("--skip-draws", cli.skip_draws.is_some()),
        ("--rms-norm", cli.rms_norm),
        ("--rope-theta", cli.rope_theta.is_some()),
        ("--gated", cli.gated),
        ("--kv-heads", cli.kv_heads.is_some()),
        ("--final-norm", cli.final_norm),
        ("--lm-head", cli.lm_head.is_some()),
    ] {
        if given {
            return Err(usage(
                flag,
                "it applies to the toy encoder, not to --model",
                format!("drop {flag} or --model"),
            ));
        }
    }
    Ok(ModelChoice::Pretrained { spec: spec.to_string(), truncate: cli.truncate, special: !cli.no_special_tokens })
}

/// Checks the flags every run shares: output shape, numbers that must be finite.
fn check_output_flags(cli: &Cli) -> Result<()> {
    if cli.width < 40 {
        return Err(usage("--width", format!("{} is too narrow for a table", cli.width), "pass --width 40 or more"));
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
