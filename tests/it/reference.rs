//! An independent recomputation: every step of a trace recomputed from the weights that
//! `--save-weights` wrote, with plain f64 loops (no candle, a hand-written safetensors
//! reader), and compared within 1e-5. Also the invariants a person checks by hand.

// Index loops on purpose: this file spells the arithmetic out the way a person checks it.
#![allow(clippy::needless_range_loop)]

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;

type M = Vec<Vec<f64>>;

struct Weights(BTreeMap<String, (Vec<usize>, Vec<f64>)>);

impl Weights {
    fn mat(&self, name: &str) -> M {
        let (shape, v) = &self.0[name];
        v.chunks(shape[1]).map(|r| r.to_vec()).collect()
    }
    fn vec(&self, name: &str) -> Option<Vec<f64>> {
        self.0.get(name).map(|(_, v)| v.clone())
    }
    /// x·Wᵀ + b, W stored [out, in].
    fn linear(&self, x: &M, prefix: &str) -> M {
        let w = self.mat(&format!("{prefix}.weight"));
        let b = self.vec(&format!("{prefix}.bias"));
        x.iter()
            .map(|row| {
                w.iter()
                    .enumerate()
                    .map(|(o, wr)| {
                        row.iter().zip(wr).map(|(a, b)| a * b).sum::<f64>() + b.as_ref().map_or(0.0, |b| b[o])
                    })
                    .collect()
            })
            .collect()
    }
    fn layer_norm(&self, x: &M, prefix: &str, eps: f64) -> M {
        let d = x[0].len();
        let w = self.vec(&format!("{prefix}.weight")).unwrap_or(vec![1.0; d]);
        let b = self.vec(&format!("{prefix}.bias")).unwrap_or(vec![0.0; d]);
        x.iter()
            .map(|r| {
                let mean = r.iter().sum::<f64>() / d as f64;
                let var = r.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
                r.iter().enumerate().map(|(i, v)| (v - mean) / (var + eps).sqrt() * w[i] + b[i]).collect()
            })
            .collect()
    }
}

fn add(a: &M, b: &M) -> M {
    a.iter().zip(b).map(|(r, s)| r.iter().zip(s).map(|(x, y)| x + y).collect()).collect()
}

/// erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), enough for a 1e-5 comparison.
fn erf(x: f64) -> f64 {
    let s = x.signum();
    let x = x.abs();
    let t = 1.0 / (1.0 + 0.3275911 * x);
    let y = 1.0
        - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592)
            * t
            * (-x * x).exp();
    s * y
}

/// Recomputes every step from the config, token ids and weights.
fn recompute(doc: &Value, w: &Weights) -> BTreeMap<String, Vec<f64>> {
    let c = &doc["config"];
    let u = |k: &str| c[k].as_u64().unwrap() as usize;
    let (d, h, dk, dv, layers) = (u("d_model"), u("heads"), u("d_k"), u("d_v"), u("layers"));
    let scale = c["scale"].as_f64().unwrap();
    let eps = c["eps"].as_f64().unwrap();
    let causal = c["causal"].as_bool().unwrap();
    let pre = c["norm"] == "pre";
    let ids: Vec<usize> =
        doc["input"]["token_ids"].as_array().unwrap().iter().map(|i| i.as_u64().unwrap() as usize).collect();
    let n = ids.len();
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    fn put(out: &mut BTreeMap<String, Vec<f64>>, id: String, m: &M) {
        out.insert(id, m.iter().flatten().copied().collect());
    }
    let table = w.mat("embed.token.weight");
    let tok: M = ids.iter().map(|&i| table[i].clone()).collect();
    put(&mut out, "embed.token".into(), &tok);
    let pos: Option<M> = match c["positions"].as_str().unwrap() {
        "learned" => Some(w.mat("embed.position.weight")[..n].to_vec()),
        "sinusoidal" => Some(
            (0..n)
                .map(|p| {
                    (0..d)
                        .map(|i| {
                            let a = p as f64 / 10000f64.powf((i - i % 2) as f64 / d as f64);
                            if i % 2 == 0 {
                                a.sin()
                            } else {
                                a.cos()
                            }
                        })
                        .collect()
                })
                .collect(),
        ),
        _ => None,
    };
    let mut x = match &pos {
        Some(p) => {
            put(&mut out, "embed.position".into(), p);
            add(&tok, p)
        }
        None => tok,
    };
    put(&mut out, "embed.sum".into(), &x);
    put(&mut out, "embed.out".into(), &x);
    for l in 0..layers {
        let p = |s: &str| format!("layers.{l}.{s}");
        let a_in = if pre {
            let n1 = w.layer_norm(&x, &p("norm1"), eps);
            put(&mut out, p("norm1.out"), &n1);
            n1
        } else {
            x.clone()
        };
        let q = w.linear(&a_in, &p("attn.q_proj"));
        let k = w.linear(&a_in, &p("attn.k_proj"));
        let v = w.linear(&a_in, &p("attn.v_proj"));
        let per_head = |m: &M, dh: usize| -> Vec<f64> {
            (0..h).flat_map(|hh| m.iter().flat_map(move |r| r[hh * dh..(hh + 1) * dh].to_vec())).collect()
        };
        out.insert(p("attn.q"), per_head(&q, dk));
        out.insert(p("attn.k"), per_head(&k, dk));
        out.insert(p("attn.v"), per_head(&v, dv));
        let (mut raw, mut sc, mut wt, mut ctx) = (vec![], vec![], vec![], vec![]);
        let mut concat: M = vec![vec![0.0; h * dv]; n];
        for hh in 0..h {
            for i in 0..n {
                let mut row = vec![];
                for j in 0..n {
                    let r: f64 = (0..dk).map(|e| q[i][hh * dk + e] * k[j][hh * dk + e]).sum();
                    raw.push(r);
                    let s = if causal && j > i { f64::NEG_INFINITY } else { r * scale };
                    sc.push(s);
                    row.push(s);
                }
                let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = row.iter().map(|s| (s - m).exp()).collect();
                let z: f64 = e.iter().sum();
                let p_row: Vec<f64> = e.iter().map(|x| x / z).collect();
                for f in 0..dv {
                    let cv: f64 = (0..n).map(|j| p_row[j] * v[j][hh * dv + f]).sum();
                    ctx.push(cv);
                    concat[i][hh * dv + f] = cv;
                }
                wt.extend(p_row);
            }
        }
        // ctx above is laid out [head][pos][d_v] because heads are the outer loop.
        out.insert(p("attn.raw_scores"), raw);
        out.insert(p("attn.scores"), sc);
        out.insert(p("attn.weights"), wt);
        out.insert(p("attn.context"), ctx);
        put(&mut out, p("attn.concat"), &concat);
        let attn_out = w.linear(&concat, &p("attn.out_proj"));
        put(&mut out, p("attn.out"), &attn_out);
        let sum1 = add(&x, &attn_out);
        put(&mut out, p("add_norm1.sum"), &sum1);
        let f_in = if pre {
            let n2 = w.layer_norm(&sum1, &p("norm2"), eps);
            put(&mut out, p("norm2.out"), &n2);
            n2
        } else {
            let o1 = w.layer_norm(&sum1, &p("norm1"), eps);
            put(&mut out, p("add_norm1.out"), &o1);
            o1
        };
        let hidden = w.linear(&f_in, &p("ffn.linear1"));
        put(&mut out, p("ffn.hidden"), &hidden);
        let act: M =
            hidden
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|&v| {
                            if c["activation"] == "gelu" {
                                0.5 * v * (1.0 + erf(v / 2f64.sqrt()))
                            } else {
                                v.max(0.0)
                            }
                        })
                        .collect()
                })
                .collect();
        put(&mut out, p("ffn.act"), &act);
        let f_out = w.linear(&act, &p("ffn.linear2"));
        put(&mut out, p("ffn.out"), &f_out);
        let base = if pre { sum1.clone() } else { f_in.clone() };
        let sum2 = add(&base, &f_out);
        put(&mut out, p("add_norm2.sum"), &sum2);
        x = if pre {
            sum2
        } else {
            let o2 = w.layer_norm(&sum2, &p("norm2"), eps);
            put(&mut out, p("add_norm2.out"), &o2);
            o2
        };
    }
    put(&mut out, "output".into(), &x);
    out
}

fn check_against_loops(args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let wpath = dir.path().join("w.safetensors");
    let mut full: Vec<&str> = args.to_vec();
    let wstr = wpath.to_str().unwrap().to_string();
    full.extend(["--save-weights", &wstr]);
    let doc = trace_json(&full);
    let expected = recompute(&doc, &Weights(read_safetensors(&wpath)));
    let got = steps(&doc);
    for (id, exp) in &expected {
        let (_, vals) = got.get(id).unwrap_or_else(|| panic!("{args:?}: step {id} missing from the trace"));
        assert_eq!(vals.len(), exp.len(), "{args:?}: {id} length");
        for (i, (a, b)) in vals.iter().zip(exp).enumerate() {
            // f32 candle vs f64 loops: 1e-5 absolute and relative.
            assert!(close(*a, *b, 1e-5, 1e-5), "{args:?}: {id}[{i}] = {a}, loops give {b}");
        }
    }
    let traced: Vec<&String> =
        got.keys().filter(|k| !expected.contains_key(*k) && !k.ends_with("attn.mask") && *k != "token_ids").collect();
    assert!(traced.is_empty(), "{args:?}: steps the reference does not cover: {traced:?}");
}

#[test]
fn default_layer_matches_plain_loops() {
    check_against_loops(&["my shoes are small, my feet are big.", "--heads", "2"]);
}

#[test]
fn every_option_matches_plain_loops() {
    check_against_loops(&[
        "the cat sat on the mat and looked at the dog",
        "--d-model",
        "6",
        "--heads",
        "2",
        "--d-k",
        "3",
        "--d-v",
        "5",
        "--layers",
        "2",
        "--max-len",
        "16",
        "--causal",
        "--attn-bias",
        "--activation",
        "gelu",
        "--seed",
        "7",
    ]);
    check_against_loops(&[
        "a b c d e",
        "--d-model",
        "8",
        "--heads",
        "4",
        "--norm",
        "pre",
        "--positions",
        "sinusoidal",
        "--no-ffn-bias",
        "--layers",
        "3",
        "--d-ff",
        "12",
    ]);
    check_against_loops(&[
        "one",
        "--positions",
        "none",
        "--scale",
        "0.25",
        "--linear-init",
        "rand",
        "--rand-layout",
        "in-out",
        "--draw-order",
        "k,q,v",
    ]);
}

#[test]
fn invariants_hold() {
    let doc = trace_json(&["my shoes are small, my feet are big.", "--heads", "2", "--causal", "--layers", "2"]);
    let s = steps(&doc);
    for l in 0..2 {
        let (shape, w) = &s[&format!("layers.{l}.attn.weights")];
        let n = shape[2];
        for (r, row) in w.chunks(n).enumerate() {
            let sum: f64 = row.iter().sum();
            assert!((sum - 1.0).abs() < 1e-6, "row {r} sums to {sum}");
            assert!(row.iter().all(|&x| (0.0..=1.0).contains(&x)));
            // Causal: a query at position i gives exactly zero weight to keys after it.
            let i = r % n;
            assert!(row[i + 1..].iter().all(|&x| x == 0.0), "masked weights must be exactly 0");
        }
        // context = weights · v, from the trace's own numbers.
        let (vs, v) = &s[&format!("layers.{l}.attn.v")];
        let (_, ctx) = &s[&format!("layers.{l}.attn.context")];
        let dv = vs[2];
        for hh in 0..vs[0] {
            for i in 0..n {
                for f in 0..dv {
                    let want: f64 = (0..n).map(|j| w[hh * n * n + i * n + j] * v[hh * n * dv + j * dv + f]).sum();
                    assert!(close(ctx[hh * n * dv + i * dv + f], want, 1e-6, 1e-6));
                }
            }
        }
        // LayerNorm output rows (weight 1, bias 0 when seeded): mean 0, variance 1.
        for id in [format!("layers.{l}.add_norm1.out"), format!("layers.{l}.add_norm2.out")] {
            let (shape, x) = &s[&id];
            for row in x.chunks(shape[1]) {
                let d = row.len() as f64;
                let mean = row.iter().sum::<f64>() / d;
                let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d;
                assert!(mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-3, "{id}: mean {mean}, var {var}");
            }
        }
    }
}
