//! The switchboard: parse, run, map the result to an exit code (0 ok, 1 failure, 2 usage).

use attn_trace::error::{exit, exit_code, is_broken_pipe};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match attn_trace::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print to stdout and succeed; real usage errors exit 2.
            let code = if e.use_stderr() { exit::USAGE } else { exit::OK };
            let _ = e.print();
            return ExitCode::from(code);
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
