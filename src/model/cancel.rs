//! Stopping a run early: `attn-trace serve` stops the trace of a client that has gone, the
//! Python module a run interrupted by Ctrl-C. While a [`Watch`] lives, [`check`] — called
//! before each layer by `stack.rs` and by a comparison's `lockstep.rs`, the places the model
//! looks — fails with [`Cancelled`] once the watched flag is set. The flag is held per
//! thread, as `sources::memo` holds a batch's kept values: it reaches every pass of a run (a
//! patching sweep's runs, a generation's decode steps, steering's measuring pass) without each
//! caller handing it on, and the layers run on the thread that started the run (a lazily read
//! checkpoint reads its next layer on another, but computes on this one). Outside a watch
//! (the command's runs), nothing is checked. The model never prints: whoever set
//! the flag says what happened.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

thread_local! {
    static WATCHED: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// While it lives, runs on this thread stop at the next layer once `flag` is set. Watches
/// nest: a pool's worker waiting inside one run may take up another caller's run (rayon
/// steals work), whose watch is its own until it ends, and the first is back after.
pub struct Watch(Option<Arc<AtomicBool>>);

impl Watch {
    pub fn new(flag: Arc<AtomicBool>) -> Watch {
        Watch(WATCHED.with(|w| w.borrow_mut().replace(flag)))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let outer = self.0.take();
        WATCHED.with(|w| *w.borrow_mut() = outer);
    }
}

/// The error of a run stopped by its watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the run was cancelled")
    }
}

impl std::error::Error for Cancelled {}

/// `Err(Cancelled)` when this thread's watched flag is set.
pub fn check() -> anyhow::Result<()> {
    let set = WATCHED.with(|w| w.borrow().as_ref().is_some_and(|f| f.load(Ordering::Relaxed)));
    if set {
        return Err(Cancelled.into());
    }
    Ok(())
}

/// Whether `e` is (or wraps) a run's cancellation.
pub fn is_cancelled(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Cancelled>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_stops_a_run_once_its_flag_is_set_and_nothing_is_checked_outside_one() {
        let flag = Arc::new(AtomicBool::new(false));
        flag.store(true, Ordering::Relaxed);
        assert!(check().is_ok(), "no watch: not checked");
        let watch = Watch::new(Arc::new(AtomicBool::new(false)));
        assert!(check().is_ok());
        drop(watch);
        let _watch = Watch::new(Arc::clone(&flag));
        let e = check().unwrap_err();
        assert!(is_cancelled(&e) && is_cancelled(&e.context("layer 3")));
        assert!(!is_cancelled(&anyhow::anyhow!("another error")));
    }

    /// A run taken up inside another on the same thread has its own flag, and the outer
    /// run's is back when it ends.
    #[test]
    fn watches_nest() {
        let _outer = Watch::new(Arc::new(AtomicBool::new(true)));
        {
            let _inner = Watch::new(Arc::new(AtomicBool::new(false)));
            assert!(check().is_ok());
        }
        assert!(check().is_err());
    }
}
