//! The memory cap: an estimate of every tensor a run allocates, checked before any is made,
//! so absurd sizes get an error instead of an out-of-memory kill.

use crate::config::{ModelConfig, RunConfig};
use crate::error::usage;
use crate::trace::Selection;
use anyhow::Result;

mod estimate;
pub use estimate::produced;
mod footprint;
pub mod output;
pub use estimate::{estimate, recorded};
mod size;
pub use footprint::need;
pub use size::{human, human_f, parse_size};

/// Parses sizes such as `2GiB`, `512MiB`, `100MB`, `65536` (bytes).
/// `--max-memory`: a size, or `auto` (the default): three quarters of the memory available to
/// this process (what the machine, its cgroup and `ulimit -v` leave; `cli::Env`), so a 7 B
/// checkpoint that runs in 2.4 GiB is not refused on a 24 GiB machine, while a quarter stays
/// for everything else; 2 GiB where the available memory is unknown. The available memory
/// stays a second cap either way ([`check_bytes`]).
pub fn max_memory(arg: &str, available: Option<u128>) -> Result<u128> {
    if arg.trim().eq_ignore_ascii_case("auto") {
        return Ok(available.map_or(2 << 30, |free| free / 4 * 3));
    }
    parse_size(arg)
}

/// Refuses a run of `n` positions that [`check_run`] would refuse whatever the model, as soon as
/// a flag names `n` (`--pad-to`) and before anything sized by it exists: padding to 10⁹
/// tokens would otherwise make 10⁹ labels (24 GB) before the model's estimate is known.
/// Every model needs at least one head's `[n, n]` scores and weights, twice over as
/// [`estimate`] counts them: 32·n² bytes.
pub fn check_positions(flag: &str, n: usize, cap: u128, available: Option<u128>) -> Result<()> {
    let need = 32.0 * (n as f64) * (n as f64);
    let limit = available.map_or(cap, |free| free.min(cap));
    if need <= limit as f64 {
        return Ok(());
    }
    let why = if limit < cap { "the memory available to this process" } else { "the cap (--max-memory)" };
    Err(usage(
        flag,
        format!(
            "{n} positions need at least {} for their attention scores alone, above {why} of {}",
            human_f(need),
            human(limit)
        ),
        format!("pass a smaller {flag}, or raise the cap with --max-memory"),
    ))
}

/// Refuses a run of `s` whose peak memory ([`need`]) would be more than the cap
/// (`--max-memory`) or than the machine has available: an error now instead of an
/// out-of-memory abort part way, or minutes of work before it. `record` as the plan says
/// (`Plan::record`, `Plan::streamed`). In a batch, the results already held for the sentences
/// before it (`s.held`) count with this run's, so the whole batch stays under the caps.
/// Returns the bytes checked: the estimate `--timings` prints beside the measured peak.
pub fn check_run(
    model: (&ModelConfig, &RunConfig),
    n: usize,
    record: (&Selection, bool),
    s: &super::Settings,
) -> Result<f64> {
    let need = need(model, n, record, s);
    if s.held == 0 {
        check_bytes(need, "", s.max_memory, s.memory_available)?;
        return Ok(need);
    }
    let total = need + s.held as f64;
    let limit = s.memory_available.map_or(s.max_memory, |free| free.min(s.max_memory));
    if total <= limit as f64 {
        return Ok(total);
    }
    let why = if limit < s.max_memory { "the memory available to this process" } else { "the cap" };
    Err(usage(
        "sizes",
        format!(
            "this run needs about {} (its own, and {} of results the batch holds for the sentences before it), \
             above {why} of {}",
            human_f(total),
            human(s.held),
            human(limit)
        ),
        "split the batch into smaller files, or raise the cap with --max-memory",
    ))
}

/// The estimate of a run of `n` positions with every layer's parameters in f32 at once rather
/// than a layer at a time, when it fits both caps (a generation, or a server answering many
/// requests, then converts the layers once instead of once per pass).
pub fn whole_model_fits(
    (cfg, run): (&ModelConfig, &RunConfig),
    n: usize,
    record: (&Selection, bool),
    s: &super::Settings,
) -> Option<f64> {
    check_run((cfg, &run.whole()), n, record, s).ok()
}

/// Refuses `need` bytes (what they hold: `what`, or nothing for a run's own) above the cap or
/// the available memory.
pub fn check_bytes(need: f64, what: &str, cap: u128, available: Option<u128>) -> Result<()> {
    if need > cap as f64 {
        return Err(usage(
            "sizes",
            format!("this run needs about {}{}, above the cap of {}", human_f(need), space(what), human(cap)),
            "use smaller dimensions or a shorter sentence, or raise the cap with --max-memory",
        ));
    }
    if let Some(free) = available.filter(|&free| need > free as f64) {
        return Err(usage(
            "sizes",
            format!(
                "this run needs about {}{}, more than the {} available to this process",
                human_f(need),
                space(what),
                human(free)
            ),
            "use smaller dimensions or a shorter sentence, or free memory",
        ));
    }
    Ok(())
}

fn space(what: &str) -> String {
    if what.is_empty() {
        String::new()
    } else {
        format!(" {what}")
    }
}

#[cfg(test)]
mod tests;
