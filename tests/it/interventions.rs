//! Interventions and analyses: ablation, knockout, the logit lens, per-head statistics and
//! rollout. Properties checked on the trace's own numbers with plain code written here (the
//! statistics and rollout recomputed from the recorded weights by their definitions), and
//! against transformers/PyTorch where fixtures/oracle/interventions has a case.

use crate::common::*;
use serde_json::Value;

fn model(name: &str) -> String {
    root().join("fixtures/decoders").join(name).to_str().unwrap().to_string()
}

const S: &str = "my shoes are small, my feet are big.";

fn weights(doc: &Value, layer: usize) -> (Vec<usize>, Vec<f64>) {
    steps(doc)[&format!("layers.{layer}.attn.weights")].clone()
}

#[test]
fn ablated_heads_carry_zero_or_their_mean() {
    let m = model("llama-gqa");
    let base = trace_json(&[S, "--model", &m, "--steps", "context"]);
    let zero = trace_json(&[S, "--model", &m, "--steps", "context", "--ablate", "1.2"]);
    let mean = trace_json(&[S, "--model", &m, "--steps", "context", "--ablate", "1.2", "--ablate-mode", "mean"]);
    assert_eq!(zero["config"]["interventions"]["ablate"], serde_json::json!([[1, 2]]));
    let (shape, z) = &steps(&zero)["layers.1.attn.context"];
    let (n, d) = (shape[1], shape[2]);
    let head = |v: &[f64], h: usize| v[h * n * d..(h + 1) * n * d].to_vec();
    assert!(head(z, 2).iter().all(|&x| x == 0.0), "the ablated head's context is not zero");
    // Layer 0 is before the ablation: unchanged; layer 1's other heads read the same inputs.
    assert_eq!(steps(&zero)["layers.0.attn.context"], steps(&base)["layers.0.attn.context"]);
    assert_eq!(head(z, 0), head(&steps(&base)["layers.1.attn.context"].1, 0));
    // Mean mode: every position holds the head's mean over positions, from the same run.
    let b = head(&steps(&base)["layers.1.attn.context"].1, 2);
    let m2 = head(&steps(&mean)["layers.1.attn.context"].1, 2);
    for j in 0..d {
        let avg = (0..n).map(|p| b[p * d + j]).sum::<f64>() / n as f64;
        for p in 0..n {
            assert!((m2[p * d + j] - avg).abs() < 1e-6, "mean ablation at {p},{j}");
        }
    }
}

#[test]
fn a_knocked_out_edge_weighs_exactly_zero() {
    let m = model("gpt2");
    let doc =
        trace_json(&[S, "--model", &m, "--steps", "weights", "--knockout", "0.1:5->2", "--knockout", "1:6->small"]);
    let (shape, w) = weights(&doc, 0);
    let (h, n) = (shape[0], shape[1]);
    assert_eq!(w[(n + 5) * n + 2], 0.0);
    for g in 0..h {
        for q in 0..n {
            let sum: f64 = (0..n).map(|k| w[(g * n + q) * n + k]).sum();
            assert!((sum - 1.0).abs() < 1e-5, "row {g},{q} sums to {sum}");
        }
    }
    let small = doc["input"]["tokens"].as_array().unwrap().iter().position(|t| t == "Ġsmall").unwrap();
    let (_, w1) = weights(&doc, 1);
    for g in 0..h {
        assert_eq!(w1[(g * n + 6) * n + small], 0.0, "head {g}: every head of layer 1");
    }
    assert_eq!(doc["config"]["interventions"]["knockout"][1]["head"], Value::Null);
}

#[test]
fn stats_and_rollout_follow_their_definitions() {
    let m = model("mistral");
    let doc = trace_json(&[S, "--model", &m, "--steps", "weights", "--stats", "--rollout"]);
    let stats = doc["stats"].as_array().unwrap();
    let layers = doc["config"]["layers"].as_u64().unwrap() as usize;
    let mut rollout: Option<Vec<f64>> = None;
    for l in 0..layers {
        let (shape, w) = weights(&doc, l);
        let (h, n) = (shape[0], shape[1]);
        for g in 0..h {
            let s = stats.iter().find(|s| s["layer"] == l && s["head"] == g).unwrap();
            let at = |q: usize, k: usize| w[(g * n + q) * n + k];
            let entropy = (0..n)
                .map(|q| (0..n).map(|k| at(q, k)).filter(|&x| x > 0.0).map(|x| -x * x.ln()).sum::<f64>())
                .sum::<f64>()
                / n as f64;
            let dist = (0..n).map(|q| (0..n).map(|k| at(q, k) * (q as f64 - k as f64).abs()).sum::<f64>()).sum::<f64>()
                / n as f64;
            let first = (0..n).map(|q| at(q, 0)).sum::<f64>() / n as f64;
            let prev = (1..n).map(|q| at(q, q - 1)).sum::<f64>() / (n - 1) as f64;
            for (key, want) in
                [("entropy", entropy), ("mean_distance", dist), ("first_token", first), ("previous_token", prev)]
            {
                let got = s[key].as_f64().unwrap();
                assert!((got - want).abs() < 1e-6, "layer {l} head {g} {key}: {got} vs {want}");
            }
        }
        // A = ½·mean over heads + ½·I; R_l = A_l·R_(l−1).
        let a: Vec<f64> = (0..n * n)
            .map(|i| {
                0.5 * (0..h).map(|g| w[g * n * n + i]).sum::<f64>() / h as f64 + if i / n == i % n { 0.5 } else { 0.0 }
            })
            .collect();
        let r = match &rollout {
            None => a,
            Some(prev) => (0..n * n).map(|i| (0..n).map(|m| a[(i / n) * n + m] * prev[m * n + i % n]).sum()).collect(),
        };
        let got = flat(&doc["rollout"]["layers"][l]["values"]);
        for (x, y) in got.iter().zip(&r) {
            assert!((x - y).abs() < 1e-6, "rollout layer {l}: {x} vs {y}");
        }
        rollout = Some(r);
    }
}

#[test]
fn the_lens_at_the_last_layer_is_the_prediction() {
    let m = model("qwen2");
    let doc = trace_json(&[S, "--model", &m, "--steps", "output", "--lens"]);
    let lens = doc["lens"].as_array().unwrap();
    assert_eq!(lens.len(), doc["config"]["layers"].as_u64().unwrap() as usize);
    let last = &lens[lens.len() - 1]["top"];
    for (pos, p) in doc["predictions"].as_array().unwrap().iter().enumerate() {
        assert_eq!(last[pos][0]["id"], p["top"][0]["id"], "position {pos}");
        assert_eq!(last[pos][0]["prob"], p["top"][0]["prob"], "position {pos}");
    }
}

#[test]
fn interventions_that_name_nothing_are_refused() {
    let m = model("llama-gqa");
    let tiny = root().join("fixtures/tiny-bert");
    for (args, fragment) in [
        (vec![S, "--model", &m, "--ablate", "2.0"], "layer 2 does not exist; the model has layers 0 to 1"),
        (vec![S, "--model", &m, "--ablate", "0.4"], "head 4 does not exist; the model has heads 0 to 3"),
        (vec![S, "--model", &m, "--ablate", "x"], "is not LAYER.HEAD"),
        (vec![S, "--model", &m, "--knockout", "0.1:are->shoes"], "is ambiguous"),
        (vec![S, "--model", &m, "--knockout", "0.1:99->0"], "position 99 is past the last token"),
        (vec![S, "--model", &m, "--knockout", "0.1-2"], "is not L[.H]:Q->K"),
        (vec![S, "--model", tiny.to_str().unwrap(), "--lens"], "needs a language-model head"),
        (vec![S, "--model", &m, "--rollout", "--head", "1"], "--rollout"),
    ] {
        refused(&args, fragment);
    }
}

/// Against transformers' head_mask and hand-written PyTorch hooks (fixtures/oracle/
/// interventions, made by fixtures/oracle/intervention_oracle.py): every recorded step after
/// the intervention within 1e-4, and the lens's top-1 token per layer and position.
#[test]
fn interventions_match_pytorch() {
    let dir = root().join("fixtures/oracle/interventions");
    let entries = std::fs::read_dir(&dir).unwrap();
    let mut oracle = Oracle::new("PyTorch", (1e-4, 1e-4));
    let mut n = 0;
    for e in entries {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let case: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let args: Vec<String> =
            case["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = cmd().current_dir(root()).args(&args).args(["--format", "json"]).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        // The lens fixtures hold no steps, only the lens's top tokens.
        if let Some(want) = case.get("steps") {
            oracle.compare(&name, &Want::steps(want), &steps(&doc));
        }
        for (l, layer) in case["lens"].as_array().into_iter().flatten().enumerate() {
            for (pos, top) in layer["top"].as_array().unwrap().iter().enumerate() {
                assert_eq!(doc["lens"][l]["top"][pos][0]["id"], top[0]["id"], "{name}: lens layer {l} position {pos}");
            }
        }
        n += 1;
    }
    assert!(n >= 10, "only {n} intervention fixtures");
    oracle.finish(&format!("{n} intervention fixtures"));
}

#[test]
fn patching_the_last_output_restores_the_clean_metric() {
    // The metric reads the last position's final hidden state: copying the clean run's last
    // layer output there restores the clean metric exactly (effect 1), and copying any other
    // position of the last layer changes nothing (effect 0: nothing after it reads them).
    let m = model("llama-gqa");
    let doc = trace_json(&[
        "The capital of France is",
        "--model",
        &m,
        "--steps",
        "tokens",
        "--patch",
        "The capital of Spain is",
        "--patch-what",
        "resid",
        "--metric",
        " Paris",
        " the",
    ]);
    let p = &doc["patching"];
    assert_ne!(p["clean_metric"], p["corrupted_metric"]);
    let rows = p["rows"].as_array().unwrap();
    let layers = doc["config"]["layers"].as_u64().unwrap();
    let n = doc["input"]["tokens"].as_array().unwrap().len() as u64;
    for r in rows.iter().filter(|r| r["layer"] == layers - 1) {
        let want = if r["position"] == n - 1 { 1.0 } else { 0.0 };
        assert!((r["effect"].as_f64().unwrap() - want).abs() < 1e-5, "{r}");
    }
    // Heads: one row per layer × head; prefix reuse computes fewer layer runs.
    let doc = trace_json(&[
        "The capital of France is",
        "--model",
        &m,
        "--steps",
        "tokens",
        "--patch",
        "The capital of Spain is",
        "--metric",
        " Paris",
        " the",
    ]);
    let p = &doc["patching"];
    assert_eq!(p["rows"].as_array().unwrap().len() as u64, layers * doc["config"]["heads"].as_u64().unwrap());
    assert!(p["layer_runs"].as_u64() < p["layer_runs_without_reuse"].as_u64());
    // Different token lengths: an error that shows both tokenizations.
    let out = cmd()
        .args([
            "The capital of France is",
            "--model",
            &m,
            "--patch",
            "The capital of the United Kingdom is",
            "--metric",
            " Paris",
            " the",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("7 and 19 tokens: [") && err.contains("\"do\""), "{err}");
}

#[test]
fn induction_scores_follow_their_definition() {
    // N random tokens repeated twice (after the tokenizer's BOS): the score is the mean weight
    // from each token of the second repeat to the token after its first occurrence.
    let m = model("llama-gqa");
    let n_rep = 6;
    let doc = trace_json(&["ignored", "--model", &m, "--stats", "--induction", "6", "--steps", "weights"]);
    let ids = doc["input"]["token_ids"].as_array().unwrap();
    let n = ids.len();
    assert_eq!(n, 1 + 2 * n_rep, "BOS + two repeats");
    assert_eq!(ids[1..1 + n_rep], ids[1 + n_rep..]);
    assert_eq!(doc["config"]["interventions"]["induction"], 6);
    for s in doc["stats"].as_array().unwrap() {
        let (l, g) = (s["layer"].as_u64().unwrap() as usize, s["head"].as_u64().unwrap() as usize);
        let (_, w) = weights(&doc, l);
        let want = (n - n_rep..n).map(|q| w[(g * n + q) * n + q - n_rep + 1]).sum::<f64>() / n_rep as f64;
        assert!((s["induction"].as_f64().unwrap() - want).abs() < 1e-6, "{s}");
    }
}

/// Masked-word predictions against transformers' BertForMaskedLM on a tiny checkpoint it made
/// (fixtures/tiny-bert-mlm, fixtures/oracle/mlm by mlm_oracle.py): the logits at the mask
/// within 1e-5 and the top-5 fillers in order; a checkpoint without the head is an error.
#[test]
fn masked_words_match_bert_for_masked_lm() {
    let dir = root().join("fixtures/tiny-bert-mlm");
    const TOL: (f64, f64) = (1e-5, 1e-5);
    let mut oracle = Oracle::new("transformers", TOL);
    for name in ["shoes", "small"] {
        let case: Value = serde_json::from_str(
            &std::fs::read_to_string(root().join(format!("fixtures/oracle/mlm/{name}.json"))).unwrap(),
        )
        .unwrap();
        let sentence = case["sentence"].as_str().unwrap();
        let doc = trace_json(&[sentence, "--model", dir.to_str().unwrap(), "--steps", "logits"]);
        assert_eq!(doc["input"]["token_ids"], case["input_ids"], "{name}");
        assert_eq!(doc["config"]["masked_lm"], true);
        let (shape, logits) = &steps(&doc)["logits"];
        let vocab = shape[1];
        for m in case["masks"].as_array().unwrap() {
            let p = m["position"].as_u64().unwrap() as usize;
            let what = format!("{name}: logits at position {p}");
            oracle.values(&what, &[vocab], &logits[p * vocab..(p + 1) * vocab], &flat(&m["logits"]), TOL, |_| true);
            let top = &doc["predictions"][p]["top"];
            for (k, want) in m["top5"].as_array().unwrap().iter().enumerate() {
                assert_eq!(top[k]["id"], want["id"], "{name}: filler {k}");
            }
        }
    }
    oracle.finish("masked-LM logits");
    let minilm = root().join(".cache/models/all-MiniLM-L6-v2");
    let out = cmd().args(["my shoes are [MASK].", "--model", minilm.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no masked-LM head"), "{err}");
}
