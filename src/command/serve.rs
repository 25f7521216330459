//! `attn-trace serve`'s command line, and what a request to the server may ask: its options
//! are the main command's (or compare's), parsed by their own clap definitions, less every
//! flag that would name a file or device, change the model the server was started with, or
//! change what the answer is ([`not_in_a_request`]). The refused flags are found by what clap
//! parsed, not by the words typed, so `--html=x`, a flag's value that looks like a flag, and
//! a flag added to the command later are all judged alike.

use super::exits::{clap_exit, clap_line, error_line, report};
use crate::error::exit;
use crate::error::usage;
use clap::parser::ValueSource;
use std::ffi::OsString;
use std::time::Duration;

/// `attn-trace serve [--host H] [--port N] [--allow-remote] [--queue N] [--trace-limit S]
/// MODEL-FLAGS…`: the model flags are the main command's, fixed for every request
/// (docs/SERVE.md).
pub(super) fn serve(rest: &[OsString]) -> u8 {
    let args: Option<Vec<String>> = rest.iter().map(|a| a.to_str().map(String::from)).collect();
    let Some(args) = args else {
        eprintln!("attn-trace: serve: an argument is not UTF-8");
        return exit::USAGE;
    };
    // The help comes from serve's clap definition, as `attn-trace help serve` shows it.
    if let Some(flag) = args.iter().find(|a| *a == "--help" || *a == "-h") {
        let cmd = crate::serve::command().bin_name("attn-trace serve").term_width(crate::cli::help_width());
        if let Err(e) = cmd.try_get_matches_from(["attn-trace serve", flag.as_str()]) {
            return clap_exit(e, "attn-trace serve --help");
        }
    }
    report(serve_args(args).map(|()| true))
}

/// The serve command's own flags, and the rest: the model flags.
struct Parsed {
    host: String,
    port: u16,
    allow_remote: bool,
    queue: usize,
    trace_limit: Duration,
    reference: Option<String>,
    model: Vec<String>,
}

fn parsed(args: Vec<String>) -> anyhow::Result<Parsed> {
    let mut p = Parsed {
        host: "127.0.0.1".into(),
        port: 8080,
        allow_remote: false,
        queue: 4,
        trace_limit: Duration::from_secs(120),
        reference: None,
        model: Vec::new(),
    };
    let max_queue = crate::serve::MAX_QUEUE;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = |name: &str| {
            inline.clone().or_else(|| it.next()).ok_or_else(|| usage(name, "needs a value", format!("{name} VALUE")))
        };
        match flag.as_str() {
            "--host" => p.host = value("--host")?,
            "--port" => {
                p.port = value("--port")?
                    .parse()
                    .map_err(|_| usage("--port", "is a number from 0 to 65535", "--port 8080"))?
            }
            "--allow-remote" => p.allow_remote = true,
            "--queue" => {
                let n = value("--queue")?;
                p.queue = n.parse().ok().filter(|&q| q <= max_queue).ok_or_else(|| {
                    usage(format!("--queue {n}"), format!("is a count from 0 to {max_queue}"), "--queue 4")
                })?
            }
            "--trace-limit" => {
                let s = value("--trace-limit")?;
                let secs = s.parse::<u64>().ok().filter(|s| (1..=86_400).contains(s));
                let secs = secs.ok_or_else(|| {
                    usage(
                        format!("--trace-limit {s}"),
                        "is a whole number of seconds from 1 to 86400",
                        "--trace-limit 120",
                    )
                })?;
                p.trace_limit = Duration::from_secs(secs)
            }
            "--compare-with" => p.reference = Some(value("--compare-with")?),
            _ => p.model.push(a),
        }
    }
    Ok(p)
}

fn serve_args(args: Vec<String>) -> anyhow::Result<()> {
    let Parsed { host, port, allow_remote, queue, trace_limit, reference, model } = parsed(args)?;
    let env = crate::cli::Env { stdout_is_terminal: false, terminal_width: None, ..crate::cli::Env::read() };
    let warm = request_settings(&["Hello".to_string()], &model, &env, false)
        .map_err(|line| usage("serve", line, "see attn-trace serve --help"))?;
    let base = model.clone();
    let parse = Box::new(move |request: &[String]| {
        let env = crate::cli::Env { stdout_is_terminal: false, terminal_width: None, ..crate::cli::Env::read() };
        request_settings(request, &base, &env, true)
    });
    let compare = match &reference {
        Some(b) => Some(compare_hook(&model, b)?),
        None => None,
    };
    let hooks = crate::serve::Hooks { parse, compare, reference, error_line, model_args: model };
    let opts = crate::serve::Options { host, port, allow_remote, queue, trace_limit, warm };
    crate::serve::run(opts, hooks)
}

/// `--compare-with B`: a request's options as `attn-trace compare … --model A --model B`
/// (A the server's model) run for its `--html` page, checked now (both models are opened by a
/// first comparison, before the server listens).
fn compare_hook(model: &[String], b: &str) -> anyhow::Result<Box<crate::serve::Compare>> {
    let (model, b) = (model.to_vec(), b.to_string());
    let hook = move |request: &[String]| -> Result<crate::serve::Work, String> {
        refused_in_request(crate::compare::cli::command(), request)?;
        let full = ["attn-trace compare".to_string()]
            .into_iter()
            .chain(model.iter().cloned())
            .chain(["--model".to_string(), b.clone()])
            .chain(request.iter().cloned())
            .chain((!request.iter().any(|a| a == "--quiet")).then(|| "--quiet".to_string()));
        let parsed = crate::compare::cli::parse(full.map(OsString::from))
            .map_err(|e| clap_line(&e, "attn-trace compare --help"))?;
        parsed.check().map_err(|e| error_line(&e))?;
        Ok(Box::new(move || {
            let env = crate::cli::Env { stdout_is_terminal: false, terminal_width: None, ..crate::cli::Env::read() };
            let c = crate::compare::compute(&parsed, &env)?;
            let mut page = Vec::new();
            crate::compare::draw::html(&c.comparison, parsed.cli.top, &c.output, &mut page)?;
            Ok(page)
        }) as crate::serve::Work)
    };
    let warm =
        hook(&["Hello".to_string()]).map_err(|line| usage("--compare-with", line, "see attn-trace serve --help"))?;
    warm().map_err(|e| usage("--compare-with", error_line(&e), "see docs/COMPARE.md for the pairs compare takes"))?;
    Ok(Box::new(hook))
}

/// A request's options as settings: `model` (the server's flags) and `--format json` added,
/// parsed by the command's own clap definition; `Err` is the command's one-line message.
/// `checked`: a client's request, whose flags [`not_in_a_request`] are refused.
fn request_settings(
    request: &[String],
    model: &[String],
    env: &crate::cli::Env,
    checked: bool,
) -> Result<crate::settings::Settings, String> {
    if checked {
        refused_in_request(super::main_command(), request)?;
    }
    let fixed = ["attn-trace"].into_iter().map(String::from).chain(model.iter().cloned());
    let full: Vec<String> = fixed.chain(["--format".into(), "json".into()]).chain(request.iter().cloned()).collect();
    let cli =
        <crate::cli::Cli as clap::Parser>::try_parse_from(full).map_err(|e| clap_line(&e, "attn-trace --help"))?;
    crate::settings::Settings::from_cli(cli, env).map_err(|e| error_line(&e))
}

/// Flags of the main command that a request may not give, besides those that take a file or a
/// folder (value FILE, DIR) and those that define the model (the "Model", "Decoder parts",
/// "Parameters" and "Textbook attention" flags of the toy model): the answer's format and the
/// server's memory cap are the server's, and these print something else than a trace.
const ALSO_REFUSED: [&str; 8] =
    ["model", "format", "max_memory", "timings", "completions", "man", "check", "check_tol"];
/// Help headings whose flags describe the toy model itself.
const MODEL_HEADINGS: [&str; 4] = ["Model", "Decoder parts", "Parameters", "Textbook attention"];

/// Whether a request may not give `arg`: it names a file or folder to read or write (anything
/// but the prompt's text, even `/dev/zero` or `/proc/self/environ`), would change the model
/// the server holds, or the answer's format.
fn not_in_a_request(arg: &clap::Arg) -> bool {
    let id = arg.get_id().as_str();
    let names_a_file =
        arg.get_value_names().is_some_and(|names| names.iter().any(|n| n.contains("FILE") || n.contains("DIR")));
    let makes_the_model = arg.get_help_heading().is_some_and(|h| MODEL_HEADINGS.contains(&h));
    names_a_file || makes_the_model || ALSO_REFUSED.contains(&id)
}

/// The first flag of `request` that [`not_in_a_request`] refuses under `cmd`'s definition
/// (or `-`, standard input, as the sentence), as a one-line error. clap reads the request
/// alone, going on past errors: the full command line's parse reports those.
fn refused_in_request(cmd: clap::Command, request: &[String]) -> Result<(), String> {
    let refusal = |flag: &str| {
        format!(
            "{flag}: not in a request to the server (the model is fixed at start, a request names no file and gets JSON; see docs/SERVE.md)"
        )
    };
    let args = std::iter::once("attn-trace".to_string()).chain(request.iter().cloned());
    let matches = match cmd.clone().ignore_errors(true).try_get_matches_from(args) {
        Ok(m) => m,
        // What survives `ignore_errors`: --help and --version, which print and exit.
        Err(_) => {
            let asked = request.iter().find(|a| matches!(a.as_str(), "--help" | "-h" | "--version" | "-V"));
            return Err(refusal(asked.map_or("--help", String::as_str)));
        }
    };
    let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
    if let Some(arg) = cmd.get_arguments().find(|a| not_in_a_request(a) && given(a.get_id().as_str())) {
        return Err(refusal(&format!("--{}", arg.get_long().unwrap_or(arg.get_id().as_str()))));
    }
    if given("sentence") && matches.get_raw("sentence").into_iter().flatten().any(|s| s == "-") {
        return Err(refusal("-"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(args: &[&str]) -> bool {
        let request: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        refused_in_request(crate::command::main_command(), &request).is_err()
    }

    #[test]
    fn every_flag_naming_a_file_or_the_model_is_refused_and_the_rest_are_not() {
        for flag in [
            "--steer",
            "--chat-template",
            "--html",
            "--svg",
            "--save-trace",
            "--save-weights",
            "--weights",
            "--vocab",
            "--input",
            "--file",
            "--batch",
            "--model",
            "--format",
            "--max-memory",
            "--layers",
            "--d-model",
            "--heads",
            "--max-len",
            "--seed",
            "--lm-head",
            "--init",
            "--completions",
        ] {
            assert!(refused(&["x", flag, "v"]), "{flag} is refused");
            assert!(refused(&["x", &format!("{flag}=v")]), "{flag}=v is refused");
        }
        for flags in [&["--causal"][..], &["--gated"], &["--man"], &["--timings"], &["--help"], &["-V"], &["-"]] {
            assert!(refused(&[&["x"][..], flags].concat()) || flags == ["-"] && refused(flags), "{flags:?}");
        }
        for fine in [
            &["x", "--top-k", "3"][..],
            &["x", "--generate", "5", "--sample", "--temperature", "0.5"],
            &["x", "--patch", "/etc/passwd"],
            &["x", "--chat", "--system", "--html"],
            &["x", "--ablate", "0.1", "--steps", "weights"],
            &["@/etc/passwd"],
            &["x", "--", "--html"],
        ] {
            assert!(!refused(fine), "{fine:?} is a request's own");
        }
    }
}
