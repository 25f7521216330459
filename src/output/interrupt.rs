//! Temporary files removed when the command is interrupted. A run's files wait beside their
//! targets until the run succeeds ([`super::Pending`]); Ctrl-C (SIGINT), SIGTERM or SIGHUP in
//! that time would otherwise leave them behind. The command installs handlers that remove
//! them and then end the process as the signal would have ([`remove_temporaries_on_signal`]);
//! a library's host (the Python module) keeps its own signal handling, and its temporary
//! files are removed by `Drop` when a run fails.
//!
//! A signal handler may only do async-signal-safe things: here, an atomic swap per slot and
//! `unlink`. Each slot owns a leaked C string; whoever swaps it out (the handler or
//! [`release`]) owns the string from then on, so nothing is freed twice or read after free.

use std::ffi::{c_char, CString};
use std::path::Path;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

/// More files than one run writes at once (`--html`, `--svg`, `--save-trace`,
/// `--save-weights`); a file without a slot is still removed on an ordinary failure.
const SLOTS: usize = 16;

static TEMPORARIES: [AtomicPtr<c_char>; SLOTS] = [const { AtomicPtr::new(null_mut()) }; SLOTS];

/// Remembers `path` for the signal handler; its slot, or None when all are taken.
pub(super) fn hold(path: &Path) -> Option<usize> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes()).ok()?.into_raw();
    for (i, slot) in TEMPORARIES.iter().enumerate() {
        if slot.compare_exchange(null_mut(), c, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            return Some(i);
        }
    }
    // SAFETY: `c` came from `into_raw` above and was never shared.
    drop(unsafe { CString::from_raw(c) });
    None
}

/// Forgets slot `i` (its file was renamed or removed).
pub(super) fn release(i: usize) {
    let c = TEMPORARIES[i].swap(null_mut(), Ordering::SeqCst);
    if !c.is_null() {
        // SAFETY: a non-null slot holds a string from `hold`'s `into_raw`, and the swap made
        // this the only owner.
        drop(unsafe { CString::from_raw(c) });
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    for slot in &TEMPORARIES {
        let c = slot.swap(null_mut(), Ordering::SeqCst);
        if !c.is_null() {
            // SAFETY: unlink is async-signal-safe; `c` is a NUL-terminated path this handler
            // now owns (leaked: the process ends next).
            unsafe { libc::unlink(c) };
        }
    }
    // SAFETY: restoring the default action and raising again ends the process as the signal
    // would have (exit status 128 + signal for the shell).
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP (the command only; see the module's
/// comment). A signal the process ignores (started under `nohup`) stays ignored.
pub fn remove_temporaries_on_signal() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler does only async-signal-safe work (above).
        unsafe {
            let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            if libc::signal(signal, handler) == libc::SIG_IGN {
                libc::signal(signal, libc::SIG_IGN);
            }
        }
    }
}
