//! The command as a function: arguments in, exit code out (0 ok, 1 failure, 2 usage). The
//! binary (`main.rs`) and the Python wheel's `attn-trace` command both call [`main`], so the
//! two are one program; [`error_line`] and [`clap_line`] are also the Python API's messages.

mod definition;
mod exits;
mod serve;
pub use definition::{full_command, main_command, man};
use exits::{clap_exit, report};
pub use exits::{clap_line, error_line};

use crate::error::exit;
use std::ffi::OsString;

/// Process-wide settings for the command running as a process of its own: the binary calls
/// this first, before any other thread exists, and so does `cargo bench --bench matmul`, to
/// measure what the command runs. A library must not impose them on its host, so the Python
/// module does not call it.
pub fn tune_process() {
    crate::output::remove_temporaries_on_signal();
    reuse_freed_memory();
    spin_less();
    count_cores_once();
}

/// glibc gives each allocation above 32 MiB (and any large one made on another thread, whose
/// arena cannot grow that far) a fresh mapping of its own and unmaps it when freed, so every
/// layer's f32 weights were faulted in and zeroed by the kernel anew: a 1 B model's 4 GiB
/// cost more than a second of system time. Served from one heap instead, a layer reuses the
/// memory the previous one freed. Above [`OWN_MAPPING`] an allocation still gets its own
/// mapping, returned when freed: the [heads, n, n] tensors of a long input (600 MiB each at
/// 4,096 tokens) would otherwise leave holes that raised that run's peak by a fifth.
fn reuse_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters, before any other thread exists. A
    // failure leaves glibc's defaults, which are correct, only slower.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, OWN_MAPPING);
        libc::mallopt(libc::M_TRIM_THRESHOLD, OWN_MAPPING);
    }
}

/// candle's worker threads spin 25,000 times waiting for the next element-wise operation
/// before they sleep. On a machine with as many cores as threads that spinning takes the core
/// the layer-reading thread needs: with 200, the GPT-2 and 1 B Llama benchmark traces are 8 to
/// 15% faster (BENCHMARKS.md). A value the user sets is kept.
fn spin_less() {
    const CANDLE_SPIN: &str = "CANDLE_BARRIER_POOL_SPIN_LIMIT";
    if std::env::var_os(CANDLE_SPIN).is_none() {
        // Before any other thread exists, so nothing reads the environment concurrently.
        std::env::set_var(CANDLE_SPIN, "200");
    }
}

/// candle asks how many threads to use before every matrix product, and unless
/// `RAYON_NUM_THREADS` is set the answer (the physical core count, from the num_cpus crate)
/// reads `/proc/cpuinfo` each time: eight opens and reads per sentence of the default toy
/// model, 160,000 for a batch of 20,000 short lines (issue 27). Asked once here and set as
/// `RAYON_NUM_THREADS`, it is the same number, read from the environment. rayon's own pool,
/// which candle's softmax of large tensors uses, is then that size too (one thread per
/// physical core rather than per hardware thread). A value the user sets is kept.
fn count_cores_once() {
    const RAYON_THREADS: &str = "RAYON_NUM_THREADS";
    if std::env::var_os(RAYON_THREADS).is_none() {
        let threads = candle_core::utils::get_num_threads();
        // Before any other thread exists, so nothing reads the environment concurrently.
        std::env::set_var(RAYON_THREADS, threads.to_string());
    }
}

/// The size from which an allocation gets a mapping of its own (256 MiB: above a 7B model's
/// largest layer weight, 180 MiB).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const OWN_MAPPING: i32 = 256 << 20;

/// Runs one command line (`args[0]` is the program's name) and returns its exit code.
pub fn main(args: Vec<OsString>) -> u8 {
    // `diff` and `schema` are subcommands in all but clap's eyes: the main command's first
    // positional argument is the sentence, so the first word picks them here, and a sentence
    // that is literally "diff" or "schema" is traced with `attn-trace -- diff`.
    match args.get(1).and_then(|a| a.to_str()) {
        Some("diff") => return diff(&args[2..]),
        Some("compare") => return compare(&args[2..]),
        Some("schema") => return schema(&args[2..]),
        Some("serve") => return serve::serve(&args[2..]),
        Some("help") => return help(&args),
        _ => {}
    }
    let cli = match parse(&args) {
        Ok(cli) => cli,
        // The help lists the sub-commands, which only the full definition knows.
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {
            return clap_exit(full_command().try_get_matches_from(&args).err().unwrap_or(e), "attn-trace --help")
        }
        Err(e) => return clap_exit(e, "attn-trace --help"),
    };
    let env = crate::cli::Env::read();
    crate::model::kernels::pool::on_a_worker(|| report(run(cli, &env, &mut std::io::stdout().lock()).map(|()| true)))
}

/// Runs one command line: check it, compute the trace, write it to `out` (the run itself is
/// `run::command`'s; here, what only the command line asks for).
pub fn run(cli: crate::cli::Cli, env: &crate::cli::Env, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    // Completions and the man page come from the clap definition itself, so they never drift.
    if let Some(shell) = cli.completions {
        // Into memory first: clap_complete panics when its writer fails (`> /dev/full`).
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut full_command(), "attn-trace", &mut script);
        out.write_all(&script)?;
        return Ok(());
    }
    if cli.man {
        return Ok(man(out)?);
    }
    let clock = crate::output::Clock::new(cli.timings);
    let settings = crate::settings::Settings::from_cli(cli, env)?;
    crate::run::command(&settings, clock, out)
}

/// The main command's line parsed by [`main_command`], without the sub-commands: a sentence
/// that is literally "diff" after other arguments is still a sentence.
fn parse(args: &[OsString]) -> Result<crate::cli::Cli, clap::Error> {
    use clap::FromArgMatches;
    crate::cli::Cli::from_arg_matches(&main_command().try_get_matches_from(args)?)
}

/// `attn-trace help [COMMAND]`, as in cargo and git: the main command's help, or the
/// sub-command's; an unknown one is a usage error. clap's help sub-command always ends in an
/// `Err`, which is the help (printed, exit 0) or the usage error.
fn help(args: &[OsString]) -> u8 {
    full_command().try_get_matches_from(args).err().map_or(exit::OK, |e| clap_exit(e, "attn-trace help"))
}

/// `attn-trace diff A B`: exit 0 within tolerance, 1 outside it, 2 for unusable input.
fn diff(rest: &[OsString]) -> u8 {
    use crate::diff::cli::DiffCli;
    use clap::{CommandFactory, FromArgMatches};
    let args = std::iter::once("attn-trace diff".into()).chain(rest.iter().cloned());
    let matches = DiffCli::command().term_width(crate::cli::help_width()).try_get_matches_from(args);
    let cli = match matches.and_then(|m| DiffCli::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e, "attn-trace diff --help"),
    };
    report(crate::diff::run(cli, &mut std::io::stdout().lock()))
}

/// `attn-trace compare "prompt" --model A --model B`: exit 0 within the threshold, 1 past it,
/// 2 for input that cannot be compared.
fn compare(rest: &[OsString]) -> u8 {
    let args = std::iter::once("attn-trace compare".into()).chain(rest.iter().cloned());
    let parsed = match crate::compare::cli::parse(args) {
        Ok(parsed) => parsed,
        Err(e) => return clap_exit(e, "attn-trace compare --help"),
    };
    let env = crate::cli::Env::read();
    crate::model::kernels::pool::on_a_worker(|| {
        report(crate::compare::run(parsed, &env, &mut std::io::stdout().lock()))
    })
}

/// `attn-trace schema`: the JSON Schema of the trace document.
fn schema(rest: &[OsString]) -> u8 {
    use clap::CommandFactory;
    let args = std::iter::once("attn-trace schema".into()).chain(rest.iter().cloned());
    let cmd = crate::trace::schema::SchemaCli::command().term_width(crate::cli::help_width());
    if let Err(e) = cmd.try_get_matches_from(args) {
        return clap_exit(e, "attn-trace schema --help");
    }
    let written = crate::trace::schema::write(&mut std::io::stdout().lock());
    report(written.map(|()| true).map_err(|e| anyhow::Error::new(e).context("schema")))
}
