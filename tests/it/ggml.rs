//! `--arithmetic ggml` against llama.cpp itself: the fixtures in fixtures/oracle/llamacpp/ are
//! llama.cpp's own intermediate tensors and greedy generations (llama-cpp-python 0.3.36 built
//! for AVX2 + FMA, an evaluation callback, f16 KV cache, flash attention off;
//! fixtures/oracle/llamacpp_oracle.py and llamacpp_generate.py).
//!
//! SmolLM2's file (Q4_1 weights, a Q8_0 head) and Gemma 3's (Q5_0, Q8_0, Q4_K, Q6_K) are
//! computed with llama.cpp's own kernels throughout, so every recorded value must be llama.cpp's
//! bit for bit, and greedy generation must write llama.cpp's tokens.

use crate::common::*;
use crate::gemma3::gemma3;
use crate::gguf::smollm2;
use std::collections::BTreeMap;

fn fixture(name: &str) -> Steps {
    let path = root().join("fixtures/oracle/llamacpp").join(name);
    let bytes = std::fs::read(&path).unwrap();
    let named = attn_trace::export::npz::read(&bytes, name).unwrap();
    let mut out = BTreeMap::new();
    for n in named {
        if let attn_trace::export::Data::Num(v) = n.data {
            out.insert(n.name, (n.shape, v));
        }
    }
    out
}

/// The capital sentence's trace of `model` (SmolLM2 without its BOS, Gemma 3 with it, as
/// the fixtures fed llama.cpp), and the ids it was given.
fn traced(model: &str, arithmetic: &str) -> (Steps, serde_json::Value) {
    let mut args = vec!["The capital of France is", "--model", model, "--arithmetic", arithmetic];
    args.extend(["--steps", "add_norm2.sum,attn.weights"]);
    let doc = trace_json(&args);
    (steps(&doc), doc["input"]["token_ids"].clone())
}

/// (max |a − b| / max |b|, root mean square of a − b over that of b).
fn distance(a: &[f64], b: &[f64]) -> (f64, f64) {
    assert_eq!(a.len(), b.len());
    let max_b = b.iter().fold(0f64, |m, v| m.max(v.abs()));
    let max_d = a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs()));
    let rms = |v: &mut dyn Iterator<Item = f64>| v.map(|x| x * x).sum::<f64>().sqrt();
    (max_d / max_b, rms(&mut a.iter().zip(b).map(|(x, y)| x - y)) / rms(&mut b.iter().copied()))
}

/// `sentence` traced by `--arithmetic ggml` with every step of the fixture `name`, saved as
/// npz (f32, so equal bits read back as equal f64s), and the fixture.
fn saved(sentence: &str, name: &str, model: &str) -> (Steps, Steps) {
    let reference = fixture(name);
    // `layers.3.attn.weights` → `attn.weights`; `final_norm.out` stays.
    let mut steps: Vec<&str> = reference
        .keys()
        .map(|k| k.strip_prefix("layers.").and_then(|r| r.split_once('.')).map_or(k.as_str(), |(_, s)| s))
        .collect();
    steps.sort_unstable();
    steps.dedup();
    let steps = steps.join(",");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.npz");
    // SmolLM2's file adds no BOS; Gemma's does (`<bos>`), as llama.cpp's tokenizer does.
    let special: &[&str] = if model.contains("smollm2") { &["--no-special-tokens"] } else { &[] };
    let args = [sentence, "--model", model, "--arithmetic", "ggml", "--steps", &steps];
    let out = cmd().args(args).args(special).args(["--save-trace", file.to_str().unwrap(), "-q"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&file).unwrap();
    let mut ours = BTreeMap::new();
    for n in attn_trace::export::npz::read(&bytes, "t.npz").unwrap() {
        if let attn_trace::export::Data::Num(v) = n.data {
            ours.insert(n.name, (n.shape, v));
        }
    }
    (ours, reference)
}

#[test]
fn ggml_arithmetic_is_llama_cpps_bit_for_bit() {
    let long = "Attention lets every token look back at the tokens before it, so the model reads a sentence one \
                token at a time.";
    let (smollm2, gemma3) = (smollm2(), gemma3());
    let cases = [
        ("The capital of France is", "smollm2_capital.npz", &smollm2),
        (long, "smollm2_long.npz", &smollm2),
        // Q5_0, Q8_0, repacked Q4_K and Q6_K products, q/k norms, sandwich norms, GELU.
        ("The capital of France is", "gemma3_capital.npz", &gemma3),
    ];
    for (sentence, name, model) in cases {
        let (ours, reference) = saved(sentence, name, model);
        assert_eq!(ours["token_ids"], reference["token_ids"], "{name}");
        for (id, (shape, values)) in &reference {
            let (our_shape, our_values) = ours.get(id).unwrap_or_else(|| panic!("{name}: no {id}"));
            assert_eq!(our_shape, shape, "{name} {id}");
            let differ = our_values.iter().zip(values).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            assert_eq!(differ, 0, "{name} {id}: {differ} of {} values are not llama.cpp's", values.len());
        }
    }
    // The f32 arithmetic is not llama.cpp's: layer 0 already differs by 4e-3 of its largest value.
    let ((f32, _), reference) = (traced(&smollm2, "f32"), fixture("smollm2_capital.npz"));
    let id = "layers.0.add_norm2.sum";
    let (f, _) = distance(&f32[id].1, &reference[id].1);
    assert!(f > 1e-3, "{id}: f32 {f:.2e}");
}

#[test]
fn ggml_generation_writes_llama_cpps_tokens() {
    // (fixture, model, cases, tokens checked): llama.cpp's greedy 40; fewer here to keep the
    // debug build's test short (every arithmetic tried otherwise parts within them).
    let (smollm2, gemma3) = (smollm2(), gemma3());
    let runs = [
        ("smollm2_greedy.json", &smollm2, vec!["capital", "story"], 16),
        ("gemma3_greedy.json", &gemma3, vec!["story"], 8),
    ];
    for (file, model, cases, count) in runs {
        let path = root().join("fixtures/oracle/llamacpp").join(file);
        let oracle: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        for name in cases {
            let case = &oracle["cases"][name];
            let text = case["text"].as_str().unwrap();
            let ids = case["generated_ids"].as_array().unwrap();
            let want: Vec<u64> = ids.iter().take(count).map(|v| v.as_u64().unwrap()).collect();
            let n = count.to_string();
            let special: &[&str] = if file.starts_with("smollm2") { &["--no-special-tokens"] } else { &[] };
            let run = |arithmetic: &str| -> Vec<u64> {
                let args =
                    [text, "--model", model, "--arithmetic", arithmetic, "--generate", &n, "--steps", "ids", "-q"];
                let doc = trace_json(&[&args[..], special].concat());
                assert_eq!(doc["input"]["token_ids"], case["prompt_ids"], "{file} {name}");
                doc["generation"]["tokens"].as_array().unwrap().iter().map(|t| t["id"].as_u64().unwrap()).collect()
            };
            assert_eq!(run("ggml"), want, "{file} {name}: llama.cpp wrote other tokens");
            if name == "capital" || file.starts_with("gemma3") {
                // f32 parts from llama.cpp within these tokens (at a near tie its arithmetic decides).
                assert_ne!(run("f32"), want, "{file} {name}");
            }
        }
    }
}

#[test]
fn the_arithmetic_is_in_the_config_the_header_and_diff() {
    let model = smollm2();
    let doc = trace_json(&["Paris", "--model", &model, "--arithmetic", "ggml", "--steps", "logits"]);
    assert_eq!(doc["config"]["arithmetic"], "ggml");
    let plain = trace_json(&["Paris", "--model", &model, "--steps", "logits"]);
    assert!(plain["config"].get("arithmetic").is_none(), "f32, the default, is not written");
    let out = cmd().args(["Paris", "--model", &model, "--arithmetic", "ggml", "--steps", "logits"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("computed as llama.cpp computes them: --arithmetic ggml"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    std::fs::write(&a, serde_json::to_vec(&doc).unwrap()).unwrap();
    std::fs::write(&b, serde_json::to_vec(&plain).unwrap()).unwrap();
    let out = cmd().args(["diff", a.to_str().unwrap(), b.to_str().unwrap()]).output().unwrap();
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(report.contains("computed as llama.cpp computes it (--arithmetic ggml)"), "{report}");
    assert!(report.contains("computed in f32 on the dequantized GGUF weights"), "{report}");
}

#[test]
fn ggml_arithmetic_without_a_gguf_file_or_with_attribution_is_refused() {
    let (gpt2, model) = (root().join("fixtures/decoders/gpt2"), smollm2());
    for args in [
        vec!["hello", "--arithmetic", "ggml"],
        vec!["hello", "--model", gpt2.to_str().unwrap(), "--arithmetic", "ggml"],
        // Not a sum of parts: direct logit attribution's check could not hold.
        vec!["Paris", "--model", &model, "--arithmetic", "ggml", "--attribute", " is"],
    ] {
        refused(&args, "--arithmetic ggml");
    }
}
