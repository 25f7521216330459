//! Arbitrary command lines through parsing, validation and the forward pass, with a small
//! memory cap: every input must end in a trace or an error, never a panic. Flags that read
//! files or stdin are left out (the file parsers have their own targets).
#![no_main]
use attn_trace::{cli::Cli, compute, settings::Settings};
use clap::Parser;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut args: Vec<String> = vec!["attn-trace".into()];
    args.extend(text.split('\0').map(str::to_string));
    let reads_files = ["-", "--file", "--weights", "--vocab", "--input", "--model", "--save-weights", "--completions", "--man"];
    if args.iter().any(|a| reads_files.iter().any(|f| a == f || a.starts_with(&format!("{f}=")))) {
        return;
    }
    args.extend(["--max-memory".into(), "4MiB".into()]);
    let Ok(cli) = Cli::try_parse_from(&args) else { return };
    if let Ok(settings) = Settings::from_cli(cli, &Default::default()) {
        let _ = compute(&settings);
    }
});
