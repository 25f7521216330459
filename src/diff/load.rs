//! Reading one side of a diff: an attn-trace JSON document or JSONL stream, a JSON object of
//! named tensors, or a safetensors or npz file of named tensors. Names are mapped to
//! canonical step ids ([`super::names`]); TransformerLens tensors lose their batch dimension
//! of 1 and, for q/k/v/z, their `[pos, head, d_head]` layout. Anything unreadable is a usage
//! error naming the file.

use super::json::{doc_steps, named_tensors, Raw};
use super::names::{self, resolve};
use crate::error::usage;
use crate::export::{npz, safetensors, Data, Named};
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::Path;

/// One step as read from a file.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The name the file used.
    pub given: String,
    pub shape: Vec<usize>,
    pub data: Data,
    pub dims: Vec<String>,
    /// Which heads a step narrowed by `--head` holds (attn-trace documents only).
    pub heads: Option<Vec<usize>>,
}

/// One side of a diff.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: String,
    /// What the file turned out to be, e.g. "attn-trace JSON document".
    pub kind: &'static str,
    /// Steps by canonical id.
    pub steps: BTreeMap<String, Entry>,
    /// Names that are not steps, skipped.
    pub ignored: Vec<String>,
    /// What was done to fit the file to attn-trace's layouts.
    pub notes: Vec<String>,
}

/// Reads and recognises a trace file.
pub fn load(path: &Path) -> Result<Loaded> {
    let what = path.display().to_string();
    let bytes = crate::sources::text::read_file(path, &what, "pass a trace file that exists and is readable")?;
    parse(&bytes, &what)
}

/// Recognises and reads a trace file's bytes; `what` names it in errors. The fuzz target
/// `diff_input` calls this directly.
pub fn parse(bytes: &[u8], what: &str) -> Result<Loaded> {
    let what = what.to_string();
    let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
    let mut config = serde_json::Value::Null;
    let (kind, raws): (&'static str, Vec<Raw>) = if npz::looks_like(bytes) {
        ("npz", from_named(npz::read(bytes, &what)?))
    } else if first == Some(b'{') {
        let text = std::str::from_utf8(bytes).map_err(|_| usage(&what, "not UTF-8 text", "pass a JSON file"))?;
        // strict_json: a step given twice is an error (serde_json would keep the last), and
        // Python's NaN/Infinity/-Infinity are read.
        match crate::strict_json::parse(bytes) {
            Ok(v) if v.get("schema_version").is_some() && v.get("steps").is_some() => {
                config = v["config"].clone();
                ("attn-trace JSON document", doc_steps(&v, &what)?)
            }
            Ok(v) => ("JSON object of named tensors", named_tensors(&v, &what)?),
            Err(_) if is_jsonl(text) => {
                let head = text.lines().next().and_then(|l| crate::strict_json::parse(l.as_bytes()).ok());
                config = head.map_or(serde_json::Value::Null, |h| h["config"].clone());
                ("attn-trace JSONL", jsonl(text, &what)?)
            }
            Err(e) if e.contains("appears twice") => {
                return Err(usage(&what, format!("not usable JSON: {e}"), "name each step once"))
            }
            Err(e) => return Err(usage(&what, format!("not valid JSON: {e}"), "pass a JSON object of named tensors")),
        }
    } else if bytes.len() >= 9 && bytes[8] == b'{' {
        ("safetensors", from_named(safetensors::read(bytes, &what)?))
    } else {
        return Err(usage(
            &what,
            "not a trace: neither JSON, JSONL, safetensors nor npz",
            "pass attn-trace --format json output, a --save-trace file, or a JSON object of named tensors",
        ));
    };
    let mut loaded = fit(what, kind, raws)?;
    loaded.notes.extend(arithmetic_note(&config, &loaded.path));
    Ok(loaded)
}

/// Which arithmetic a GGUF model's trace used (`config.arithmetic`, absent for f32), so that a
/// diff of the two never leaves it unsaid.
fn arithmetic_note(config: &serde_json::Value, what: &str) -> Option<String> {
    match config["arithmetic"].as_str() {
        Some("ggml") => Some(format!("{what}: computed as llama.cpp computes it (--arithmetic ggml)")),
        _ if config["model"]["tensor_types"].is_object() => {
            Some(format!("{what}: computed in f32 on the dequantized GGUF weights (--arithmetic f32)"))
        }
        _ => None,
    }
}

/// Whether a text that is not one JSON value starts as attn-trace's JSONL: a first line that
/// is a whole JSON object, and more lines after it.
fn is_jsonl(text: &str) -> bool {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    lines.any(|l| !l.trim().is_empty())
        && crate::strict_json::parse(first.as_bytes()).is_ok_and(|v| v.get("schema_version").is_some())
}

/// attn-trace's `--format jsonl`: a header line, then one step object per line.
fn jsonl(text: &str, what: &str) -> Result<Vec<Raw>> {
    let mut steps = Vec::new();
    let mut version = serde_json::Value::Null;
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v = crate::strict_json::parse(line.as_bytes())
            .map_err(|e| usage(what, format!("line {}: not valid JSON: {e}", i + 1), "pass a whole JSONL trace"))?;
        if i == 0 {
            if v.get("schema_version").is_none() {
                return Err(usage(what, "not valid JSON, nor attn-trace JSONL", "pass a JSON object of named tensors"));
            }
            version = v["schema_version"].clone();
            continue;
        }
        steps.push(v);
    }
    let doc = serde_json::json!({"schema_version": version, "steps": steps});
    doc_steps(&doc, what)
}

fn from_named(named: Vec<Named>) -> Vec<Raw> {
    named.into_iter().map(|n| Raw { name: n.name, shape: n.shape, data: n.data, dims: None, heads: None }).collect()
}

/// Resolves names, undoes TransformerLens's layouts and rejects two names for one step.
fn fit(what: String, kind: &'static str, raws: Vec<Raw>) -> Result<Loaded> {
    let mut out = Loaded { path: what.clone(), kind, steps: BTreeMap::new(), ignored: Vec::new(), notes: Vec::new() };
    let (mut batch, mut transposed) = (Vec::new(), Vec::new());
    for raw in raws {
        let Some(r) = resolve(&raw.name) else {
            out.ignored.push(raw.name);
            continue;
        };
        let dims = raw.dims.unwrap_or_else(|| names::dims(&r.id));
        let (mut shape, mut data) = (raw.shape, raw.data);
        // A batch of one: TransformerLens caches always have it; a user's code may too.
        if shape.len() == dims.len() + 1 && shape[0] == 1 {
            shape.remove(0);
            batch.push(raw.name.clone());
        }
        let per_head_tl = crate::export::tl::POSITION_FIRST.contains(&crate::trace::split_id(&r.id).1);
        if r.tl && per_head_tl && shape.len() == 3 {
            (shape, data) = swap_first_two(shape, data);
            transposed.push(raw.name.clone());
        }
        if data.len() != shape.iter().product::<usize>() {
            return Err(usage(&what, format!("{}: shape {shape:?} does not fit its values", raw.name), "fix the file"));
        }
        if let Some(prev) = out.steps.get(&r.id) {
            return Err(usage(
                &what,
                format!("{} and {} both name step {}", prev.given, raw.name, r.id),
                "keep one of them",
            ));
        }
        out.steps.insert(r.id, Entry { given: raw.name, shape, data, dims, heads: raw.heads });
    }
    if !batch.is_empty() {
        out.notes.push(format!("{what}: dropped a leading batch dimension of 1 from {}", list(&batch)));
    }
    if !transposed.is_empty() {
        out.notes.push(format!(
            "{what}: read {} as TransformerLens's [pos, head, d_head] and compared as [head, pos, d_head]",
            list(&transposed)
        ));
    }
    Ok(out)
}

/// `[p, h, …]` → `[h, p, …]`, row-major.
fn swap_first_two(shape: Vec<usize>, data: Data) -> (Vec<usize>, Data) {
    let (p, h, inner) = (shape[0], shape[1], shape[2..].iter().product::<usize>());
    // An empty tensor has nothing to reorder, however large its other dimensions claim to be
    // ([0, 2^62, 1] once looped 2^62 times).
    if p == 0 || h == 0 || inner == 0 {
        let mut new = shape;
        new.swap(0, 1);
        return (new, data);
    }
    let order = (0..h).flat_map(|hi| (0..p).flat_map(move |pi| (0..inner).map(move |k| (pi * h + hi) * inner + k)));
    let data = match data {
        Data::Num(v) if v.len() == p * h * inner => Data::Num(order.map(|i| v[i]).collect()),
        Data::Str(v) if v.len() == p * h * inner => Data::Str(order.map(|i| v[i].clone()).collect()),
        other => return (shape, other),
    };
    let mut new = shape;
    new.swap(0, 1);
    (new, data)
}

/// A short list of names: the first three and a count of the rest.
pub fn list(names: &[String]) -> String {
    let shown: Vec<&str> = names.iter().take(3).map(String::as_str).collect();
    match names.len() {
        n if n > 3 => format!("{} and {} more", shown.join(", "), n - 3),
        _ => shown.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transformer_lens_layout_is_undone() {
        // [pos 2, head 3, d 1] → [head 3, pos 2, d 1]
        let (shape, data) = swap_first_two(vec![2, 3, 1], Data::Num(vec![0., 1., 2., 10., 11., 12.]));
        assert_eq!(shape, vec![3, 2, 1]);
        assert_eq!(data, Data::Num(vec![0., 10., 1., 11., 2., 12.]));
    }
}
