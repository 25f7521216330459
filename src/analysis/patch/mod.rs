//! Activation patching (as in TransformerLens's patching utilities): the clean input's
//! activations are copied into the corrupted input's run, one at a time (every layer × head's
//! context, or every layer × position of the residual stream), and each run's metric is
//! compared with the two unpatched runs: effect = (patched − corrupted) / (clean − corrupted),
//! 1 when the patch restores the clean behaviour and 0 when it changes nothing. When the
//! clean and corrupted metrics are equal that is 0/0: the effects are undefined (`None`),
//! and each row's own metric is still given.
//!
//! The metric: for a language model, the logit difference between two answer tokens at the
//! last position (logit[a] − logit[b]); for a masked-LM checkpoint given two answers, the same
//! difference at the clean sentence's `[MASK]` position, through the masked-LM head; for any
//! other encoder, the distance of the output from the clean output (‖out − clean‖ over every
//! position, so the clean metric is 0 and the effect is 1 − d/d_corrupted).
//!
//! Reuse: a patch at layer l changes nothing before layer l, so each patched run starts from
//! the corrupted run's residual stream at layer l's input (kept from the baseline run) and
//! computes only layers l…L−1: a sweep over L layers costs about half the full runs.//!
//! The files: `sweep.rs` (what a sweep is and reports), `runs.rs` (the runs a sweep makes and
//! their metric), `activation.rs` (the exact sweep, each patch a hook), `attribution.rs` (its
//! first-order estimate, taps as hooks) and `path.rs` (path patching, receivers as hooks).

pub mod activation;
pub mod attribution;
pub mod path;
pub mod runs;
pub mod sweep;

pub use sweep::{effect, Method, Metric, Row, Sweep, What};

use crate::config::ModelConfig;
use crate::hook::Registry;
use crate::params::receivers::Receivers;
use crate::params::{Input, Params};
use anyhow::Result;

/// The sweep `--patch` asks for: path patching into `path`'s receivers, else attribution
/// patching's estimate or the exact activation-patching sweep of `what`; `hooks` are the
/// run's interventions, applied in every run of the sweep.
pub fn any(
    cfg: &ModelConfig,
    params: &Params,
    (clean, corrupted): (&Input, &Input),
    (what, attribution, path): (What, bool, Option<&Receivers>),
    metric: &Metric,
    hooks: &Registry,
) -> Result<Sweep> {
    match path {
        Some(receivers) => path::sweep(cfg, params, (clean, corrupted), receivers, metric, hooks),
        None if attribution => attribution::sweep(cfg, params, (clean, corrupted), what, metric, hooks),
        None => activation::sweep(cfg, params, (clean, corrupted), what, metric, hooks),
    }
}
