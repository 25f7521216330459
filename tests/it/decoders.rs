//! Decoder language models against transformers 4.46.3 (fixtures/oracle/decoders, made by
//! fixtures/oracle/decoder_oracle.py from the tiny random checkpoints in fixtures/decoders):
//! every step of every layer, the tokens, and the top-1 next token at every position.
//!
//! Tolerances: attention weights within 1e-5 absolute, every other step within 1e-4 absolute
//! plus 1e-4 relative (logits are larger numbers): the two sides sum in different orders in
//! f32, and the scores are q·k × 1/√d here but q·k / √d in transformers.

use crate::common::*;
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let path = root().join("fixtures/oracle/decoders").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// attention weights within 1e-5 absolute; every other step 1e-4 plus 1e-4 relative.
fn tolerance(id: &str) -> (f64, f64) {
    if id.ends_with("attn.weights") {
        (1e-5, 0.0)
    } else {
        (1e-4, 1e-4)
    }
}

/// Compares every step the fixture `entry` of MANIFEST.json names with attn-trace's trace of
/// the same input, and the predictions.
fn check(oracle: &mut Oracle, entry: &Value) {
    let name = entry["file"].as_str().unwrap();
    let case = fixture(name);
    for key in ["model_dir", "sentence"] {
        assert_eq!(case[key], entry[key], "{name}: {key} differs from MANIFEST.json");
    }
    assert_eq!(case["tokens"].as_array().map(Vec::len), entry["tokens"].as_u64().map(|n| n as usize), "{name}");
    let dir = root().join(case["model_dir"].as_str().unwrap());
    let sentence = case["sentence"].as_str().unwrap();
    let doc = trace_json(&[sentence, "--model", dir.to_str().unwrap(), "--steps", "all"]);
    assert_eq!(doc["input"]["tokens"], case["tokens"], "{name}: tokens");
    assert_eq!(doc["input"]["token_ids"], case["input_ids"], "{name}: ids");
    assert_eq!(doc["config"]["model"]["bos_added"], case["bos_added"], "{name}: BOS");
    let mut want = Want::steps(&case["steps"]);
    // transformers' cos/sin tables: inputs of q_rot/k_rot, not a step here
    want.retain(|w| !w.id.starts_with("rope."));
    let compared = oracle.compare(name, &want, &steps(&doc));
    assert!(compared.steps >= 20, "{name}: only {} steps compared", compared.steps);
    // Top-1 next token at every position, and the probabilities of the top five.
    let top = doc["predictions"].as_array().unwrap_or_else(|| panic!("{name}: no predictions"));
    for (pos, want) in case["top_k"].as_array().unwrap().iter().enumerate() {
        let got = &top[pos]["top"];
        assert_eq!(got[0]["id"], want[0]["id"], "{name}: top-1 at position {pos}");
        for (g, w) in got.as_array().unwrap().iter().zip(want.as_array().unwrap()) {
            let (a, b) = (g["prob"].as_f64().unwrap(), w["prob"].as_f64().unwrap());
            assert!(close(a, b, 1e-5, 1e-4), "{name}: probability at {pos}: {a} vs {b}");
        }
    }
}

/// Every fixture MANIFEST.json lists is on disk and every file on disk is listed, so a stale
/// or unlisted fixture cannot hide; each is then compared.
#[test]
fn every_decoder_fixture_matches_transformers() {
    let manifest = fixture("MANIFEST.json");
    let entries = manifest["fixtures"].as_array().unwrap();
    let mut listed: Vec<&str> = entries.iter().map(|e| e["file"].as_str().unwrap()).collect();
    let mut files: Vec<String> = std::fs::read_dir(root().join("fixtures/oracle/decoders"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|f| f.ends_with(".json") && f != "MANIFEST.json")
        .collect();
    listed.sort();
    files.sort();
    assert_eq!(listed, files, "MANIFEST.json and the fixtures on disk differ");
    assert!(files.len() >= 20, "only {} decoder fixtures", files.len());
    let mut oracle = Oracle::new("transformers", tolerance("")).per_step(tolerance);
    for entry in entries {
        check(&mut oracle, entry);
    }
    oracle.finish(&format!("{} decoder fixtures", entries.len()));
}

#[test]
fn gqa_dims_and_the_query_to_kv_map_are_in_the_json() {
    let dir = root().join("fixtures/decoders/llama-gqa");
    let doc = trace_json(&["my shoes", "--model", dir.to_str().unwrap(), "--steps", "k,q_rot,k_rot"]);
    assert_eq!(doc["config"]["kv_heads"], 2);
    assert_eq!(doc["config"]["kv_head_of_query_head"], serde_json::json!([0, 0, 1, 1]));
    let k = doc["steps"].as_array().unwrap().iter().find(|s| s["id"] == "layers.0.attn.k").unwrap();
    assert_eq!(k["dims"], serde_json::json!(["kv_head", "pos", "d_head"]));
    let q = doc["steps"].as_array().unwrap().iter().find(|s| s["id"] == "layers.0.attn.q_rot").unwrap();
    assert_eq!(q["dims"], serde_json::json!(["head", "pos", "d_head"]));
}

#[test]
fn logits_are_recorded_only_when_named() {
    let dir = root().join("fixtures/decoders/gpt2");
    let d = dir.to_str().unwrap();
    let all = trace_json(&["my shoes", "--model", d]);
    assert!(all["steps"].as_array().unwrap().iter().all(|s| s["id"] != "logits"));
    assert!(all["predictions"].is_array(), "predictions come without logits");
    let named = trace_json(&["my shoes", "--model", d, "--steps", "logits"]);
    let l = &named["steps"][0];
    assert_eq!(l["id"], "logits");
    assert_eq!(l["dims"], serde_json::json!(["pos", "vocab"]));
}

#[test]
fn bad_decoder_folders_are_one_line_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = |model: &str| {
        let dst = tmp.path().join(format!("{model}-{}", rand_suffix()));
        std::fs::create_dir_all(&dst).unwrap();
        for e in std::fs::read_dir(root().join("fixtures/decoders").join(model)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
        dst
    };
    let edit = |dir: &std::path::Path, f: &dyn Fn(&mut Value)| {
        let p = dir.join("config.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        f(&mut v);
        std::fs::write(&p, v.to_string()).unwrap();
    };
    let expect = |dir: &std::path::Path, extra: &[&str], fragment: &str| {
        let mut args = vec!["my shoes are small", "--model", dir.to_str().unwrap()];
        args.extend(extra);
        let err = refused(&args, fragment);
        assert!(!err.contains("panicked"), "{err}");
    };
    // A shard named by the index is missing.
    let d = copy("llama-sharded");
    let shard = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("-of-"))
        .unwrap();
    std::fs::remove_file(&shard).unwrap();
    expect(&d, &[], "is missing");
    // A tensor whose shape contradicts config.json (names the tensor and both shapes).
    let d = copy("llama-gqa");
    edit(&d, &|v| v["intermediate_size"] = 48.into());
    expect(&d, &[], "mlp.up_proj.weight has shape [64, 32] but config.json implies [48, 32]");
    // Heads not divisible by key/value heads.
    let d = copy("llama-gqa");
    edit(&d, &|v| v["num_key_value_heads"] = 3.into());
    expect(&d, &[], "not divisible by num_key_value_heads 3");
    // No lm_head and untied embeddings.
    let d = copy("llama-tied");
    edit(&d, &|v| v["tie_word_embeddings"] = false.into());
    expect(&d, &[], "no lm_head.weight");
    // An unsupported rope scaling and an unsupported family.
    let d = copy("llama-gqa");
    edit(&d, &|v| v["rope_scaling"] = serde_json::json!({"rope_type": "yarn", "factor": 2.0}));
    expect(&d, &[], "rope_scaling type \"yarn\" is not supported");
    let d = copy("llama-gqa");
    edit(&d, &|v| v["model_type"] = "falcon".into());
    expect(&d, &[], "architecture \"falcon\" (config.json's model_type) is not supported");
    // An input longer than the model's positions, unless --truncate.
    let long = "my shoes are small ".repeat(40);
    let out = cmd()
        .args([long.as_str(), "--model", root().join("fixtures/decoders/gpt2").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--truncate"));
    let doc = trace_json(&[
        long.as_str(),
        "--model",
        root().join("fixtures/decoders/gpt2").to_str().unwrap(),
        "--truncate",
        "--steps",
        "output",
    ]);
    assert_eq!(doc["input"]["tokens"].as_array().unwrap().len(), 64);
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

#[test]
fn a_toy_decoder_round_trips_through_its_weights_file() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.safetensors");
    let w = w.to_str().unwrap();
    let block =
        ["--positions", "rope", "--rms-norm", "--activation", "silu", "--norm", "pre", "--causal", "--heads", "2"];
    let mut save = vec!["my shoes are small", "--d-model", "8", "--kv-heads", "1", "--gated", "--final-norm"];
    save.extend(["--lm-head", "own", "--steps", "all", "--save-weights", w]);
    save.extend(block);
    let a = trace_json(&save);
    let mut load = vec!["my shoes are small", "--weights", w, "--steps", "all"];
    load.extend(block);
    let b = trace_json(&load);
    assert_eq!(a["steps"], b["steps"], "the reloaded toy decoder differs");
    assert_eq!(b["config"]["kv_heads"], 1);
    assert_eq!(b["config"]["gated_ffn"], true);
    assert_eq!(b["config"]["lm_head"]["tied"], false);
    assert!(b["predictions"].is_array());
    // Rotary positions turn pairs: an odd d_k is refused; kv heads must divide the heads.
    let out = cmd().args(["a b", "--d-model", "6", "--heads", "2", "--positions", "rope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = cmd().args(["a b", "--heads", "2", "--kv-heads", "3", "--d-model", "6"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--kv-heads"));
}
