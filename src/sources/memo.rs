//! What a batch reads once: within a [`Scope`] (a batch holds one while it traces its
//! sentences), a value loaded from a file is kept under its key and handed out again as a
//! clone, so a model's tokenizer is parsed once per batch instead of once per sentence
//! (issue 27: a batch of 100,000 lines opened and parsed the same files 100,000 times).
//! Outside a scope nothing is kept: a single run, or the Python API, reads as before, and
//! a file changed between two runs is read anew.

use anyhow::Result;
use std::any::Any;
use std::cell::RefCell;
use std::collections::BTreeMap;

thread_local! {
    static KEPT: RefCell<Option<BTreeMap<String, Box<dyn Any>>>> = const { RefCell::new(None) };
}

/// While it lives, [`kept`] keeps what it loads (on this thread).
pub struct Scope(());

impl Scope {
    pub fn new() -> Scope {
        KEPT.with(|k| *k.borrow_mut() = Some(BTreeMap::new()));
        MAKE_LAYERS.with(|m| m.set(false));
        Scope(())
    }

    /// A scope whose kept parameters have every layer converted once, where the whole model
    /// fits the run's memory caps (`attn-trace serve`: every request runs every layer).
    pub fn making_layers() -> Scope {
        let scope = Scope::new();
        MAKE_LAYERS.with(|m| m.set(true));
        scope
    }
}

thread_local! {
    static MAKE_LAYERS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the open scope keeps parameters with their layers made ([`Scope::making_layers`]).
pub fn makes_layers() -> bool {
    KEPT.with(|k| k.borrow().is_some()) && MAKE_LAYERS.with(|m| m.get())
}

impl Default for Scope {
    fn default() -> Self {
        Scope::new()
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        KEPT.with(|k| *k.borrow_mut() = None);
        MAKE_LAYERS.with(|m| m.set(false));
    }
}

/// The value under `key` (e.g. a file's path and what it is read as): kept from an earlier
/// call in this scope, else `load`ed (and kept, if a scope is open). Errors are not kept.
pub fn kept<T: Clone + 'static>(key: &str, load: impl FnOnce() -> Result<T>) -> Result<T> {
    let hit = KEPT.with(|k| k.borrow().as_ref().and_then(|m| m.get(key)?.downcast_ref::<T>().cloned()));
    if let Some(v) = hit {
        return Ok(v);
    }
    let v = load()?;
    KEPT.with(|k| {
        if let Some(m) = k.borrow_mut().as_mut() {
            m.insert(key.to_string(), Box::new(v.clone()));
        }
    });
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_scope_loads_each_key_once_and_nothing_is_kept_outside_one() {
        let loads = Cell::new(0);
        let load = || -> Result<String> {
            loads.set(loads.get() + 1);
            Ok("tokenizer".to_string())
        };
        kept("a", load).unwrap();
        kept("a", load).unwrap();
        assert_eq!(loads.get(), 2, "no scope: every call loads");
        {
            let _scope = Scope::new();
            for _ in 0..5 {
                assert_eq!(kept("a", load).unwrap(), "tokenizer");
            }
            kept("b", load).unwrap();
            assert_eq!(loads.get(), 4, "one load per key in a scope");
            assert!(kept::<String>("c", || anyhow::bail!("unreadable")).is_err());
            assert!(kept("c", load).is_ok(), "an error is not kept");
        }
        kept("a", load).unwrap();
        assert_eq!(loads.get(), 6, "the scope's values are dropped with it");
    }
}
