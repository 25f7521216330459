//! Weights files that carry their settings (issue 17, item 5): `--save-weights` writes every
//! setting that shapes the numbers and the input into the safetensors `__metadata__`, and
//! `--weights FILE` alone reproduces the trace.

use crate::cli::assert_usage_error;
use crate::common::cmd;
use serde_json::Value;
use std::path::Path;

const S: &str = "my shoes are small, my feet are big.";

/// A toy encoder far from every default, and a toy decoder with every decoder part.
const ENCODER: &[&str] = &[
    "--d-model",
    "8",
    "--heads",
    "2",
    "--d-k",
    "3",
    "--d-v",
    "5",
    "--d-ff",
    "12",
    "--layers",
    "2",
    "--max-len",
    "12",
    "--causal",
    "--norm",
    "pre",
    "--activation",
    "gelu",
    "--eps",
    "1e-6",
    "--scale",
    "0.3",
    "--attn-bias",
    "--no-ffn-bias",
];
const DECODER: &[&str] = &[
    "--d-model",
    "8",
    "--heads",
    "4",
    "--kv-heads",
    "2",
    "--positions",
    "rope",
    "--rope-theta",
    "500",
    "--rms-norm",
    "--gated",
    "--activation",
    "silu",
    "--final-norm",
    "--lm-head",
    "tied",
    "--norm",
    "pre",
    "--causal",
    "--bos",
    "<s>",
];

fn run(args: &[&str]) -> Vec<u8> {
    let out = cmd().args(args).args(["--format", "json", "--steps", "all"]).output().unwrap();
    assert!(out.status.success(), "attn-trace {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn metadata(path: &Path) -> serde_json::Map<String, Value> {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    header["__metadata__"].as_object().unwrap().clone()
}

/// The same document without `config.init` (seeded runs say how they drew, file runs name
/// the file).
fn without_init(json: &[u8]) -> Value {
    let mut doc: Value = serde_json::from_slice(json).unwrap();
    doc["config"].as_object_mut().unwrap().remove("init");
    doc
}

#[test]
fn the_file_alone_reproduces_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    for (flags, sentence) in [(ENCODER, S), (DECODER, "the cat sat on the mat")] {
        let w = dir.path().join("w.safetensors");
        let w = w.to_str().unwrap();
        let mut save: Vec<&str> = vec![sentence];
        save.extend(flags);
        let seeded = run(&[save.as_slice(), &["--save-weights", w]].concat());
        let alone = run(&["--weights", w]);
        let restated = run(&[save.as_slice(), &["--weights", w]].concat());
        assert_eq!(alone, restated, "{flags:?}: the file alone and the file with its flags differ");
        assert_eq!(without_init(&seeded), without_init(&alone), "{flags:?}: the file does not reproduce the run");
        let doc: Value = serde_json::from_slice(&alone).unwrap();
        assert_eq!(doc["config"]["init"], serde_json::json!({"kind": "file", "path": w}));
        // Saving again from the file gives the same bytes: the metadata is written in key order.
        let again = dir.path().join("again.safetensors");
        run(&["--weights", w, "--save-weights", again.to_str().unwrap()]);
        assert_eq!(std::fs::read(w).unwrap(), std::fs::read(&again).unwrap(), "{flags:?}");
    }
}

#[test]
fn the_metadata_holds_the_settings_and_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.safetensors");
    let args = [&[S], ENCODER, &["--save-weights", w.to_str().unwrap()]].concat();
    cmd().args(args).assert().success();
    let m = metadata(&w);
    let want = [
        ("format", "attn-trace-weights"),
        ("d_model", "8"),
        ("heads", "2"),
        ("kv_heads", "2"),
        ("d_k", "3"),
        ("d_v", "5"),
        ("d_ff", "12"),
        ("layers", "2"),
        ("max_len", "12"),
        ("vocab_size", "6"),
        ("positions", "learned"),
        ("causal", "true"),
        ("norm", "pre"),
        ("activation", "gelu"),
        ("eps", "0.000001"),
        ("scale", "0.3"),
        ("attn_bias", "true"),
        ("ffn_bias", "false"),
        ("rms_norm", "false"),
        ("lm_head", "none"),
        ("sentence", S),
        ("tokens", r#"["my","shoes","are","small","my","feet","are","big."]"#),
        ("token_ids", "[0,1,2,3,0,4,2,5]"),
    ];
    for (k, v) in want {
        assert_eq!(m.get(k).and_then(Value::as_str), Some(v), "metadata {k}");
    }
}

#[test]
fn a_flag_that_contradicts_the_file_names_both_values() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.safetensors");
    let w = w.to_str().unwrap();
    cmd().args([&[S], ENCODER, &["--save-weights", w]].concat()).assert().success();
    let name = format!("--weights {w}");
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec!["--heads", "4"], format!("--heads 4 contradicts {name}, which has 2")),
        (vec!["--d-k", "4"], format!("--d-k 4 contradicts {name}, which has 3")),
        (vec!["--scale", "0.5"], format!("--scale 0.5 contradicts {name}, which has 0.3")),
        (vec!["--eps", "1e-5"], format!("--eps 0.00001 contradicts {name}, which has 0.000001")),
        (vec!["--norm", "post"], format!("--norm post contradicts {name}, which has pre")),
        (vec!["--activation", "relu"], format!("--activation relu contradicts {name}, which has gelu")),
        (vec!["--positions", "sinusoidal"], format!("--positions sinusoidal contradicts {name}, which has learned")),
        (vec!["--max-len", "20"], format!("--max-len 20 contradicts {name}, which has 12")),
        (vec!["--rms-norm"], format!("--rms-norm contradicts {name}, which was saved without it")),
        (vec!["--lm-head", "tied"], format!("--lm-head tied contradicts {name}, which has none")),
    ];
    for (flags, want) in cases {
        assert_usage_error(&[&["--weights", w], flags.as_slice()].concat(), &want);
    }
    // A flag that agrees with the file is accepted.
    cmd().args(["--weights", w, "--heads", "2", "--causal", "--scale", "0.3"]).assert().success();
}

#[test]
fn a_new_sentence_or_an_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.safetensors");
    let w = w.to_str().unwrap();
    cmd().args([&[S], ENCODER, &["--save-weights", w]].concat()).assert().success();
    // A sentence of its own replaces the stored input; the settings still come from the file.
    let doc: Value = serde_json::from_slice(&run(&["my feet are small", "--weights", w])).unwrap();
    assert_eq!(doc["input"]["sentence"], "my feet are small");
    assert_eq!(doc["config"]["heads"], 2);
    assert_eq!(doc["config"]["causal"], true);
    // A file without attn-trace's metadata (an older --save-weights, another program's) takes
    // its settings from the flags and the shapes, as before.
    let old = dir.path().join("old.safetensors");
    std::fs::write(&old, with_metadata(w, serde_json::json!({"format": "pt"}))).unwrap();
    let old = old.to_str().unwrap();
    assert_usage_error(&[S, "--weights", old, "--heads", "4"], "cannot split evenly");
    assert_usage_error(&["--weights", old], "sentence: none was given");
    let doc: Value = serde_json::from_slice(&run(&[S, "--weights", old, "--heads", "2", "--d-k", "3"])).unwrap();
    assert_eq!(doc["config"]["causal"], false, "an old file has no causal flag to give");
}

#[test]
fn a_raw_matrix_run_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.json");
    std::fs::write(&x, "[[0.5, 0.4, 0.1], [0.8, 0.6, 0.2]]").unwrap();
    let w = dir.path().join("w.safetensors");
    let (x, w) = (x.to_str().unwrap(), w.to_str().unwrap());
    cmd().args(["--input", x, "--heads", "3", "--save-weights", w]).assert().success();
    assert_usage_error(&["--weights", w], "was saved from a raw --input matrix");
    let a = run(&["--input", x, "--weights", w]);
    let b = run(&["--input", x, "--weights", w, "--heads", "3"]);
    assert_eq!(a, b);
}

#[test]
fn a_json_weights_file_may_carry_the_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::common::root().join("fixtures/seeds/001_two_heads.json");
    let p = path.to_str().unwrap();
    let full = dir.path().join("full.safetensors");
    let args = ["the cat sat", "--weights", p, "--heads", "2", "--causal", "--scale", "0.25"];
    let flags = run(&args);
    cmd().args(args).arg("--save-weights").arg(&full).assert().success();
    // The same settings typed by hand into the JSON file: any JSON value is read as its text,
    // so numbers and booleans need no quotes.
    let mut meta = metadata(&full);
    meta.insert("heads".into(), serde_json::json!(2));
    meta.insert("causal".into(), serde_json::json!(true));
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["__metadata__"] = Value::Object(meta);
    let typed = dir.path().join("typed.json");
    std::fs::write(&typed, serde_json::to_vec(&doc).unwrap()).unwrap();
    let alone = run(&["--weights", typed.to_str().unwrap()]);
    assert_eq!(without_init(&flags), without_init(&alone), "the JSON file's metadata gives the same trace");
}

/// The file's bytes with `__metadata__` replaced (the tensors' offsets do not move).
fn with_metadata(path: &str, meta: Value) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    header["__metadata__"] = meta;
    let mut head = serde_json::to_vec(&header).unwrap();
    head.resize(head.len().next_multiple_of(8), b' ');
    [&(head.len() as u64).to_le_bytes()[..], &head, &bytes[8 + n..]].concat()
}
