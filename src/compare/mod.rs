//! `attn-trace compare "prompt" --model A --model B`: one prompt traced through two models in
//! lockstep, and where they part.
//!
//! [`cli`] parses the command line (the main command's flags for both sides, `--model` once
//! per side); [`sides`] opens both models, tokenizes the prompt for each and refuses pairs
//! that cannot be compared; [`engine`] runs both forward passes layer by layer
//! (`model::lockstep`), compares each part's steps as soon as both sides made them and drops
//! them ([`measure`]: relative errors, Jensen–Shannon divergences of attention rows, KL
//! divergences of next-token distributions); [`found`] holds what it found and ranks it;
//! [`report`] writes it as text or JSON, [`draw`] as grids (terminal, SVG, HTML). The verdict
//! is the exit code, as `attn-trace diff`'s: 0 within `--threshold`, 1 past it, 2 for input
//! that cannot be compared.

pub mod cli;
pub mod draw;
pub mod engine;
pub mod found;
pub mod measure;
pub mod report;
pub mod sides;

use crate::cli::Env;
use crate::settings::Output;
use anyhow::Result;
use cli::Parsed;
use found::Comparison;
use std::io::Write;

/// A comparison computed, with how to show it (side A's output settings: width, colour,
/// precision).
pub struct Compared {
    pub comparison: Comparison,
    pub output: Output,
}

/// Opens both sides and compares them.
pub fn compute(parsed: &Parsed, env: &Env) -> Result<Compared> {
    let mut clock = crate::output::Clock::new(parsed.cli.run.timings);
    let compared = compute_timed(parsed, env, &mut clock)?;
    clock.report();
    Ok(compared)
}

fn compute_timed(parsed: &Parsed, env: &Env, clock: &mut crate::output::Clock) -> Result<Compared> {
    let (sides, from) = sides::open(parsed, env)?;
    clock.lap("open");
    let output = sides[0].settings.output.clone();
    let quiet = sides[0].settings.quiet;
    let comparison = engine::compare(sides, parsed.cli.threshold, from)?;
    clock.lap("both forward passes, compared");
    crate::output::notes(&comparison.notes, quiet);
    Ok(Compared { comparison, output })
}

/// Runs a comparison: the files (`--html`, `--svg`), then the report on `out`; `Ok(true)`
/// when every common step is within the threshold.
pub fn run(parsed: Parsed, env: &Env, out: &mut dyn Write) -> Result<bool> {
    let run = &parsed.cli.run;
    // A folder that is missing is said before two models are run, not after.
    let named = [("--svg", run.svg.as_deref()), ("--html", run.html.as_deref())];
    named.iter().filter_map(|(f, p)| p.map(|p| (f, p))).try_for_each(|(f, p)| crate::output::check_file(f, p))?;
    let Compared { comparison: c, output } = compute(&parsed, env)?;
    // Both files or neither (an error in the second leaves no first).
    let mut files = crate::output::Pending::default();
    if let Some(path) = &run.svg {
        let mut bytes = Vec::new();
        draw::svg(&c, &output, &mut bytes)?;
        files.write("--svg", path, &bytes)?;
    }
    if let Some(path) = &run.html {
        let mut bytes = Vec::new();
        draw::html(&c, parsed.cli.top, &output, &mut bytes)?;
        files.write("--html", path, &bytes)?;
    }
    files.commit()?;
    let mut text = Vec::new();
    match run.format {
        crate::cli::Format::Json => report::write_json(&c, &mut text)?,
        crate::cli::Format::Heatmap => draw::heatmap(&c, &output, &mut text)?,
        _ => report::write_text(&c, parsed.cli.top, output.width, &mut text)?,
    }
    match out.write_all(&text).and_then(|()| out.flush()) {
        // `… | head -3`: the reader left, but the verdict still stands.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(c.ok()),
        Err(e) => Err(e.into()),
        Ok(()) => Ok(c.ok()),
    }
}
