//! A run's result as its exit code (0 ok, 1 failure, 2 usage) and its error as one line on
//! stderr, for the main command and every sub-command alike.

use crate::error::{exit, exit_code, is_broken_pipe};

/// The exit code of a run's result, with its one-line error on stderr: `Ok(true)` is 0,
/// `Ok(false)` (a diff outside tolerance) is 1, errors are 1 or 2 (usage). A closed output
/// pipe (`attn-trace … | head -1`) is not a failure: the reader left.
pub(super) fn report(result: anyhow::Result<bool>) -> u8 {
    match result {
        Ok(true) => exit::OK,
        Ok(false) => exit::FAILURE,
        Err(e) if is_broken_pipe(&e) => exit::OK,
        Err(e) => {
            eprintln!("attn-trace: {}", error_line(&e));
            exit_code(&e)
        }
    }
}

/// Most characters an error line may have: the longest real message (an unknown step, with
/// the list of valid ones) is about 1,000.
const MAX_ERROR: usize = 2000;

/// An error as one visible line: newlines folded, control characters escaped (an input
/// file's name or text must not drive the terminal), at most [`MAX_ERROR`] characters.
pub fn error_line(e: &anyhow::Error) -> String {
    let msg = format!("{e:#}");
    let line = crate::render::text::printable(&msg.replace('\n', " ")).into_owned();
    match line.char_indices().nth(MAX_ERROR) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// A subcommand's clap outcome that is not a parse: help and version succeed, the rest is
/// one usage line.
pub(super) fn clap_exit(e: clap::Error, help: &str) -> u8 {
    if !e.use_stderr() {
        // --help and --version print to stdout and succeed, unless stdout cannot be written
        // (`--help > /dev/full`): that is a failure like any other write error.
        let printed = e.print().map_err(|io| anyhow::Error::new(io).context("writing the help"));
        return report(printed.map(|()| true));
    }
    eprintln!("attn-trace: {}", clap_line(&e, help));
    exit::USAGE
}

/// Folds clap's multi-line usage error into the one line every attn-trace error is:
/// "error: invalid value 'xml' for '--format <FORMAT>' [possible values: table, json]",
/// pointing at `help` for more.
pub fn clap_line(e: &clap::Error, help: &str) -> String {
    let text = e.render().to_string();
    let kept: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .collect();
    let joined = kept.join(" ");
    let msg = joined.strip_prefix("error: ").unwrap_or(&joined);
    format!("{msg} (see {help})")
}
