//! Replays every case of `fixtures/torch-rng/vectors.json` (outputs printed by real PyTorch
//! 2.5.1, see its "format" key and docs/TORCH_RNG.md) on one
//! `TorchGenerator` with the case's kernel, and checks every value bit for bit.

use attn_trace::torch_rng::{self, Kernel, TorchGenerator};
use serde_json::Value;

/// One produced tensor: floats, or raw engine outputs for `random_u32`.
#[derive(Debug)]
enum Out {
    F32(Vec<f32>),
    U32(Vec<u32>),
}

fn num(v: &Value, key: &str) -> Result<usize, String> {
    v[key].as_u64().map(|n| n as usize).ok_or_else(|| format!("missing integer {key:?} in {v}"))
}

fn float(v: &Value, key: &str, default: f64) -> Result<f64, String> {
    match &v[key] {
        Value::Null => Ok(default),
        x => x.as_f64().ok_or_else(|| format!("bad number {key:?} in {v}")),
    }
}

/// `shape` / `normalized_shape`: an integer or a list of integers; returns the numel.
fn numel(v: &Value, key: &str) -> Result<usize, String> {
    match &v[key] {
        Value::Array(dims) => dims
            .iter()
            .map(|d| d.as_u64().map(|n| n as usize))
            .product::<Option<usize>>()
            .ok_or_else(|| format!("bad {key:?} in {v}")),
        _ => num(v, key),
    }
}

fn run_ops(ops: &[Value], kernel: Kernel) -> Result<Vec<Out>, String> {
    let mut g = TorchGenerator::new(67280421310721, kernel); // torch's default seed
    let mut out = Vec::new();
    for op in ops {
        match op["op"].as_str().unwrap_or("") {
            "manual_seed" => {
                let seed = &op["seed"];
                let seed = seed
                    .as_i64()
                    .map(i128::from)
                    .or_else(|| seed.as_u64().map(i128::from))
                    .and_then(torch_rng::seed_from_i128)
                    .ok_or_else(|| format!("bad seed in {op}"))?;
                g.manual_seed(seed);
            }
            "rand" => out.push(Out::F32(g.rand(numel(op, "shape")?))),
            "randn" | "normal_" => {
                let (mean, std) = (float(op, "mean", 0.0)?, float(op, "std", 1.0)?);
                out.push(Out::F32(g.normal(numel(op, "shape")?, mean, std)));
            }
            "uniform_" => {
                let (a, b) = (float(op, "a", 0.0)?, float(op, "b", 1.0)?);
                out.push(Out::F32(g.uniform(numel(op, "shape")?, a, b)));
            }
            "linear" => {
                let bias = op["bias"].as_bool().unwrap_or(true);
                let (w, b) = g.linear(num(op, "in_features")?, num(op, "out_features")?, bias);
                out.push(Out::F32(w));
                out.extend(b.map(Out::F32));
            }
            "embedding" => {
                let padding_idx = op["padding_idx"].as_i64();
                let (n, d) = (num(op, "num_embeddings")?, num(op, "embedding_dim")?);
                out.push(Out::F32(g.embedding(n, d, padding_idx)));
            }
            "layernorm" => {
                let bias = op["bias"].as_bool().unwrap_or(true);
                let (w, b) = torch_rng::layer_norm(numel(op, "normalized_shape")?, bias);
                out.push(Out::F32(w));
                out.extend(b.map(Out::F32));
            }
            "random_u32" => out.push(Out::U32((0..num(op, "n")?).map(|_| g.random()).collect())),
            other => return Err(format!("unknown op {other:?}")),
        }
    }
    Ok(out)
}

/// Compares one case; returns a description of the first problems found, if any.
fn check_case(case: &Value) -> Result<(), String> {
    let path = case["path"].as_str().unwrap_or("avx2");
    let kernel = Kernel::from_name(path).ok_or_else(|| format!("unknown path {path:?}"))?;
    let ops = case["ops"].as_array().ok_or("no ops")?;
    let expected = case["outputs"].as_array().ok_or("no outputs")?;
    let got = run_ops(ops, kernel)?;
    if got.len() != expected.len() {
        return Err(format!("{} tensors, expected {}", got.len(), expected.len()));
    }
    let mut problems = Vec::new();
    for (t, (g, e)) in got.iter().zip(expected).enumerate() {
        let e = e.as_array().ok_or("output is not an array")?;
        let len = match g {
            Out::F32(v) => v.len(),
            Out::U32(v) => v.len(),
        };
        if len != e.len() {
            problems.push(format!("tensor {t}: {len} values, expected {}", e.len()));
            continue;
        }
        let mut bad = 0;
        for (i, ev) in e.iter().enumerate() {
            let (ok, shown) = match g {
                Out::F32(v) => {
                    let want: f32 =
                        ev.as_str().and_then(|s| s.parse().ok()).ok_or_else(|| format!("bad float {ev}"))?;
                    (v[i].to_bits() == want.to_bits(), format!("{:.9e} vs {want:.9e}", v[i]))
                }
                Out::U32(v) => (Some(u64::from(v[i])) == ev.as_u64(), format!("{} vs {ev}", v[i])),
            };
            if !ok {
                if bad < 3 {
                    problems.push(format!("tensor {t}[{i}]: got {shown}"));
                }
                bad += 1;
            }
        }
        if bad > 3 {
            problems.push(format!("tensor {t}: {bad} of {} values differ", e.len()));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[test]
fn all_vectors_bit_exact() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/torch-rng/vectors.json");
    let text = std::fs::read_to_string(path).expect("read vectors.json");
    let data: Value = serde_json::from_str(&text).expect("parse vectors.json");
    let cases = data["cases"].as_array().expect("cases");
    let mut failures = Vec::new();
    let mut passed = std::collections::BTreeMap::<String, (usize, usize)>::new();
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let path = case["path"].as_str().unwrap_or("avx2").to_string();
        let tally = passed.entry(path.clone()).or_default();
        tally.1 += 1;
        match check_case(case) {
            Ok(()) => tally.0 += 1,
            Err(e) => failures.push(format!("{name} ({path}): {e}")),
        }
    }
    for (path, (ok, total)) in &passed {
        println!("{path}: {ok}/{total} cases bit-exact");
    }
    for f in &failures {
        eprintln!("FAIL {f}");
    }
    assert_eq!(cases.len(), 209, "vectors.json should hold 209 cases");
    assert!(failures.is_empty(), "{} of {} cases failed", failures.len(), cases.len());
}
