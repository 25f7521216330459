//! What the `--check` references share: a decoder reference's answer, the thread a
//! reference runs on, and the refusal when it cannot load the checkpoint.

use crate::error::usage;
use anyhow::Result;
use candle_core::Tensor;

/// What a decoder reference returned: its name, the logits at the last position and, where
/// it exposes them, the final hidden states `[pos, d_model]`; `notes` say how it differs.
pub(crate) struct Theirs {
    pub name: String,
    pub logits: Tensor,
    pub hidden: Option<Tensor>,
    pub notes: Vec<(&'static str, String)>,
}

/// Runs `f` (a reference model) on a thread of its own with the main thread's 8 MiB stack:
/// candle's model code may panic on a checkpoint it does not expect (an `unwrap` in a
/// loader), and that ends the run as a one-line error instead of a crash.
pub(crate) fn on_thread<T: Send>(reference: &str, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        let worker = std::thread::Builder::new().stack_size(8 << 20).spawn_scoped(s, f)?;
        worker.join().map_err(|_| {
            usage("--check", format!("{reference} failed on this checkpoint (it panicked)"), "drop --check")
        })?
    })
}

/// Turns a candle error while the reference loads the checkpoint into the one-line refusal.
pub(crate) fn cannot_load(what: &str, reference: &str) -> impl Fn(candle_core::Error) -> anyhow::Error {
    let what = format!("--check ({what})");
    let reference = reference.to_string();
    move |e| {
        let why = e.to_string().lines().next().unwrap_or("").to_string();
        usage(&what, format!("{reference} cannot load the checkpoint: {why}"), "drop --check")
    }
}
