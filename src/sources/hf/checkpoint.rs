//! A checkpoint's tensors by name, whatever holds them: one or several memory-mapped
//! safetensors files, or a PyTorch pickle (`pytorch_model.bin`, read whole by candle). Every
//! tensor comes out as f32 with its shape checked against what config.json implies.

use crate::error::usage;
use anyhow::Result;
use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Tensor};
use std::collections::HashMap;
use std::path::PathBuf;

enum Store {
    Safetensors(MmapedSafetensors),
    Pickle(HashMap<String, Tensor>),
}

pub struct Checkpoint {
    store: Store,
    what: String,
}

impl std::fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Checkpoint({})", self.what)
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

impl Checkpoint {
    /// Opens the weight files; `what` names the model in errors.
    pub fn open(files: &[PathBuf], what: &str) -> Result<Checkpoint> {
        let bad = |e: candle_core::Error| {
            usage(
                what,
                format!("the weights cannot be read ({})", first_line(&e.to_string())),
                "restore the checkpoint",
            )
        };
        let store = if files.len() == 1 && files[0].extension().is_some_and(|e| e == "bin") {
            let all = candle_core::pickle::read_all(&files[0]).map_err(bad)?;
            Store::Pickle(all.into_iter().collect())
        } else {
            // SAFETY: the files are mapped read-only; as everywhere with mmap, they must not be
            // truncated while we run. candle's reader checks headers and offsets.
            Store::Safetensors(unsafe { MmapedSafetensors::multi(files) }.map_err(bad)?)
        };
        Ok(Checkpoint { store, what: what.to_string() })
    }

    pub fn what(&self) -> &str {
        &self.what
    }

    pub fn has(&self, name: &str) -> bool {
        match &self.store {
            Store::Safetensors(st) => st.get(name).is_ok(),
            Store::Pickle(m) => m.contains_key(name),
        }
    }

    /// `name` under the first of `prefixes` the checkpoint has it under (GPT-2 checkpoints
    /// name their tensors with or without `transformer.`).
    pub fn prefixed(&self, prefixes: &[&str], name: &str) -> String {
        prefixes.iter().map(|p| format!("{p}{name}")).find(|n| self.has(n)).unwrap_or_else(|| name.to_string())
    }

    /// The stored dtype of the weights when it is not f32 (`f16`, `bf16`, …).
    pub fn stored_dtype(&self) -> Option<String> {
        let dtype = match &self.store {
            Store::Safetensors(st) => st.tensors().first().map(|(_, v)| format!("{:?}", v.dtype()).to_lowercase()),
            Store::Pickle(m) => m.values().next().map(|t| format!("{:?}", t.dtype()).to_lowercase()),
        }?;
        (dtype != "f32").then_some(dtype)
    }

    /// The tensor `name` as f32, checked to have `shape`.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let missing = || {
            usage(
                &self.what,
                format!("the checkpoint has no tensor {name}"),
                "use a checkpoint with the standard names",
            )
        };
        let t = match &self.store {
            Store::Safetensors(st) => {
                use candle_core::safetensors::Load;
                let view = st.get(name).map_err(|_| missing())?;
                let t = view.load(&Device::Cpu)?;
                // The tensor is copied out: its mapped pages need not stay resident (they
                // would count towards the run's memory until the end).
                release(view.data());
                t
            }
            Store::Pickle(m) => m.get(name).cloned().ok_or_else(missing)?,
        };
        if t.dims() != shape {
            return Err(usage(
                &self.what,
                format!("tensor {name} has shape {:?} but config.json implies {shape:?}", t.dims()),
                "use the config.json that belongs to these weights",
            ));
        }
        Ok(if t.dtype() == DType::F32 { t } else { t.to_dtype(DType::F32)? })
    }
}

/// Tells the kernel that the mapped pages under `bytes` are not needed any more: they leave
/// the process's resident memory and are read from the file again if touched. Whole pages
/// only; the mapping is read-only, so nothing is lost.
fn release(bytes: &[u8]) {
    #[cfg(unix)]
    {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let start = bytes.as_ptr() as usize;
        let first = start.div_ceil(page) * page;
        let end = (start + bytes.len()) / page * page;
        if end > first {
            // SAFETY: [first, end) lies inside the read-only file mapping `bytes` belongs to;
            // MADV_DONTNEED on such a mapping only drops pages, which later reads fault back
            // in from the file unchanged. Nothing else holds references into those pages
            // (the tensor was copied out above). Failure is harmless: the pages stay.
            unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_DONTNEED) };
        }
    }
    #[cfg(not(unix))]
    let _ = bytes;
}
