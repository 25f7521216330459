//! [`Settings::from_cli`]: the typed flags and the environment checked into [`Settings`].

use super::run::{Output, Select, Settings, Text};
use super::{analysis, chat, generate, index_list, limits, model, outputs, shape, views};
use crate::cli::{self, Cli, Env};
use crate::error::usage;
use anyhow::Result;

/// Resolves `--color`: `always` and `never` are what they say; `auto` colours only a
/// terminal, and never when NO_COLOR is set to anything non-empty (no-color.org).
pub fn use_color(arg: cli::ColorArg, env: &Env) -> bool {
    match arg {
        cli::ColorArg::Always => true,
        cli::ColorArg::Never => false,
        cli::ColorArg::Auto => !env.no_color && env.stdout_is_terminal,
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
