//! attn-trace traces a transformer encoder step by step and prints every intermediate tensor,
//! named and labelled by token: the token ids, token and position embeddings, per-head
//! queries, keys and values, raw and scaled scores, softmax weights, context vectors, the
//! concatenated heads, the output projection, Add & Norm, the feed-forward network and the
//! second Add & Norm, for every layer, then the output.
//!
//! The pipeline, one module each: [`cli`] (what was typed) → [`settings`] (checked values,
//! every validation message) → [`init`] (parameter sources: PyTorch-seeded or files) →
//! [`model`] (the forward pass, recording into a [`trace::Trace`]) → [`render`] (one renderer
//! per format). The trace is the only thing between the model and the output.

pub mod check;
pub mod cli;
pub mod config;
pub mod diff;
pub mod error;
pub mod export;
pub mod focus;
pub mod hf;
pub mod init;
pub mod limits;
pub mod model;
pub mod render;
pub mod schema;
pub mod settings;
pub mod steps;
pub mod tokenize;
pub mod trace;
pub mod views;

use anyhow::{Context, Result};
use settings::{Settings, Source};
use std::io::Write;

/// Computes the trace that `settings` describe, saving weights first if asked.
pub fn compute(settings: &Settings) -> Result<trace::Trace> {
    Ok(compute_with(settings, |_| Ok(()))?.0)
}

/// As [`compute`], letting `prepare` see the trace before the first step is recorded (to
/// attach a sink: `--format jsonl`); also returns the encoder's final output (for `--check`,
/// whatever `--steps` keeps).
pub fn compute_with(
    settings: &Settings,
    prepare: impl FnOnce(&mut trace::Trace) -> std::io::Result<()>,
) -> Result<(trace::Trace, candle_core::Tensor)> {
    let cfg = &settings.cfg;
    let params = match &settings.source {
        Source::Seeded(recipe) => init::seeded::draw(cfg, recipe)?,
        Source::File(named) => {
            let what = match &cfg.init {
                config::InitConfig::File { path } => format!("--weights {path}"),
                _ => "--weights".to_string(),
            };
            init::file::params(named.clone(), cfg, &what)?
        }
        Source::Model(weights, hf_config) => {
            let model::Input::Ids { ids, .. } = &settings.input else {
                anyhow::bail!("internal: a real model takes token ids");
            };
            let taken = weights.lock().ok().and_then(|mut w| w.take());
            let weights = taken.context("internal: the model's weights were already used")?;
            weights.params(hf_config, ids)?
            // `weights` drops here: the file is unmapped.
        }
    };
    if let Some(path) = &settings.save_weights {
        init::file::save(&params, path)?;
    }
    let mut trace = trace::Trace::new(settings.tokens.clone(), settings.selection.clone());
    trace.sentence = settings.sentence.clone();
    if let model::Input::Ids { ids, type_ids } = &settings.input {
        trace.token_ids = Some(ids.clone());
        trace.token_type_ids = type_ids.clone();
    }
    trace.config = serde_json::to_value(cfg)?;
    prepare(&mut trace)?;
    let output = model::forward(cfg, &params, &settings.input, &mut trace).context("computing the trace")?;
    Ok((trace, output))
}

/// `--save-trace` and `--check`, once the trace exists. A failed check is returned as the
/// run's error only after the output is written, so it comes back separately (exit 1).
fn testing(settings: &Settings, trace: &mut trace::Trace, output: &candle_core::Tensor) -> Result<Result<()>> {
    if let Some(path) = &settings.testing.save_trace {
        export::save(&trace.steps, &trace.tokens, path)?;
    }
    let (Some(tol), Source::Model(_, hf)) = (settings.testing.check, &settings.source) else {
        return Ok(Ok(()));
    };
    let c = check::run(&settings.cfg, hf, &settings.input, output, tol)?;
    trace.check = Some(c.to_json());
    if !c.ok() {
        return Ok(Err(check::failure(&c)));
    }
    if !settings.testing.quiet {
        eprintln!("attn-trace: {}", c.line());
    }
    Ok(Ok(()))
}

/// Runs one command line: check it, compute the trace, render it to `out`.
pub fn run(cli: cli::Cli, out: &mut dyn Write) -> Result<()> {
    // Completions and the man page come from the clap definition itself, so they never drift.
    if let Some(shell) = cli.completions {
        clap_complete::generate(shell, &mut <cli::Cli as clap::CommandFactory>::command(), "attn-trace", out);
        return Ok(());
    }
    if cli.man {
        clap_mangen::Man::new(<cli::Cli as clap::CommandFactory>::command()).render(out)?;
        return Ok(());
    }
    let mut settings = Settings::from_cli(cli)?;
    if settings.output.format == cli::Format::Jsonl {
        // Streams: each step is written as it is computed (render/jsonl.rs).
        let keep = settings.testing.save_trace.is_some();
        let (mut trace, output) = render::jsonl::stream(&settings, keep, out)?;
        return testing(&settings, &mut trace, &output)?;
    }
    // The views' steps are recorded even when --steps narrows what is shown.
    let shown = views::widen(&mut settings);
    let (trace, output) = compute_with(&settings, |_| Ok(()))?;
    let (mut trace, views) = views::build(trace, &shown, &settings.output)?;
    views::write_files(&trace, &views, &settings.output)?;
    let checked = testing(&settings, &mut trace, &output)?;
    // Render into memory first only when small; otherwise stream. Either way nothing is
    // written before the whole trace has been computed, so an error leaves stdout empty.
    let mut w = std::io::BufWriter::with_capacity(1 << 16, out);
    render::render_views(&trace, &views, &settings.output, &mut w)?;
    w.flush()?;
    checked
}
