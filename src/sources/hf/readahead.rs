//! Read-ahead for memory-mapped checkpoints: the kernel is asked to read a layer's bytes, and
//! the next layer's, in large requests before the conversion to f32 touches them. From a cold
//! page cache a layer otherwise arrives through page faults, one read-around window at a time,
//! each waited for by the thread that converts it; with the advice the disk is kept busy one
//! layer ahead while the forward pass computes. The bytes read, and so the numbers, are the
//! same; a warm page cache makes the advice a no-op.

use candle_core::safetensors::MmapedSafetensors;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// A tensor's layer: the name up to its first all-digit component, and that number
/// (`model.layers.7.mlp.up_proj.weight` is `("model.layers.", 7)`, GPT-2's `h.7.attn.c_attn.weight`
/// is `("h.", 7)`); `None` for a tensor outside the numbered stacks.
fn layer_of(name: &str) -> Option<(&str, usize)> {
    let mut at = 0;
    for part in name.split('.') {
        if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
            return Some((&name[..at], part.parse().ok()?));
        }
        at += part.len() + 1;
    }
    None
}

/// The tensors of each numbered layer, and the layer whose bytes were last asked for.
#[derive(Default)]
pub struct Ahead {
    layers: BTreeMap<(String, usize), Vec<String>>,
    last: Mutex<Option<(String, usize)>>,
}

impl Ahead {
    pub fn new(st: &MmapedSafetensors) -> Ahead {
        let mut layers: BTreeMap<(String, usize), Vec<String>> = BTreeMap::new();
        for (name, _) in st.tensors() {
            if let Some((stack, n)) = layer_of(&name) {
                layers.entry((stack.to_string(), n)).or_default().push(name);
            }
        }
        Ahead { layers, last: Mutex::new(None) }
    }

    /// `name` is about to be read: the first time a layer is entered, its bytes and the next
    /// layer's are asked for (a layer is read while the one before it computes, so the next
    /// one's bytes arrive while this one converts and computes).
    pub fn reading(&self, st: &MmapedSafetensors, name: &str) {
        let Some((stack, n)) = layer_of(name) else { return };
        {
            let Ok(mut last) = self.last.lock() else { return };
            if last.as_ref().is_some_and(|(s, m)| s == stack && *m == n) {
                return;
            }
            *last = Some((stack.to_string(), n));
        }
        for n in [n, n + 1] {
            for name in self.layers.get(&(stack.to_string(), n)).into_iter().flatten() {
                if let Ok(view) = st.get(name) {
                    will_need(view.data());
                }
            }
        }
    }
}

/// Largest piece of one advice: the kernel reads at most its read-ahead window (or the
/// device's optimal request) per call, so a larger range is asked for piece by piece.
const PIECE: usize = 8 << 20;

/// Asks the kernel to start reading the file pages under `bytes` (a slice of a read-only file
/// mapping) into the page cache, without waiting for them and without mapping them.
pub fn will_need(bytes: &[u8]) {
    #[cfg(unix)]
    {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let start = bytes.as_ptr() as usize;
        let (mut at, end) = (start / page * page, start + bytes.len());
        while at < end {
            let len = PIECE.min(end - at);
            // SAFETY: [at, at + len) lies inside the read-only file mapping `bytes` belongs to
            // (a mapping starts on a page boundary, so rounding `start` down to one stays in
            // it, and the kernel rounds the length up to whole pages of it). MADV_WILLNEED
            // only starts reading file pages into the page cache; it changes no memory the
            // program can see. Failure is harmless: the pages are faulted in when touched.
            unsafe { libc::madvise(at as *mut libc::c_void, len, libc::MADV_WILLNEED) };
            at += len;
        }
    }
    #[cfg(not(unix))]
    let _ = bytes;
}

#[cfg(test)]
mod tests {
    use super::layer_of;

    #[test]
    fn a_tensor_s_layer_is_its_first_number() {
        assert_eq!(layer_of("model.layers.7.mlp.up_proj.weight"), Some(("model.layers.", 7)));
        assert_eq!(layer_of("h.11.attn.c_attn.weight"), Some(("h.", 11)));
        assert_eq!(layer_of("model.layers.3.block_sparse_moe.experts.5.w1.weight"), Some(("model.layers.", 3)));
        assert_eq!(layer_of("model.embed_tokens.weight"), None);
        assert_eq!(layer_of("lm_head.weight"), None);
    }
}
