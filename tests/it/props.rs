//! Properties over random configurations and sentences (proptest), run through the library
//! so each case costs microseconds, not a process: softmax rows, masks, LayerNorm,
//! single-head attention, permutation equivariance, JSON round trips, weight round trips.

use attn_trace::sources::Loaded;
use attn_trace::{cli::Cli, cli::Env, render, settings::Settings, trace::Trace};
use clap::Parser;
use proptest::prelude::*;

/// Traces a command line through the library; the `Loaded` value holds the model's `cfg`.
fn run(args: &[String]) -> (Loaded, Trace) {
    let cli = Cli::try_parse_from(std::iter::once("attn-trace".to_string()).chain(args.iter().cloned())).unwrap();
    let settings = Settings::from_cli(cli, &Env::default()).unwrap_or_else(|e| panic!("{args:?}: {e:#}"));
    let traced = attn_trace::trace(&settings).unwrap();
    (traced.loaded, traced.trace)
}

fn vals<'a>(t: &'a Trace, id: &str) -> (&'a [usize], &'a [f32]) {
    let s = t.get(id).unwrap_or_else(|| panic!("no step {id}"));
    (&s.shape, s.f32s().unwrap())
}

/// A random small configuration, as command-line arguments.
fn config() -> impl Strategy<Value = Vec<String>> {
    (
        proptest::collection::vec(prop::sample::select(vec!["my", "shoes", "are", "small", "feet", "big", "a"]), 1..9),
        1usize..4, // heads
        1usize..5, // d_k
        1usize..5, // d_v
        1usize..7, // d_model
        1usize..3, // layers
        prop::sample::select(vec!["learned", "sinusoidal", "none"]),
        any::<bool>(), // causal
        prop::sample::select(vec!["post", "pre"]),
        prop::sample::select(vec!["relu", "gelu"]),
        any::<bool>(), // attn bias
        0u32..1000,    // seed
    )
        .prop_map(|(words, h, dk, dv, d, l, pos, causal, norm, act, bias, seed)| {
            let mut a: Vec<String> = vec![words.join(" ")];
            for (k, v) in [("--heads", h), ("--d-k", dk), ("--d-v", dv), ("--d-model", d), ("--layers", l)] {
                a.extend([k.to_string(), v.to_string()]);
            }
            a.extend(["--positions", pos, "--norm", norm, "--activation", act, "--seed"].map(String::from));
            a.push(seed.to_string());
            if causal {
                a.push("--causal".into());
            }
            if bias {
                a.push("--attn-bias".into());
            }
            a
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn weights_are_distributions_and_masks_are_exact(args in config()) {
        let (s, t) = run(&args);
        for l in 0..s.cfg.layers {
            let (shape, w) = vals(&t, &format!("layers.{l}.attn.weights"));
            let n = shape[2];
            for (r, row) in w.chunks(n).enumerate() {
                let sum: f32 = row.iter().sum();
                prop_assert!((sum - 1.0).abs() < 1e-5, "row sums to {}", sum);
                prop_assert!(row.iter().all(|x| (0.0..=1.0).contains(x)));
                if s.cfg.causal {
                    prop_assert!(row[r % n + 1..].iter().all(|&x| x == 0.0), "a masked weight is not exactly 0");
                }
            }
        }
    }

    #[test]
    fn layer_norm_rows_are_standardised(args in config()) {
        let (s, t) = run(&args);
        let eps = s.cfg.eps;
        for l in 0..s.cfg.layers {
            let pairs: Vec<(String, String)> = if s.cfg.norm == attn_trace::config::Norm::Post {
                vec![("add_norm1.sum".into(), "add_norm1.out".into()), ("add_norm2.sum".into(), "add_norm2.out".into())]
            } else {
                vec![("add_norm1.sum".into(), "norm2.out".into())]
            };
            for (input, output) in pairs {
                let (shape, x) = vals(&t, &format!("layers.{l}.{input}"));
                let (_, y) = vals(&t, &format!("layers.{l}.{output}"));
                let d = shape[1];
                for (xr, yr) in x.chunks(d).zip(y.chunks(d)) {
                    let m = |r: &[f32]| r.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
                    let var = |r: &[f32]| { let mu = m(r); r.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / d as f64 };
                    // Seeded LayerNorms have weight 1 and bias 0: mean 0, variance v/(v + eps).
                    prop_assert!(m(yr).abs() < 1e-4, "mean {}", m(yr));
                    let want = var(xr) / (var(xr) + eps);
                    prop_assert!((var(yr) - want).abs() < 2e-3, "variance {} vs {}", var(yr), want);
                }
            }
        }
    }

    #[test]
    fn one_full_width_head_is_plain_attention(words in proptest::collection::vec("[a-e]", 1..8), d in 1usize..6, seed in 0u32..500) {
        let args: Vec<String> = vec![words.join(" "), "--d-model".into(), d.to_string(), "--seed".into(), seed.to_string(), "--max-len".into(), "8".into()];
        let (_, t) = run(&args);
        let (qs, q) = vals(&t, "layers.0.attn.q");
        let (_, k) = vals(&t, "layers.0.attn.k");
        let (_, v) = vals(&t, "layers.0.attn.v");
        let (_, ctx) = vals(&t, "layers.0.attn.context");
        prop_assert_eq!(qs[2], d);
        let n = qs[1];
        // softmax(q·kᵀ/√d)·v in f64, from the trace's own q, k, v.
        for i in 0..n {
            let s: Vec<f64> = (0..n).map(|j| (0..d).map(|e| q[i * d + e] as f64 * k[j * d + e] as f64).sum::<f64>() / (d as f64).sqrt()).collect();
            let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = s.iter().map(|x| (x - mx).exp()).sum();
            for f in 0..d {
                let want: f64 = (0..n).map(|j| (s[j] - mx).exp() / z * v[j * d + f] as f64).sum();
                prop_assert!((ctx[i * d + f] as f64 - want).abs() < 1e-5 + 1e-5 * want.abs());
            }
        }
    }

    #[test]
    fn without_positions_or_mask_permuting_tokens_permutes_outputs(
        words in proptest::collection::vec(prop::sample::select(vec!["my", "shoes", "are", "small", "feet"]), 2..7),
        perm_seed in any::<u64>(),
        heads in 1usize..3,
    ) {
        let n = words.len();
        let mut perm: Vec<usize> = (0..n).collect();
        let mut r = perm_seed;
        for i in (1..n).rev() { r = r.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); perm.swap(i, (r >> 33) as usize % (i + 1)); }
        let permuted: Vec<&str> = perm.iter().map(|&p| words[p]).collect();
        // Sorted ids do not depend on word order, so each word keeps its embedding.
        let base = ["--positions", "none", "--vocab-order", "sorted", "--d-model", "4", "--heads", &heads.to_string()].map(String::from);
        let a: Vec<String> = std::iter::once(words.join(" ")).chain(base.iter().cloned()).collect();
        let b: Vec<String> = std::iter::once(permuted.join(" ")).chain(base.iter().cloned()).collect();
        let (_, ta) = run(&a);
        let (_, tb) = run(&b);
        let (shape, oa) = vals(&ta, "output");
        let (_, ob) = vals(&tb, "output");
        let d = shape[1];
        for (i, &p) in perm.iter().enumerate() {
            for f in 0..d {
                prop_assert!((ob[i * d + f] - oa[p * d + f]).abs() < 1e-5, "output row {} is not row {} of the original", i, p);
            }
        }
        let (_, wa) = vals(&ta, "layers.0.attn.weights");
        let (_, wb) = vals(&tb, "layers.0.attn.weights");
        for h in 0..heads { for i in 0..n { for j in 0..n {
            prop_assert!((wb[h * n * n + i * n + j] - wa[h * n * n + perm[i] * n + perm[j]]).abs() < 1e-6);
        }}}
    }

    #[test]
    fn json_round_trips_every_f32_exactly(args in config()) {
        let (s, t) = run(&args);
        let mut out = Vec::new();
        render::json::write(&t, &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let again: serde_json::Value = serde_json::from_str(&serde_json::to_string(&doc).unwrap()).unwrap();
        prop_assert_eq!(&doc, &again);
        prop_assert_eq!(doc["config"]["layers"].as_u64(), Some(s.cfg.layers as u64));
        for (step, js) in t.steps.iter().zip(doc["steps"].as_array().unwrap()) {
            prop_assert_eq!(js["id"].as_str(), Some(step.id.as_str()));
            if let Some(v) = step.f32s() {
                let mut flat = Vec::new();
                fn walk(x: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
                    match x { serde_json::Value::Array(a) => a.iter().for_each(|y| walk(y, out)), other => out.push(other.clone()) }
                }
                walk(&js["values"], &mut flat);
                prop_assert_eq!(flat.len(), v.len());
                for (a, b) in v.iter().zip(&flat) {
                    match b.as_f64() {
                        Some(x) => prop_assert_eq!((x as f32).to_bits(), a.to_bits(), "{} read back as {}", a, x),
                        None => prop_assert_eq!(b.as_str().unwrap(), if a.is_nan() { "nan" } else if *a > 0.0 { "inf" } else { "-inf" }),
                    }
                }
            }
        }
    }

    #[test]
    fn saved_weights_reproduce_the_trace_bit_for_bit(args in config()) {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().join("w.safetensors").to_str().unwrap().to_string();
        let mut save = args.clone();
        save.extend(["--save-weights".to_string(), w.clone()]);
        let (s, ta) = run(&save);
        // Only the flags a weights file does not fix.
        let mut load = vec![args[0].clone(), "--weights".into(), w, "--heads".into(), s.cfg.heads.to_string()];
        for (flag, v) in [("--positions", format!("{:?}", s.cfg.positions).to_lowercase()), ("--norm", format!("{:?}", s.cfg.norm).to_lowercase()), ("--activation", format!("{:?}", s.cfg.activation).to_lowercase())] {
            load.extend([flag.to_string(), v]);
        }
        if s.cfg.causal { load.push("--causal".into()); }
        let (_, tb) = run(&load);
        prop_assert_eq!(ta.steps.len(), tb.steps.len());
        for (a, b) in ta.steps.iter().zip(&tb.steps) {
            prop_assert_eq!(&a.id, &b.id);
            if let (Some(x), Some(y)) = (a.f32s(), b.f32s()) {
                prop_assert!(x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()), "{} differs after a save and load", a.id);
            }
        }
    }
}

/// Numbers in (-1, 1) take zmij's fixed-notation branch (`0.001234`), which is where
/// attention weights and most activations live. This checks the JSON writer against ryu, an
/// independent implementation of the same shortest round-trip decimals, on bit patterns
/// spread over that whole range, both signs, and that each string reads back to the same f32.
#[test]
fn json_floats_match_ryu_in_minus_one_to_one() {
    let (lo, hi) = (1e-7f32.to_bits(), 1.0f32.to_bits());
    let mut zmij_buf = zmij::Buffer::new();
    let mut ryu_buf = ryu::Buffer::new();
    let mut out = Vec::new();
    // An odd stride that is not a power of two reaches every digit count and exponent.
    for bits in (lo..hi).step_by(97) {
        for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
            out.clear();
            render::json::write_f32(&mut out, x, &mut zmij_buf).unwrap();
            let ours = std::str::from_utf8(&out).unwrap();
            assert_eq!(ours, ryu_buf.format_finite(x), "bits {:#010x}", x.to_bits());
            assert_eq!(ours.parse::<f32>().unwrap().to_bits(), x.to_bits(), "{ours}");
        }
    }
}
