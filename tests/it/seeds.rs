//! The five seed notebooks reproduced: every tensor a notebook printed (copied into
//! fixtures/seeds/NNN.json by extract.py, with the cell it came from) must match attn-trace's
//! numbers to the notebook's printed 4 decimals. The commands are the ones docs/TOY.md gives.

use crate::common::*;
use serde_json::Value;

/// A printed value rounds to 4 decimals: it is within 5e-5 of the truth; 2e-6 more allows
/// for f32 rounding of values that sit on a rounding boundary.
const PRINTED: f64 = 5e-5 + 2e-6;

fn softmax_rows(m: &[f64], n: usize, scale: f64) -> Vec<f64> {
    m.chunks(n)
        .flat_map(|row| {
            let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max) * scale;
            let e: Vec<f64> = row.iter().map(|x| (x * scale - mx).exp()).collect();
            let z: f64 = e.iter().sum();
            e.into_iter().map(move |x| x / z)
        })
        .collect()
}

fn check_notebook(name: &str) {
    let path = root().join("fixtures/seeds").join(format!("{name}.json"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for run in doc["runs"].as_array().unwrap() {
        let args: Vec<&str> = run["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        let out = cmd().current_dir(root()).args(&args).args(["--format", "json"]).output().unwrap();
        assert!(out.status.success(), "{name} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let trace: Value = serde_json::from_slice(&out.stdout).unwrap();
        let steps = steps(&trace);
        for check in run["checks"].as_array().unwrap() {
            let id = check["step"].as_str().unwrap();
            let from = check["from"].as_str().unwrap();
            let (shape, all) = steps.get(id).unwrap_or_else(|| panic!("{name}: step {id} missing"));
            // Select a head (first dimension) and then a row, as the check says.
            let mut vals: Vec<f64> = all.clone();
            let mut dims: Vec<usize> = shape.clone();
            for key in ["head", "row"] {
                if let Some(i) = check[key].as_u64() {
                    let inner: usize = dims[1..].iter().product();
                    vals = vals[i as usize * inner..(i as usize + 1) * inner].to_vec();
                    dims.remove(0);
                }
            }
            // A run may widen the tolerance, with the reason beside it in the fixture.
            let tol_abs = run["tolerance"].as_f64().unwrap_or(PRINTED);
            let (want, tol_rel) = (flat(&check["values"]), 0.0);
            let got = match check["transform"].as_str() {
                None => vals,
                // Notebook 004 computes softmax(K·Qᵀ/√d_k): the transpose of attn-trace's scores.
                Some(t) => {
                    let n = dims[0];
                    let scale = trace["config"]["scale"].as_f64().unwrap();
                    let transposed: Vec<f64> = (0..n * n).map(|i| vals[(i % n) * n + i / n]).collect();
                    let w = softmax_rows(&transposed, n, scale);
                    if t == "softmax_of_transpose" {
                        w
                    } else {
                        let (vshape, v) = &steps["layers.0.attn.v"];
                        let dv = vshape[2];
                        (0..n * dv).map(|i| (0..n).map(|j| w[(i / dv) * n + j] * v[j * dv + i % dv]).sum()).collect()
                    }
                }
            };
            assert_eq!(
                got.len(),
                want.len(),
                "{name} {from}: {id} has {} values, the notebook {}",
                got.len(),
                want.len()
            );
            // The post prints 5 significant digits in e-notation: compare relatively there.
            let sci = check["transform"].as_str() == Some("softmax_of_transpose");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let ok = if sci { close(*g, *w, 1e-9, 1e-3) } else { close(*g, *w, tol_abs, tol_rel) };
                assert!(ok, "{name} {from}: {id}[{i}] is {g}, the notebook printed {w}");
            }
        }
    }
}

#[test]
fn seed_000_my_shoes() {
    check_notebook("000");
}

#[test]
fn seed_001_time_flies_hand_set_weights() {
    check_notebook("001");
}

#[test]
fn seed_002_one_token_raw_input() {
    check_notebook("002");
}

#[test]
fn seed_003_raschka_rand_weights() {
    check_notebook("003");
}

#[test]
fn seed_004_life_is_short() {
    check_notebook("004");
}
