//! The switchboard: parse, run, map the result to an exit code (0 ok, 1 failure, 2 usage).

use attn_trace::error::{exit, exit_code, is_broken_pipe};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
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
