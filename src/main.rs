//! The switchboard: the command line to [`attn_trace::command::main`], its result to the exit
//! code (0 ok, 1 failure, 2 usage). The Python wheel's `attn-trace` calls the same function.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Before any other thread exists (see `tune_process`).
    attn_trace::command::tune_process();
    ExitCode::from(attn_trace::command::main(std::env::args_os().collect()))
}
