//! `attn_trace._native`: attn-trace's library as a Python extension module (PyO3, abi3).
//!
//! The Python package (`python/attn_trace/`) turns keyword arguments into the command line
//! they stand for; this module parses that command line with the command's own clap
//! definition and checks it with `Settings::from_cli`, so a keyword argument means exactly
//! what its flag means and is refused with the same one-line message. It then runs the
//! library's pipeline (`attn_trace::finish`) with the GIL released. Nothing here computes:
//! it converts values at the border (arrays in, arrays out) and maps errors to
//! `attn_trace.Error`.

mod run;
mod traced;

use attn_trace::cli::{Cli, Env};
use attn_trace::settings::{ModelChoice, Settings, Text, Weights};
use clap::{CommandFactory, Parser};
use numpy::PyReadonlyArrayDyn;
use pyo3::prelude::*;
use std::ffi::OsString;
use std::sync::Arc;
use traced::Trace;

/// `attn_trace.Error(message, code)`: `message` is the command's one-line error (without the
/// `attn-trace: ` prefix) and `code` its exit code (2 for a usage error, 1 otherwise).
pub(crate) fn error(py: Python<'_>, message: String, code: u8) -> PyErr {
    raised(py, "Error", message, code)
}

/// An instance of the package's exception class `class` (`Error` or `ArgumentError`).
fn raised(py: Python<'_>, class: &str, message: String, code: u8) -> PyErr {
    let made =
        py.import("attn_trace").and_then(|m| m.getattr(class)).and_then(|cls| cls.call1((message.clone(), code)));
    match made {
        Ok(e) => PyErr::from_value(e),
        // The package is what imports this module, so this is only reached when it is broken.
        Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
    }
}

/// The parser's refusal of a command line, as the command prints it. A flag it does not know
/// is a keyword that is no option: `attn_trace.ArgumentError`, also a TypeError, as Python's
/// own unexpected keyword arguments are.
fn refused(py: Python<'_>, e: &clap::Error, help: &str) -> PyErr {
    use clap::error::ErrorKind;
    let line = attn_trace::command::clap_line(e, help);
    match e.kind() {
        ErrorKind::UnknownArgument => raised(py, "ArgumentError", line, 2),
        // The package never asks for help or the version (it refuses help= and version=).
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            raised(py, "ArgumentError", format!("--help, --version: not options here (see {help})"), 2)
        }
        _ => error(py, line, 2),
    }
}

/// A library error as `attn_trace.Error`, with the message the command prints.
pub(crate) fn fail(py: Python<'_>, e: anyhow::Error) -> PyErr {
    error(py, attn_trace::command::error_line(&e), attn_trace::error::exit_code(&e))
}

/// The `attn-trace` command of the wheel: the binary's `main`, with the GIL released.
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<OsString>) -> u8 {
    let code = py.detach(|| attn_trace::command::main(argv));
    // No Rust runtime flushes a library's stdout at exit: the interpreter's exit would lose
    // the last unflushed line.
    use std::io::Write;
    let _ = std::io::stdout().flush();
    code
}

/// Every long option of the command as (keyword, kind): `flag` (on when given), `value`
/// (one value), `append` (repeatable) or `pair` (two values). From clap's own definition, so
/// the keyword arguments never drift from the flags.
#[pyfunction]
fn options() -> Vec<(String, &'static str)> {
    kinds(&Cli::command())
}

/// `attn-trace compare`'s options, as [`options`] (the flags it hides, which it refuses, left
/// out).
#[pyfunction]
fn compare_options() -> Vec<(String, &'static str)> {
    kinds(&attn_trace::compare::cli::command())
}

fn kinds(cmd: &clap::Command) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let Some(long) = arg.get_long() else { continue };
        // A two-value option (`--metric A B`) is a pair before anything else: clap gives its
        // `Vec` the action Append, which would make it a list of single-value flags.
        let kind = match arg.get_action() {
            clap::ArgAction::SetTrue => "flag",
            _ if arg.get_num_args().is_some_and(|n| n.min_values() == 2) => "pair",
            clap::ArgAction::Append => "append",
            _ => "value",
        };
        out.push((long.replace('-', "_"), kind));
    }
    out
}

/// A named array of the `weights=` dict, as the package hands it over (float32, C order).
type GivenArray<'py> = (String, PyReadonlyArrayDyn<'py, f32>);

/// `attn_trace.trace`: `argv` is the command line the keyword arguments stand for (the
/// package builds it; `--format json` included), `weights` the arrays of a `weights=` dict.
/// Arguments are OsStrings, as the command's are: a file name Python holds with surrogate
/// escapes (undecodable bytes) names the same file.
#[pyfunction]
#[pyo3(signature = (argv, weights=None))]
fn trace(py: Python<'_>, argv: Vec<OsString>, weights: Option<Vec<GivenArray<'_>>>) -> PyResult<Trace> {
    let cli = Cli::try_parse_from(&argv).map_err(|e| refused(py, &e, "attn-trace --help"))?;
    // Colour and the terminal do not apply: the trace is returned, not printed.
    let env = Env { no_color: true, stdout_is_terminal: false, truecolor: false, ..Env::read() };
    let mut settings = Settings::from_cli(cli, &env).map_err(|e| fail(py, e))?;
    // A sentence argument is the sentence: "-" does not read standard input here.
    if settings.text == Text::Stdin {
        settings.text = Text::Arg("-".to_string());
    }
    if let (Some(given), ModelChoice::Toy(toy)) = (weights, &mut settings.model) {
        let named = given
            .into_iter()
            .map(|(name, a)| {
                let a = a.as_array();
                (name, (a.shape().to_vec(), a.iter().copied().collect()))
            })
            .collect();
        toy.weights = Some(Weights::Given(Arc::new(named)));
    }
    let done = run::stoppable(py, || attn_trace::finish(&settings, &|_| {}, true))?;
    Trace::new(py, done, settings)
}

/// `attn_trace.diff`: each side is a path or a Trace; `flags` are `--atol`/`--rtol` as the
/// package spells them, read by `attn-trace diff`'s own parser. Returns the JSON report and
/// whether every shared step agrees within tolerance.
#[pyfunction]
fn diff(py: Python<'_>, a: Bound<'_, PyAny>, b: Bound<'_, PyAny>, flags: Vec<OsString>) -> PyResult<(String, bool)> {
    use attn_trace::diff;
    use clap::FromArgMatches;
    // A side given as a Trace stands in as "-"; the paths follow "--", as a path may start with "-".
    let path = |x: &Bound<'_, PyAny>| x.extract::<OsString>().unwrap_or_else(|_| "-".into());
    let args = ["attn-trace diff".into()].into_iter().chain(flags).chain(["--".into(), path(&a), path(&b)]);
    let parsed =
        diff::cli::DiffCli::command().try_get_matches_from(args).and_then(|m| diff::cli::DiffCli::from_arg_matches(&m));
    let cli = parsed.map_err(|e| refused(py, &e, "attn-trace diff --help"))?;
    let tol = diff::tolerance(cli.atol, cli.rtol).map_err(|e| fail(py, e))?;
    let side = |x: &Bound<'_, PyAny>, file: &std::path::Path, label: &str| -> PyResult<diff::load::Loaded> {
        let loaded = match x.extract::<PyRef<'_, Trace>>() {
            Ok(t) => diff::load::parse(t.json().as_bytes(), label),
            Err(_) => diff::load::load(file),
        };
        loaded.map_err(|e| fail(py, e))
    };
    let (a, b) = (side(&a, &cli.a, "trace a")?, side(&b, &cli.b, "trace b")?);
    let mut out = Vec::new();
    let ok = diff::write_report(&a, &b, tol, diff::cli::DiffFormat::Json, &mut out).map_err(|e| fail(py, e))?;
    Ok((String::from_utf8_lossy(&out).into_owned(), ok))
}

/// `attn_trace.compare`: `argv` is the `attn-trace compare` command line the keyword
/// arguments stand for (the package builds it, `--format json --quiet` included); returns
/// the JSON report and whether every common step is within the threshold. `--html` and
/// `--svg` are written as the command writes them.
#[pyfunction]
fn compare(py: Python<'_>, argv: Vec<OsString>) -> PyResult<(String, bool)> {
    use attn_trace::compare as cmp;
    let parsed = cmp::cli::parse(argv).map_err(|e| refused(py, &e, "attn-trace compare --help"))?;
    // A main-command flag compare refuses (`focus=`) is a keyword that is no option here:
    // the command's message, as ArgumentError (a TypeError too), as for an unknown one.
    if let (false, Err(e)) = (parsed.refused.is_empty(), parsed.check()) {
        let line = attn_trace::command::error_line(&e);
        return Err(raised(py, "ArgumentError", line, attn_trace::error::exit_code(&e)));
    }
    let env = Env { no_color: true, stdout_is_terminal: false, truecolor: false, ..Env::read() };
    let mut out = Vec::new();
    let ok = run::stoppable(py, || cmp::run(parsed, &env, &mut out))?;
    Ok((String::from_utf8_lossy(&out).into_owned(), ok))
}

/// The step ids of the catalogue and the JSON Schema of the trace document.
#[pyfunction]
fn schema() -> PyResult<String> {
    let mut out = Vec::new();
    attn_trace::trace::schema::write(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add_function(wrap_pyfunction!(options, m)?)?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    m.add_function(wrap_pyfunction!(diff, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(compare_options, m)?)?;
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    m.add_class::<Trace>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
