//! Helpers shared by the integration tests: running the binary and reading its JSON.

use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub fn cmd() -> Command {
    let mut c = Command::cargo_bin("attn-trace").unwrap();
    c.env_remove("NO_COLOR").env_remove("RUST_BACKTRACE");
    c
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs attn-trace with `args` and returns its JSON document (asserting success).
pub fn trace_json(args: &[&str]) -> Value {
    let out = cmd().args(args).args(["--format", "json"]).output().unwrap();
    assert!(out.status.success(), "attn-trace {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

/// Flattens nested arrays of numbers (or "nan"/"inf"/"-inf" strings) into f64s.
pub fn flat(v: &Value) -> Vec<f64> {
    let mut out = Vec::new();
    fn go(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Array(a) => a.iter().for_each(|x| go(x, out)),
            Value::Number(n) => out.push(n.as_f64().unwrap()),
            Value::String(s) => out.push(match s.as_str() {
                "nan" => f64::NAN,
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                other => panic!("unexpected string {other}"),
            }),
            Value::Bool(b) => out.push(*b as u8 as f64),
            other => panic!("unexpected value {other}"),
        }
    }
    go(v, &mut out);
    out
}

/// step id → (shape, flat values) from a JSON document.
pub fn steps(doc: &Value) -> BTreeMap<String, (Vec<usize>, Vec<f64>)> {
    doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["id"] != "tokens")
        .map(|s| {
            let shape = s["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
            (s["id"].as_str().unwrap().to_string(), (shape, flat(&s["values"])))
        })
        .collect()
}

/// |a − b| ≤ atol + rtol·|b|, with equal infinities and NaNs counted as equal.
/// An oracle case's steps (`[{"id", "shape", "values"}]`, as the PyTorch oracle scripts write
/// them) against a trace's [`steps`]: a missing step, a wrong shape or a step's first value
/// outside [`close`] goes into `failures` (prefixed with the case's `name`), and `worst` keeps
/// the largest finite difference seen. Returns how many steps were compared.
pub fn compare_steps(
    name: &str,
    want: &Value,
    got: &BTreeMap<String, (Vec<usize>, Vec<f64>)>,
    (atol, rtol): (f64, f64),
    failures: &mut Vec<String>,
    worst: &mut (f64, String),
) -> usize {
    let mut compared = 0;
    for step in want.as_array().unwrap() {
        let id = step["id"].as_str().unwrap();
        let Some((shape, vals)) = got.get(id) else {
            failures.push(format!("{name}: step {id} missing from attn-trace's trace"));
            continue;
        };
        let want_shape: Vec<usize> =
            step["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        if *shape != want_shape {
            failures.push(format!("{name}: {id} shape {shape:?}, PyTorch {want_shape:?}"));
            continue;
        }
        compared += 1;
        for (i, (a, b)) in vals.iter().zip(flat(&step["values"])).enumerate() {
            if !close(*a, b, atol, rtol) {
                failures.push(format!("{name}: {id}[{i}] = {a}, PyTorch {b}"));
                break;
            }
            if a.is_finite() && (a - b).abs() > worst.0 {
                *worst = ((a - b).abs(), format!("{name} {id}[{i}]"));
            }
        }
    }
    compared
}

pub fn close(a: f64, b: f64, atol: f64, rtol: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= atol + rtol * b.abs()
}

/// Reads a safetensors file by hand (8-byte header length, JSON header, little-endian f32
/// data), so that the reference test depends on nothing attn-trace itself uses.
pub fn read_safetensors(path: &Path) -> BTreeMap<String, (Vec<usize>, Vec<f64>)> {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut out = BTreeMap::new();
    for (name, info) in header.as_object().unwrap() {
        if name == "__metadata__" {
            continue;
        }
        assert_eq!(info["dtype"], "F32", "{name}");
        let shape: Vec<usize> =
            info["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        let off = info["data_offsets"].as_array().unwrap();
        let (a, b) = (off[0].as_u64().unwrap() as usize, off[1].as_u64().unwrap() as usize);
        let vals = data[a..b].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect();
        out.insert(name.clone(), (shape, vals));
    }
    out
}
