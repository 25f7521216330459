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
        // --help and --version print to stdout and succeed.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::from(exit::OK);
        }
        Err(e) => {
            eprintln!("attn-trace: {}", one_line(&e.render().to_string()));
            return ExitCode::from(exit::USAGE);
        }
    };
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    match attn_trace::run(cli, &mut lock) {
        Ok(()) => ExitCode::from(exit::OK),
        // `attn-trace … | head -1`: the reader left; that is not our failure.
        Err(e) if is_broken_pipe(&e) => ExitCode::from(exit::OK),
        Err(e) => {
            let msg = format!("{e:#}").replace('\n', " ");
            eprintln!("attn-trace: {msg}");
            ExitCode::from(exit_code(&e))
        }
    }
}

/// `attn-trace diff A B`: exit 0 within tolerance, 1 outside it, 2 for unusable input.
fn diff(rest: &[std::ffi::OsString]) -> ExitCode {
    use attn_trace::diff::cli::DiffCli;
    let cli = match DiffCli::try_parse_from(std::iter::once("attn-trace diff".into()).chain(rest.iter().cloned())) {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e, "attn-trace diff --help"),
    };
    let stdout = std::io::stdout();
    match attn_trace::diff::run(cli, &mut stdout.lock()) {
        Ok(true) => ExitCode::from(exit::OK),
        Ok(false) => ExitCode::from(exit::FAILURE),
        Err(e) => {
            eprintln!("attn-trace: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::from(exit_code(&e))
        }
    }
}

/// `attn-trace schema`: the JSON Schema of the trace document.
fn schema(rest: &[std::ffi::OsString]) -> ExitCode {
    use attn_trace::schema::SchemaCli;
    if let Err(e) = SchemaCli::try_parse_from(std::iter::once("attn-trace schema".into()).chain(rest.iter().cloned())) {
        return clap_exit(e, "attn-trace schema --help");
    }
    match attn_trace::schema::write(&mut std::io::stdout().lock()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("attn-trace: schema: {e}");
            ExitCode::from(exit::FAILURE)
        }
        _ => ExitCode::from(exit::OK),
    }
}

/// A subcommand's clap outcome that is not a parse: help and version succeed, the rest is
/// one usage line.
fn clap_exit(e: clap::Error, help: &str) -> ExitCode {
    if !e.use_stderr() {
        let _ = e.print();
        return ExitCode::from(exit::OK);
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
