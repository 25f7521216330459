//! PyTorch checkpoints (`pytorch_model.bin`), read by our own reader, which replaces candle's
//! `candle_core::pickle` (issue 27). A checkpoint is a zip archive: `<dir>/data.pkl`, a pickle
//! naming each tensor's storage, type, offset, shape and strides, and `<dir>/data/<key>`, each
//! storage's bytes. candle's reader could not be made safe from outside: it allocates the
//! length a string claims before reading it (4 GiB), allocates a tensor's claimed shape before
//! reading its storage (2^20 × 2^20 elements stored in 16 bytes), deep-clones each memoized
//! object it re-references (lists re-referenced 40 deep are 2^40 objects), panics on short
//! argument tuples and prints its own warning for an unsupported storage.
//!
//! This reader interprets the opcodes `torch.save` writes (no code runs: a GLOBAL is only a
//! name) and checks every claim first: a string may not run past the pickle, objects are
//! shared (`Rc`), never deep-cloned, nesting and copying are bounded, and each tensor's shape,
//! strides and offset must lie inside its storage entry, whose size must fit in the file.
//! The tensors are read one at a time, when asked for, and only float types are converted.

use super::pickle_ops::{parse, Node, Obj};
use crate::error::usage;
use anyhow::Result;
use candle_core::{Device, Tensor};
use std::collections::BTreeMap;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use zip::ZipArchive;

/// data.pkl's largest size (a real checkpoint's is about 100 bytes per tensor).
const MAX_PICKLE: u64 = 256 << 20;

/// Where a tensor lies in the archive, and how.
#[derive(Debug, Clone)]
pub struct Info {
    /// The storage class, `torch.FloatStorage` for example.
    pub storage: String,
    pub shape: Vec<usize>,
    stride: Vec<usize>,
    /// In elements of the storage.
    offset: usize,
    entry: String,
}

/// A checkpoint's tensor table; tensors are read from `path` when asked for.
pub struct Pickle {
    path: PathBuf,
    tensors: BTreeMap<String, Info>,
    what: String,
}

/// The element size and type name of a storage class; `None` for one torch does not have.
fn element(storage: &str) -> Option<(usize, &'static str)> {
    Some(match storage.strip_prefix("torch.")? {
        "FloatStorage" => (4, "f32"),
        "HalfStorage" => (2, "f16"),
        "BFloat16Storage" => (2, "bf16"),
        "DoubleStorage" => (8, "f64"),
        "LongStorage" => (8, "i64"),
        "IntStorage" => (4, "i32"),
        "ShortStorage" => (2, "i16"),
        "CharStorage" => (1, "i8"),
        "ByteStorage" => (1, "u8"),
        "BoolStorage" => (1, "bool"),
        _ => return None,
    })
}

fn bad(what: &str, why: impl std::fmt::Display) -> anyhow::Error {
    usage(what, format!("pytorch_model.bin: {why}"), "restore the checkpoint, or use its model.safetensors")
}

impl Pickle {
    /// Reads the archive's directory and data.pkl, and checks every tensor against its entry.
    pub fn open(path: &Path, what: &str) -> Result<Pickle> {
        let file = std::fs::File::open(path).map_err(|e| bad(what, e))?;
        let len = file.metadata().map(|m| m.len()).map_err(|e| bad(what, e))?;
        let mut zip = ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| bad(what, zip_why(e)))?;
        let tensors = index(&mut zip, len, what)?;
        Ok(Pickle { path: path.to_path_buf(), tensors, what: what.to_string() })
    }

    pub fn info(&self, name: &str) -> Option<&Info> {
        self.tensors.get(name)
    }

    pub fn names(&self) -> Vec<String> {
        self.tensors.keys().cloned().collect()
    }

    /// The type of the first tensor (by name), `f32`, `bf16`, ….
    /// Every tensor's stored type, in name order.
    pub fn stored_dtypes(&self) -> std::collections::BTreeSet<String> {
        let kind = |info: &Info| element(&info.storage).map_or(info.storage.clone(), |(_, t)| t.to_string());
        self.tensors.values().map(kind).collect()
    }

    /// The tensor `name` as f32 (`info` must have said it exists).
    pub fn get(&self, name: &str) -> Result<Tensor> {
        let info = self.tensors.get(name).ok_or_else(|| bad(&self.what, format!("no tensor {name}")))?;
        let file = std::fs::File::open(&self.path).map_err(|e| bad(&self.what, e))?;
        let mut zip = ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| bad(&self.what, zip_why(e)))?;
        read(&mut zip, name, info, &self.what)
    }
}

/// Checks a checkpoint's bytes as `open` and `get` would, reading every tensor: the fuzz
/// target's entry point.
pub fn check_bytes(bytes: &[u8]) -> Result<()> {
    let mut zip = ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| bad("fuzz", zip_why(e)))?;
    for (name, info) in index(&mut zip, bytes.len() as u64, "fuzz")? {
        read(&mut zip, &name, &info, "fuzz")?;
    }
    Ok(())
}

fn zip_why(e: zip::result::ZipError) -> String {
    format!("not a zip archive as torch.save writes ({})", e.to_string().lines().next().unwrap_or(""))
}

/// The tensor table of data.pkl, each tensor checked to lie inside its storage entry.
fn index<R: Read + Seek>(zip: &mut ZipArchive<R>, len: u64, what: &str) -> Result<BTreeMap<String, Info>> {
    let pkl = zip.file_names().filter_map(|n| n.ok()).find(|n| n.ends_with("data.pkl")).map(|n| n.into_owned());
    let pkl = pkl.ok_or_else(|| bad(what, "the archive holds no data.pkl"))?;
    let dir = pkl.trim_end_matches("data.pkl").to_string();
    let bytes = {
        let entry = zip.by_name(&pkl).map_err(|e| bad(what, zip_why(e)))?;
        let size = entry.size();
        if size > len.min(MAX_PICKLE) {
            return Err(bad(what, format!("data.pkl claims {size} bytes, more than the file's {len}")));
        }
        let mut bytes = Vec::with_capacity(size as usize);
        entry.take(size).read_to_end(&mut bytes).map_err(|e| bad(what, format!("data.pkl: {e}")))?;
        bytes
    };
    // torch.save writes the storages in the saving machine's byte order; this reader reads
    // little-endian values only.
    if let Ok(entry) = zip.by_name(&format!("{dir}byteorder")) {
        let mut order = String::new();
        let _ = entry.take(16).read_to_string(&mut order);
        if order.trim() != "little" {
            return Err(bad(what, format!("byteorder is {}; expected little", crate::error::quote(order.trim()))));
        }
    }
    let top = parse(&bytes).map_err(|why| bad(what, format!("data.pkl: {why}")))?;
    let Node::Dict(items) = &*top.node else {
        return Err(bad(what, "data.pkl holds no dictionary of tensors"));
    };
    let mut out = BTreeMap::new();
    for (key, value) in items {
        let Node::Str(name) = &*key.node else { continue };
        let Some(mut info) = tensor(value).map_err(|why| bad(what, format!("tensor {name}: {why}")))? else {
            continue;
        };
        info.entry = format!("{dir}data/{}", info.entry);
        let size = zip
            .by_name(&info.entry)
            .map(|e| e.size())
            .map_err(|_| bad(what, format!("tensor {name}'s storage {} is missing from the archive", info.entry)))?;
        fits(&info, size, len).map_err(|why| bad(what, format!("tensor {name} {why}")))?;
        if out.insert(name.clone(), info).is_some() {
            return Err(bad(what, format!("tensor {name} appears twice")));
        }
    }
    Ok(out)
}

/// Elements the tensor spans in its storage from its offset: 1 + Σ (dᵢ − 1)·sᵢ, or 0 if empty.
fn extent(info: &Info) -> Option<u128> {
    if info.shape.contains(&0) {
        return Some(0);
    }
    info.shape.iter().zip(&info.stride).try_fold(1u128, |acc, (&d, &s)| acc.checked_add((d as u128 - 1) * s as u128))
}

/// Whether the tensor's claimed shape lies inside its storage entry of `size` bytes, and the
/// entry inside the file of `len` bytes (a storage is stored, not compressed).
fn fits(info: &Info, size: u64, len: u64) -> Result<(), String> {
    if size > len {
        return Err(format!("claims a storage of {size} bytes, more than the file's {len}"));
    }
    let Some((elem, ty)) = element(&info.storage) else { return Ok(()) };
    let numel = info.shape.iter().try_fold(1u128, |a, &d| a.checked_mul(d as u128));
    let end = extent(info).and_then(|e| e.checked_add(info.offset as u128)).and_then(|e| e.checked_mul(elem as u128));
    match (numel, end) {
        (Some(n), Some(end)) if end <= size as u128 && n.saturating_mul(elem as u128) <= size as u128 => Ok(()),
        _ => Err(format!(
            "claims shape {:?} ({ty}, strides {:?}, offset {}) but its storage holds {size} bytes",
            info.shape, info.stride, info.offset
        )),
    }
}

/// The name of a GLOBAL, `module.name`.
fn global(o: &Obj) -> Option<String> {
    match &*o.node {
        Node::Global(m, n) => Some(format!("{m}.{n}")),
        _ => None,
    }
}

fn items(o: &Obj) -> Result<&[Obj], String> {
    match &*o.node {
        Node::Tuple(v) => Ok(v),
        _ => Err("an argument list is not a tuple".into()),
    }
}

fn int(o: &Obj) -> Result<usize, String> {
    match &*o.node {
        Node::Int(i) if *i >= 0 => Ok(*i as usize),
        Node::Int(i) => Err(format!("holds a negative size {i}")),
        _ => Err("holds a size that is not an integer".into()),
    }
}

/// A tensor's place if `value` rebuilds one (`torch._utils._rebuild_tensor_v2`, possibly
/// inside `_rebuild_parameter` or `_rebuild_from_type_v2`); `None` for anything else.
fn tensor(value: &Obj) -> Result<Option<Info>, String> {
    let Node::Call(f, args) = &*value.node else { return Ok(None) };
    match global(f).as_deref() {
        Some("torch._utils._rebuild_parameter") => match items(args)?.first() {
            Some(inner) => tensor(inner),
            None => Err("_rebuild_parameter has no arguments".into()),
        },
        Some("torch._tensor._rebuild_from_type_v2") => match items(args)? {
            [f, _, inner, ..] => tensor(&Obj::call(f.clone(), inner.clone())),
            _ => Err("_rebuild_from_type_v2 has too few arguments".into()),
        },
        Some("torch._utils._rebuild_tensor_v2") => rebuild(items(args)?).map(Some),
        _ => Ok(None),
    }
}

/// `_rebuild_tensor_v2(storage, offset, size, stride, …)`, the storage a persistent id
/// `("storage", class, key, location, numel)`.
fn rebuild(a: &[Obj]) -> Result<Info, String> {
    let [storage, offset, shape, stride, ..] = a else {
        return Err(format!("_rebuild_tensor_v2 has {} arguments, expected at least 4", a.len()));
    };
    let Node::Pers(id) = &*storage.node else { return Err("its storage is not a persistent id".into()) };
    let id = items(id)?;
    let (Some(class), Some(Node::Str(key))) = (id.get(1).and_then(global), id.get(2).map(|k| &*k.node)) else {
        return Err("its storage is not (\"storage\", class, key, …)".into());
    };
    let ints = |o: &Obj| items(o)?.iter().map(int).collect::<Result<Vec<usize>, String>>();
    let (shape, stride) = (ints(shape)?, ints(stride)?);
    if shape.len() != stride.len() {
        return Err(format!("has {} sizes but {} strides", shape.len(), stride.len()));
    }
    Ok(Info { storage: class, shape, stride, offset: int(offset)?, entry: key.clone() })
}

/// Reads one tensor's values and converts them to f32; integer and bool storages are refused.
fn read<R: Read + Seek>(zip: &mut ZipArchive<R>, name: &str, info: &Info, what: &str) -> Result<Tensor> {
    let float = element(&info.storage).filter(|(_, t)| matches!(*t, "f32" | "f16" | "bf16" | "f64"));
    let Some((elem, ty)) = float else {
        let ty = element(&info.storage).map_or(info.storage.clone(), |(_, t)| format!("{t} ({})", info.storage));
        return Err(bad(what, format!("tensor {name} is stored as {ty}; expected floats (f32, f16, bf16 or f64)")));
    };
    // `index` checked that offset + extent lies inside the entry, and the entry inside the file.
    let (start, count) = (info.offset * elem, extent(info).unwrap_or(0) as usize);
    let mut entry = zip.by_name(&info.entry).map_err(|e| bad(what, zip_why(e)))?;
    std::io::copy(&mut (&mut entry).take(start as u64), &mut std::io::sink()).map_err(|e| bad(what, e))?;
    let mut bytes = vec![0u8; count * elem];
    entry.read_exact(&mut bytes).map_err(|e| bad(what, format!("tensor {name}'s storage is short ({e})")))?;
    let halves = || bytes.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let flat: Vec<f32> = match ty {
        "f64" => bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap_or_default()) as f32).collect(),
        "f16" => halves().map(|h| half::f16::from_bits(h).to_f32()).collect(),
        "bf16" => halves().map(|h| f32::from_bits((h as u32) << 16)).collect(),
        _ => bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
    };
    Ok(Tensor::from_vec(gather(&flat, &info.shape, &info.stride), info.shape.as_slice(), &Device::Cpu)?)
}

/// The tensor's values in row-major order from its storage `flat` (from its offset on).
fn gather(flat: &[f32], shape: &[usize], stride: &[usize]) -> Vec<f32> {
    let numel: usize = shape.iter().product();
    let mut idx = vec![0usize; shape.len()];
    let mut out = Vec::with_capacity(numel);
    for _ in 0..numel {
        out.push(flat[idx.iter().zip(stride).map(|(i, s)| i * s).sum::<usize>()]);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}
