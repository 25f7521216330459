//! Checked and derived settings: everything `run` needs, with every user-facing validation
//! message. Nothing here allocates a tensor before the memory estimate has passed. The toy
//! encoder's settings are here; a real model's (`--model`) are in [`real`].

mod parse;
mod real;
pub mod testing;
mod text;
pub mod views;

use parse::{read_matrix, recipe, tokenizer_options};

use crate::cli::{self, Cli};
use crate::config::{Activation, InitConfig, ModelConfig, Norm, Positions};
use crate::error::usage;
use crate::init::file::{self, FileDims, Named};
use crate::init::seeded::{LinearInit, Proj, RandLayout, Recipe};
use crate::init::torch_rng::Kernel;
use crate::limits;
use crate::model::Input;
use crate::tokenize;
use crate::trace::Selection;
use anyhow::Result;
use candle_core::{Device, Tensor};
use std::path::PathBuf;

/// Where the parameters come from.
#[derive(Debug)]
pub enum Source {
    Seeded(Recipe),
    File(Named),
    /// A real model's memory-mapped checkpoint, taken (and unmapped) once its parameters are
    /// copied out, so the mapped pages stop counting towards the run's memory.
    Model(std::sync::Mutex<Option<crate::hf::weights::Weights>>, crate::hf::config::HfConfig),
}

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
}

/// Resolves `--color`: `always` and `never` are what they say; `auto` colours only a
/// terminal, and never when NO_COLOR is set to anything non-empty (no-color.org).
pub fn use_color(arg: cli::ColorArg) -> bool {
    use std::io::IsTerminal;
    match arg {
        cli::ColorArg::Always => true,
        cli::ColorArg::Never => false,
        cli::ColorArg::Auto => {
            std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
        }
    }
}

#[derive(Debug)]
pub struct Settings {
    pub sentence: Option<String>,
    pub tokens: Vec<String>,
    pub input: Input,
    pub cfg: ModelConfig,
    pub source: Source,
    pub selection: Selection,
    pub output: Output,
    pub save_weights: Option<PathBuf>,
    /// `--save-trace` and `--check`.
    pub testing: testing::Testing,
}

/// Rejects a zero for a flag that names a size.
pub(crate) fn nonzero(flag: &str, v: Option<usize>) -> Result<Option<usize>> {
    match v {
        Some(0) => Err(usage(flag, "must be at least 1", format!("pass a positive number, e.g. {flag} 2"))),
        _ => Ok(v),
    }
}

/// Takes the file's value, or the flag's if it agrees; a contradiction names both values.
pub(crate) fn agree(flag: &str, given: Option<usize>, from_file: usize, weights: &str) -> Result<usize> {
    match given {
        Some(g) if g != from_file => Err(usage(
            flag,
            format!("{flag} {g} contradicts {weights}, which has {from_file}"),
            format!("drop {flag} or pass {flag} {from_file}"),
        )),
        _ => Ok(from_file),
    }
}

impl Settings {
    pub fn from_cli(mut cli: Cli) -> Result<Settings> {
        check_output_flags(&cli)?;
        cli.sentence = text::sentence(cli.sentence.take(), cli.file.as_deref())?;
        if cli.model.is_some() {
            return real::from_cli(cli);
        }
        if cli.pair.is_some() {
            return Err(usage(
                "PAIR",
                "a sentence pair needs a real model's token types",
                "pass --model DIR, or join the sentences",
            ));
        }
        if cli.truncate {
            return Err(usage("--truncate", "it applies to real models", "pass --model DIR too, or drop --truncate"));
        }
        let eps = cli.eps.unwrap_or(1e-5);
        let d_model_flag = nonzero("--d-model", cli.d_model)?;
        let heads_flag = nonzero("--heads", cli.heads)?;
        let d_k_flag = nonzero("--d-k", cli.d_k)?;
        let d_v_flag = nonzero("--d-v", cli.d_v)?;
        let d_ff_flag = nonzero("--d-ff", cli.d_ff)?;
        let layers_flag = nonzero("--layers", cli.layers)?;
        let max_len_flag = nonzero("--max-len", cli.max_len)?;
        let max_memory = limits::parse_size(&cli.max_memory)?;

        // ---- input: a raw matrix, or the sentence's tokens ----
        let matrix = match &cli.input {
            Some(path) => Some(read_matrix(path)?),
            None => None,
        };
        let sentence = cli.sentence.clone();
        let tok_opts = tokenizer_options(&cli)?;
        let (tokens, ids, vocab_size) = match (&matrix, &sentence) {
            (None, None) => {
                return Err(usage(
                    "sentence",
                    "none was given",
                    "pass a sentence, e.g. attn-trace \"my shoes are small\" (or a matrix with --input FILE)",
                ))
            }
            (None, Some(s)) => {
                let t = tokenize::tokenize(s, &tok_opts)?;
                (t.tokens, Some(t.ids), t.vocab_size)
            }
            (Some((rows, _, _)), Some(s)) => {
                let words = tokenize::words(s, &tok_opts);
                if words.len() != *rows {
                    return Err(usage(
                        "--input",
                        format!("the matrix has {rows} rows but the sentence has {} words", words.len()),
                        "label each row with one word, or leave the sentence out",
                    ));
                }
                (words, None, 0)
            }
            (Some((rows, _, _)), None) => ((0..*rows).map(|i| format!("x{i}")).collect(), None, 0),
        };
        let n = tokens.len();

        // ---- dimensions: from the weights file if any, else from flags and defaults ----
        let weights_name = cli.weights.as_ref().map(|p| format!("--weights {}", p.display()));
        let named = match &cli.weights {
            Some(p) => Some(file::read(p)?),
            None => None,
        };
        if let (Some(nm), false) = (&named, cli.quiet) {
            let bad = file::non_finite(nm);
            if !bad.is_empty() {
                eprintln!("attn-trace: note: the weights hold NaN or infinite values in {}", bad.join(", "));
            }
        }
        let fd: Option<FileDims> = match (&named, &weights_name) {
            (Some(nm), Some(w)) => Some(file::infer(nm, w)?),
            _ => None,
        };
        let w = weights_name.clone().unwrap_or_default();
        let mut d_model = match (&fd, &matrix) {
            (Some(f), _) => agree("--d-model", d_model_flag, f.d_model, &w)?,
            (None, Some((_, cols, _))) => agree("--d-model", d_model_flag, *cols, "--input")?,
            (None, None) => d_model_flag.unwrap_or(4),
        };
        if let (Some(f), Some((_, cols, _))) = (&fd, &matrix) {
            if *cols != f.d_model {
                return Err(usage(
                    "--input",
                    format!("the matrix has {cols} columns but {w} has d_model {}", f.d_model),
                    "give the matrix d_model columns",
                ));
            }
            d_model = f.d_model;
        }
        let heads = heads_flag.unwrap_or(1);
        let (d_k, d_v) = match &fd {
            Some(f) => {
                let need_div = |width: usize, what: &str| -> Result<usize> {
                    if !width.is_multiple_of(heads) {
                        return Err(usage(
                            "--heads",
                            format!(
                                "{w} has a {what} projection {width} wide, which {heads} heads cannot split evenly"
                            ),
                            "pass a --heads that divides it",
                        ));
                    }
                    Ok(width / heads)
                };
                let dk = need_div(f.qk_width, "query/key")?;
                let dv = need_div(f.v_width, "value")?;
                (agree("--d-k", d_k_flag, dk, &w)?, agree("--d-v", d_v_flag, dv, &w)?)
            }
            None => {
                let dk = match d_k_flag {
                    Some(k) => k,
                    None if !d_model.is_multiple_of(heads) => {
                        return Err(usage(
                            "--heads",
                            format!("d_model {d_model} is not divisible by {heads} heads"),
                            "pick --heads that divides --d-model, or set the per-head width with --d-k",
                        ))
                    }
                    None => d_model / heads,
                };
                (dk, d_v_flag.unwrap_or(dk))
            }
        };
        let d_ff = match &fd {
            Some(f) => agree("--d-ff", d_ff_flag, f.d_ff, &w)?,
            None => d_ff_flag.unwrap_or(d_model.saturating_mul(2)),
        };
        let layers = match &fd {
            Some(f) => agree("--layers", layers_flag, f.layers, &w)?,
            None => layers_flag.unwrap_or(1),
        };
        let positions_flag = cli.positions.map(|p| match p {
            cli::PositionsArg::Learned => Positions::Learned,
            cli::PositionsArg::Sinusoidal => Positions::Sinusoidal,
            cli::PositionsArg::None => Positions::None,
        });
        let positions = match (&fd, positions_flag) {
            (Some(f), Some(Positions::Learned)) if f.max_len.is_none() => {
                return Err(usage(
                    "--positions",
                    format!("learned positions need embed.position.weight, which {w} lacks"),
                    "add the table to the file or pass --positions sinusoidal or none",
                ))
            }
            (Some(f), Some(p)) if f.max_len.is_some() && p != Positions::Learned => {
                return Err(usage(
                    "--positions",
                    format!("{w} has a learned position table (embed.position.weight)"),
                    "drop --positions, or remove the table from the file",
                ))
            }
            (Some(f), None) => {
                if f.max_len.is_some() {
                    Positions::Learned
                } else {
                    Positions::None
                }
            }
            (_, Some(p)) => p,
            (None, None) => {
                if matrix.is_some() {
                    Positions::None
                } else {
                    Positions::Learned
                }
            }
        };
        let max_len = match fd.as_ref().and_then(|f| f.max_len) {
            Some(m) => agree("--max-len", max_len_flag, m, &w)?,
            None => max_len_flag.unwrap_or(10),
        };
        if positions == Positions::Learned && n > max_len {
            return Err(usage(
                "sentence",
                format!("it has {n} tokens but the learned position table has {max_len} rows"),
                format!("pass --max-len {n} or more, or --positions sinusoidal"),
            ));
        }
        let attn_bias = match &fd {
            Some(f) if cli.attn_bias && !f.attn_bias => {
                return Err(usage("--attn-bias", format!("{w} has no projection biases"), "drop --attn-bias"))
            }
            Some(f) => f.attn_bias,
            None => cli.attn_bias,
        };
        let ffn_bias = match &fd {
            Some(f) if cli.no_ffn_bias && f.ffn_bias => {
                return Err(usage("--no-ffn-bias", format!("{w} has FFN biases"), "drop --no-ffn-bias"))
            }
            Some(f) => f.ffn_bias,
            None => !cli.no_ffn_bias,
        };
        let vocab_size = match (&fd, &ids) {
            (Some(f), Some(ids)) => {
                let rows = f.vocab_size.ok_or_else(|| {
                    usage(
                        &w,
                        "tensor embed.token.weight is missing",
                        "add the token table, or pass a raw matrix with --input",
                    )
                })?;
                if let Some(&bad) = ids.iter().find(|&&i| i as usize >= rows) {
                    return Err(usage(
                        &w,
                        format!("token id {bad} is out of range for embed.token.weight with {rows} rows"),
                        "use a vocabulary (--vocab) whose ids fit the table",
                    ));
                }
                rows
            }
            _ => vocab_size,
        };
        let scale = cli.scale.unwrap_or(1.0 / (d_k as f64).sqrt());

        let recipe = recipe(&cli)?;
        let init = match (&cli.weights, &recipe) {
            (Some(p), _) => InitConfig::File { path: p.display().to_string() },
            (None, r) => InitConfig::Torch {
                seed: r.seed,
                kernel: match r.kernel {
                    Kernel::Avx2 => "avx2",
                    Kernel::Generic => "generic",
                },
                reseed: [("token", r.reseed.token), ("position", r.reseed.position), ("layers", r.reseed.layers)]
                    .into_iter()
                    .filter_map(|(n, on)| on.then_some(n))
                    .collect(),
                linear: match r.linear {
                    LinearInit::Kaiming => "kaiming",
                    LinearInit::Rand => "rand",
                },
                rand_layout: match r.layout {
                    RandLayout::OutIn => "out-in",
                    RandLayout::InOut => "in-out",
                },
                skip_draws: [
                    ("token", r.skip.token),
                    ("position", r.skip.position),
                    ("layers", r.skip.layers),
                    ("ffn", r.skip.ffn),
                ]
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .collect(),
                draw_order: r
                    .draw_order
                    .iter()
                    .map(|p| match p {
                        Proj::Q => "q",
                        Proj::K => "k",
                        Proj::V => "v",
                    })
                    .collect(),
            },
        };
        let cfg = ModelConfig {
            d_model,
            heads,
            d_k,
            d_v,
            d_ff,
            layers,
            vocab_size,
            max_len,
            positions,
            causal: cli.causal,
            scale,
            norm: match cli.norm.unwrap_or(cli::NormArg::Post) {
                cli::NormArg::Post => Norm::Post,
                cli::NormArg::Pre => Norm::Pre,
            },
            activation: match cli.activation.unwrap_or(cli::ActivationArg::Relu) {
                cli::ActivationArg::Relu => Activation::Relu,
                cli::ActivationArg::Gelu => Activation::Gelu,
            },
            attn_bias,
            ffn_bias,
            eps,
            raw_input: matrix.is_some(),
            model: None,
            init,
        };
        limits::check(&cfg, n, max_memory)?;

        let input = match (matrix, ids) {
            (Some((rows, cols, values)), _) => Input::Matrix(Tensor::from_vec(values, (rows, cols), &Device::Cpu)?),
            (None, Some(ids)) => Input::Ids { ids, type_ids: None },
            (None, None) => anyhow::bail!("internal: neither ids nor a matrix"),
        };
        let source = match named {
            Some(nm) => Source::File(nm),
            None => Source::Seeded(recipe),
        };
        let selection = selection(&cli, layers, heads)?;
        let views = views::options(&cli, &tokens, layers)?;
        let testing = testing::options(&cli, None)?;
        Ok(Settings {
            sentence,
            tokens,
            input,
            cfg,
            source,
            selection,
            output: Output {
                format: cli.format,
                precision: cli.precision,
                width: cli.width,
                summary: false,
                color: use_color(cli.color),
                views,
            },
            save_weights: cli.save_weights,
            testing,
        })
    }
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
    Ok(())
}

/// `--steps`, `--layer` and `--head`, checked against the model's sizes.
pub(crate) fn selection(cli: &Cli, layers: usize, heads: usize) -> Result<Selection> {
    if let Some(l) = cli.layer {
        if l >= layers {
            return Err(usage(
                "--layer",
                format!("layer {l} does not exist; the model has {layers}"),
                format!("pass --layer 0 to {}", layers - 1),
            ));
        }
    }
    if let Some(h) = cli.head {
        if h >= heads {
            return Err(usage(
                "--head",
                format!("head {h} does not exist; the model has {heads}"),
                format!("pass --head 0 to {}", heads - 1),
            ));
        }
    }
    Ok(Selection {
        steps: cli.steps.as_deref().map(|s| crate::steps::parse(s, layers)).transpose()?,
        layer: cli.layer,
        head: cli.head,
    })
}
