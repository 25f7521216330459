//! A checkpoint's tensors by name, whatever holds them: one or several memory-mapped
//! safetensors files, or a PyTorch pickle (`pytorch_model.bin`, our own reader: `pickle.rs`).
//! Every tensor comes out as f32 with its shape checked against what config.json implies;
//! tensors stored as integers are refused, not converted.

use crate::error::{quote, usage};
use anyhow::Result;
use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Tensor};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

enum Store {
    Safetensors(MmapedSafetensors),
    Pickle(super::pickle::Pickle),
}

pub struct Checkpoint {
    store: Store,
    what: String,
    ahead: super::readahead::Ahead,
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
            Store::Pickle(super::pickle::Pickle::open(&files[0], what)?)
        } else {
            // SAFETY: the files are mapped read-only; as everywhere with mmap, they must not be
            // truncated while we run. candle's reader checks headers and offsets.
            Store::Safetensors(unsafe { MmapedSafetensors::multi(files) }.map_err(bad)?)
        };
        let ahead = match &store {
            Store::Safetensors(st) => super::readahead::Ahead::new(st),
            Store::Pickle(_) => Default::default(),
        };
        Ok(Checkpoint { store, what: what.to_string(), ahead })
    }

    pub fn what(&self) -> &str {
        &self.what
    }

    pub fn has(&self, name: &str) -> bool {
        match &self.store {
            Store::Safetensors(st) => st.get(name).is_ok(),
            Store::Pickle(p) => p.info(name).is_some(),
        }
    }

    /// The stored shape of `name`, without reading it.
    pub fn shape(&self, name: &str) -> Option<Vec<usize>> {
        match &self.store {
            Store::Safetensors(st) => st.get(name).ok().map(|v| v.shape().to_vec()),
            Store::Pickle(p) => p.info(name).map(|i| i.shape.clone()),
        }
    }

    /// config.json's `num_hidden_layers` is the number of layers the checkpoint holds
    /// (`{prefix}N.…` for one of `prefixes`), checked before any loop runs over the layers.
    pub fn check_layers(&self, count: usize, prefixes: &[&str]) -> Result<()> {
        let names: Vec<String> = match &self.store {
            Store::Safetensors(st) => st.tensors().into_iter().map(|(n, _)| n).collect(),
            Store::Pickle(p) => p.names(),
        };
        check_layers(count, &layer_numbers(&names, prefixes), &self.what)
    }

    /// The stored dtypes of the weights other than f32 (`f16`, `bf16`, …), sorted and joined
    /// by `+`. Every tensor counts: the safetensors index is a hash map, so "the first tensor's
    /// type" would change from run to run where the types are mixed (f32 norms, bf16 weights).
    pub fn stored_dtype(&self) -> Option<String> {
        let kinds: BTreeSet<String> = match &self.store {
            Store::Safetensors(st) => {
                st.tensors().iter().map(|(_, v)| format!("{:?}", v.dtype()).to_lowercase()).collect()
            }
            Store::Pickle(p) => p.stored_dtypes(),
        };
        let kinds: Vec<String> = kinds.into_iter().filter(|d| d != "f32").collect();
        (!kinds.is_empty()).then(|| kinds.join("+"))
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
                self.check(name, view.shape(), shape, view.dtype())?;
                // From a cold page cache the bytes come in large read-ahead requests, this
                // layer's and the next one's, not a page fault at a time (`readahead.rs`).
                self.ahead.reading(st, name);
                super::readahead::will_need(view.data());
                let t = match to_f32s(view.dtype(), view.data(), release) {
                    Some(values) => Tensor::from_vec(values, view.shape(), &Device::Cpu)?,
                    None => view.load(&Device::Cpu)?,
                };
                // The tensor is copied out: its mapped pages need not stay resident (they
                // would count towards the run's memory until the end).
                release(view.data());
                t
            }
            Store::Pickle(p) => {
                let info = p.info(name).ok_or_else(missing)?;
                self.check(name, &info.shape, shape, safetensors::Dtype::F32)?;
                p.get(name)?
            }
        };
        Ok(if t.dtype() == DType::F32 { t } else { t.to_dtype(DType::F32)? })
    }

    /// Refuses a tensor whose stored shape is not `want`, or whose type is not a float.
    fn check(&self, name: &str, got: &[usize], want: &[usize], dtype: safetensors::Dtype) -> Result<()> {
        if got != want {
            return Err(usage(
                &self.what,
                format!("tensor {name} has shape {got:?} but config.json implies {want:?}"),
                "use the config.json that belongs to these weights",
            ));
        }
        float_dtype(name, dtype, &self.what)
    }
}

impl Checkpoint {
    /// Whether the 2-D tensor `name` can be read a few rows at a time ([`rows`](Self::rows)):
    /// a memory-mapped safetensors tensor in f32, bf16 or f16 of shape `shape`.
    pub fn has_rows(&self, name: &str, shape: &[usize]) -> bool {
        use safetensors::Dtype;
        match &self.store {
            Store::Safetensors(st) => st.get(name).is_ok_and(|v| {
                matches!(v.dtype(), Dtype::F32 | Dtype::BF16 | Dtype::F16) && v.shape() == shape && shape.len() == 2
            }),
            Store::Pickle(_) => false,
        }
    }

    /// Rows `start .. start + len` of the mapped 2-D tensor `name` as f32: the same values
    /// as those rows of [`get`](Self::get)'s, converted from only their bytes.
    pub fn rows(&self, name: &str, start: usize, len: usize) -> Result<Tensor> {
        let Store::Safetensors(st) = &self.store else {
            return Err(anyhow::anyhow!("internal: {name} is not a mapped tensor"));
        };
        let view = st.get(name)?;
        let (rows, cols) = match view.shape() {
            [r, c] => (*r, *c),
            other => return Err(anyhow::anyhow!("internal: {name} has shape {other:?}, not 2-D")),
        };
        let size = view.data().len() / (rows * cols).max(1);
        if start + len > rows {
            return Err(anyhow::anyhow!("internal: rows {start}..{} of {name}, which has {rows}", start + len));
        }
        let bytes = &view.data()[start * cols * size..(start + len) * cols * size];
        super::readahead::will_need(bytes);
        let values = to_f32s(view.dtype(), bytes, release)
            .ok_or_else(|| anyhow::anyhow!("internal: {name} is not a float tensor"))?;
        release(bytes);
        Ok(Tensor::from_vec(values, (len, cols), &Device::Cpu)?)
    }
}

/// The checkpoint's weight files in `dir`, in the order transformers prefers them.
pub fn weight_files(dir: &Path, what: &str) -> Result<Vec<std::path::PathBuf>> {
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        let fix = "restore the index file";
        let named = format!("{what}: model.safetensors.index.json");
        let text = crate::sources::input_file::bytes(&named, &index, fix, crate::sources::input_file::CONFIG)?;
        let files = index_shards(&text, what)?;
        if let Some(f) = files.iter().find(|f| !dir.join(f).is_file()) {
            return Err(usage(
                what,
                format!("the shard {f} named by model.safetensors.index.json is missing"),
                "download every shard of the checkpoint",
            ));
        }
        return Ok(files.iter().map(|f| dir.join(f)).collect());
    }
    let bin = dir.join("pytorch_model.bin");
    if bin.is_file() {
        return Ok(vec![bin]);
    }
    Err(usage(
        what,
        "no weights: neither model.safetensors, model.safetensors.index.json nor pytorch_model.bin",
        "pass a model folder that holds its weights",
    ))
}

/// The shard file names of a `model.safetensors.index.json`, sorted and each once: every
/// `weight_map` value must be a plain file name beside the index (no folder, no `..`).
pub fn index_shards(text: &[u8], what: &str) -> Result<Vec<String>> {
    let fix = "restore the index file";
    let v =
        crate::strict_json::parse(text).map_err(|e| usage(what, format!("model.safetensors.index.json: {e}"), fix))?;
    let map = v["weight_map"]
        .as_object()
        .ok_or_else(|| usage(what, "model.safetensors.index.json has no weight_map", fix))?;
    let mut files = Vec::with_capacity(map.len().min(4096));
    for (tensor, f) in map {
        let f = f.as_str().filter(|f| !f.is_empty() && !f.contains(['/', '\\']) && !f.contains("..") && *f != ".");
        let f = f.ok_or_else(|| {
            let v = &map[tensor];
            let held = v.as_str().map(quote).unwrap_or_else(|| format!("the non-string {}", quote(&v.to_string())));
            let why = format!("weight_map gives {} the file {held}", quote(tensor));
            let msg = format!("model.safetensors.index.json: {why}; expected a shard's file name beside the index");
            usage(what, msg, fix)
        })?;
        files.push(f.to_string());
    }
    if files.is_empty() {
        return Err(usage(what, "model.safetensors.index.json: weight_map names no tensor", fix));
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// The layer numbers N of the tensors named `{prefix}N.…` for one of `prefixes`.
pub fn layer_numbers(names: &[String], prefixes: &[&str]) -> std::collections::BTreeSet<usize> {
    let number = |n: &String| prefixes.iter().find_map(|p| n.strip_prefix(p)?.split('.').next()?.parse().ok());
    names.iter().filter_map(number).collect()
}

/// `num_hidden_layers` is `count` and the checkpoint holds the layers `present`: they must
/// be 0 to count − 1 (a config claiming 10^12 layers would loop, or allocate, that often).
pub fn check_layers(count: usize, present: &std::collections::BTreeSet<usize>, what: &str) -> Result<()> {
    let dense = present.iter().enumerate().all(|(i, &n)| i == n);
    if count == present.len() && dense {
        return Ok(());
    }
    let held = match (present.first(), present.last()) {
        (Some(a), Some(b)) => format!("layers {a} to {b} ({} in all)", present.len()),
        _ => "no numbered layers".into(),
    };
    Err(usage(
        what,
        format!("config.json: num_hidden_layers is {count} but the checkpoint holds {held}"),
        "use the config.json that belongs to these weights",
    ))
}

/// Refuses a tensor stored as anything but floats (an i64 table is not converted silently).
pub fn float_dtype(name: &str, dtype: safetensors::Dtype, what: &str) -> Result<()> {
    use safetensors::Dtype;
    if matches!(dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16 | Dtype::F64) {
        return Ok(());
    }
    Err(usage(
        what,
        format!(
            "tensor {name} is stored as {}; expected floats (f32, f16, bf16 or f64)",
            format!("{dtype:?}").to_lowercase()
        ),
        "use a checkpoint whose weights are floats",
    ))
}

/// The stored values as f32 in one pass over the mapped bytes, for the float types
/// checkpoints store; `None` for any other type (candle converts those). candle's own path
/// copies the bytes out and then converts element by element, which took most of a bf16
/// 1 B model's loading time; this loop is vectorised by the compiler (bf16 is the top half
/// of an f32). `done` is given each few MiB once they are converted: `get` releases their
/// mapped pages there, so a large table (GPT-2's token embeddings, 147 MiB) is never resident
/// twice, which was the peak of a whole GPT-2 trace.
fn to_f32s(dtype: safetensors::Dtype, bytes: &[u8], mut done: impl FnMut(&[u8])) -> Option<Vec<f32>> {
    use safetensors::Dtype;
    let size = match dtype {
        Dtype::F32 => 4,
        Dtype::BF16 | Dtype::F16 => 2,
        _ => return None,
    };
    let mut out = Vec::with_capacity(bytes.len() / size);
    for chunk in bytes.chunks(CHUNK) {
        let halves = || chunk.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]]));
        match dtype {
            Dtype::BF16 => out.extend(halves().map(|h| f32::from_bits((h as u32) << 16))),
            Dtype::F16 => out.extend(halves().map(|h| half::f16::from_bits(h).to_f32())),
            _ => out.extend(chunk.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        }
        done(chunk);
    }
    Some(out)
}

/// Bytes converted between two releases of mapped pages (a multiple of 4).
const CHUNK: usize = 4 << 20;

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

#[cfg(test)]
mod tests {
    use super::{to_f32s, Store};
    use candle_core::{DType, Device, Tensor};
    use safetensors::Dtype;

    /// Rows read alone are those rows of the whole tensor, in each stored type, sharded too.
    #[test]
    fn rows_read_alone_equal_the_rows_of_the_whole_tensor() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/decoders");
        for (dir, files) in [
            ("llama-f16", &["model.safetensors"][..]),
            ("llama-bf16", &["model.safetensors"][..]),
            ("llama-tied", &["model.safetensors"][..]),
            ("llama-sharded", &["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"][..]),
        ] {
            let files: Vec<_> = files.iter().map(|f| root.join(dir).join(f)).collect();
            let ck = super::Checkpoint::open(&files, dir).unwrap();
            let name = "model.embed_tokens.weight";
            let Store::Safetensors(st) = &ck.store else { panic!("{dir} is not mapped") };
            let shape = st.get(name).unwrap().shape().to_vec();
            assert!(ck.has_rows(name, &shape) && !ck.has_rows(name, &[shape[0] + 1, shape[1]]));
            let whole = ck.get(name, &shape).unwrap();
            for (start, len) in [(0, 1), (shape[0] / 3, shape[0] / 2), (shape[0] - 1, 1)] {
                let rows = ck.rows(name, start, len).unwrap().to_vec2::<f32>().unwrap();
                assert_eq!(rows, whole.narrow(0, start, len).unwrap().to_vec2::<f32>().unwrap(), "{dir} {start}");
            }
            assert!(ck.rows(name, shape[0], 1).is_err());
        }
    }

    /// The one-pass conversion agrees bit for bit with candle's, on awkward values too
    /// (subnormals, infinities, the largest finite values), across a chunk boundary.
    #[test]
    fn stored_floats_convert_as_candle_converts_them() {
        let mut values = vec![0.0f32, -0.0, 1.0, -2.5, 1e-40, 65504.0, 3.0e38, f32::INFINITY, f32::NEG_INFINITY];
        values.extend((0..(super::CHUNK / 2 + 7)).map(|i| (i as f32 * 0.37).sin() * 1e3));
        let t = Tensor::new(values.as_slice(), &Device::Cpu).unwrap();
        for (dtype, stored) in [(DType::F32, Dtype::F32), (DType::BF16, Dtype::BF16), (DType::F16, Dtype::F16)] {
            let cast = t.to_dtype(dtype).unwrap();
            let mut bytes = Vec::new();
            match dtype {
                DType::F32 => cast.to_vec1::<f32>().unwrap().iter().for_each(|v| bytes.extend(v.to_le_bytes())),
                DType::BF16 => cast.to_vec1::<half::bf16>().unwrap().iter().for_each(|v| bytes.extend(v.to_le_bytes())),
                _ => cast.to_vec1::<half::f16>().unwrap().iter().for_each(|v| bytes.extend(v.to_le_bytes())),
            }
            let mut seen = 0;
            let ours = to_f32s(stored, &bytes, |c| seen += c.len()).unwrap();
            assert_eq!(seen, bytes.len());
            let candle = cast.to_dtype(DType::F32).unwrap().to_vec1::<f32>().unwrap();
            assert_eq!(ours.len(), candle.len());
            assert!(ours.iter().zip(&candle).all(|(a, b)| a.to_bits() == b.to_bits()), "{dtype:?}");
        }
        assert!(to_f32s(Dtype::I64, &[0; 8], |_| {}).is_none());
    }
}
