//! The switchboard: parse, run, map the result to an exit code (0 ok, 1 failure, 2 usage).

use attn_trace::error::{exit, exit_code, is_broken_pipe};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // `diff` and `schema` are subcommands in all but clap's eyes: the main command's first
    // positional argument is the sentence, so the first word picks them here, and a sentence
    // that is literally "diff" or "schema" is traced with `attn-trace -- diff`.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match args.get(1).and_then(|a| a.to_str()) {
        Some("diff") => return diff(&args[2..]),
        Some("schema") => return schema(&args[2..]),
        _ => {}
    }
    let cli = match attn_trace::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e, "attn-trace --help"),
    };
    let env = attn_trace::cli::Env::read();
    report(attn_trace::run(cli, &env, &mut std::io::stdout().lock()).map(|()| true))
}

/// The exit code of a run's result, with its one-line error on stderr: `Ok(true)` is 0,
/// `Ok(false)` (a diff outside tolerance) is 1, errors are 1 or 2 (usage). A closed output
/// pipe (`attn-trace … | head -1`) is not a failure: the reader left.
fn report(result: anyhow::Result<bool>) -> ExitCode {
    match result {
        Ok(true) => ExitCode::from(exit::OK),
        Ok(false) => ExitCode::from(exit::FAILURE),
        Err(e) if is_broken_pipe(&e) => ExitCode::from(exit::OK),
        Err(e) => {
            eprintln!("attn-trace: {}", one_error_line(&format!("{e:#}")));
            ExitCode::from(exit_code(&e))
        }
    }
}

/// Most characters an error line may have: the longest real message (an unknown step, with
/// the list of valid ones) is about 1,000.
const MAX_ERROR: usize = 2000;

/// An error as one visible line: newlines folded, control characters escaped (an input
/// file's name or text must not drive the terminal), at most [`MAX_ERROR`] characters.
fn one_error_line(msg: &str) -> String {
    let line = attn_trace::render::text::printable(&msg.replace('\n', " ")).into_owned();
    match line.char_indices().nth(MAX_ERROR) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// `attn-trace diff A B`: exit 0 within tolerance, 1 outside it, 2 for unusable input.
fn diff(rest: &[std::ffi::OsString]) -> ExitCode {
    use attn_trace::diff::cli::DiffCli;
    let cli = match DiffCli::try_parse_from(std::iter::once("attn-trace diff".into()).chain(rest.iter().cloned())) {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e, "attn-trace diff --help"),
    };
    report(attn_trace::diff::run(cli, &mut std::io::stdout().lock()))
}

/// `attn-trace schema`: the JSON Schema of the trace document.
fn schema(rest: &[std::ffi::OsString]) -> ExitCode {
    use attn_trace::trace::schema::SchemaCli;
    if let Err(e) = SchemaCli::try_parse_from(std::iter::once("attn-trace schema".into()).chain(rest.iter().cloned())) {
        return clap_exit(e, "attn-trace schema --help");
    }
    let written = attn_trace::trace::schema::write(&mut std::io::stdout().lock());
    report(written.map(|()| true).map_err(|e| anyhow::Error::new(e).context("schema")))
}

/// A subcommand's clap outcome that is not a parse: help and version succeed, the rest is
/// one usage line.
fn clap_exit(e: clap::Error, help: &str) -> ExitCode {
    if !e.use_stderr() {
        // --help and --version print to stdout and succeed, unless stdout cannot be written
        // (`--help > /dev/full`): that is a failure like any other write error.
        let printed = e.print().map_err(|io| anyhow::Error::new(io).context("writing the help"));
        return report(printed.map(|()| true));
    }
    let line = one_line(&e.render().to_string());
    eprintln!("attn-trace: {}", line.replace("(see attn-trace --help)", &format!("(see {help})")));
    ExitCode::from(exit::USAGE)
}

/// Folds clap's multi-line usage error into the one line every attn-trace error is:
/// "error: invalid value 'xml' for '--format <FORMAT>' [possible values: table, json]".
fn one_line(text: &str) -> String {
    let kept: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .collect();
    let joined = kept.join(" ");
    let msg = joined.strip_prefix("error: ").unwrap_or(&joined);
    format!("{msg} (see attn-trace --help)")
}
