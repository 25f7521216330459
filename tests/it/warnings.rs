//! Notes where a trace cannot match what the user may think (issue 17, item 7): `--causal`
//! on a bidirectional checkpoint, a BERT config with `is_decoder` (checked against
//! transformers 4.46.3, fixtures/oracle/is_decoder_oracle.py), and weights stored in bf16
//! but computed in f32 (recorded in `config`).

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;

/// Runs attn-trace; returns (JSON document, stderr), asserting success.
fn traced(args: &[&str]) -> (Value, String) {
    let out = cmd().args(args).args(["--format", "json", "--steps", "all"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "attn-trace {args:?}: {err}");
    (serde_json::from_slice(&out.stdout).unwrap(), err)
}

/// A copy of fixtures/tiny-bert whose config.json is changed by `edit`.
fn tiny_with(edit: impl Fn(&mut Value)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in ["model.safetensors", "tokenizer.json"] {
        std::fs::copy(root().join("fixtures/tiny-bert").join(f), dir.path().join(f)).unwrap();
    }
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(root().join("fixtures/tiny-bert/config.json")).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(dir.path().join("config.json"), serde_json::to_vec(&config).unwrap()).unwrap();
    dir
}

#[test]
fn causal_on_a_bidirectional_encoder_is_noted() {
    let tiny = root().join("fixtures/tiny-bert");
    let model = tiny.to_str().unwrap();
    let (doc, err) = traced(&["my shoes are small", "--model", model, "--causal"]);
    assert!(err.contains("--causal hides later tokens, but --model") && err.contains("bidirectional encoder"), "{err}");
    assert_eq!(err.lines().count(), 1, "one note: {err}");
    assert_eq!(doc["config"]["causal"], true);
    let (_, err) = traced(&["my shoes are small", "--model", model]);
    assert!(err.is_empty(), "no note without --causal: {err}");
    let (_, err) = traced(&["my shoes are small", "--model", model, "--causal", "--quiet"]);
    assert!(err.is_empty(), "--quiet: {err}");
}

#[test]
fn an_is_decoder_config_is_noted_and_matches_transformers_with_causal() {
    let dir = tiny_with(|c| c["is_decoder"] = json!(true));
    let model = dir.path().to_str().unwrap();
    let case: Value =
        serde_json::from_slice(&std::fs::read(root().join("fixtures/oracle/bert_is_decoder/tiny-bert.json")).unwrap())
            .unwrap();
    let sentence = case["sentence"].as_str().unwrap();
    let (_, err) = traced(&[sentence, "--model", model]);
    assert!(
        err.contains("sets is_decoder, so transformers hides later tokens") && err.contains("add --causal"),
        "{err}"
    );
    let (doc, err) = traced(&[sentence, "--model", model, "--causal"]);
    assert!(err.is_empty(), "--causal is what the config asks for: {err}");
    assert_eq!(doc["input"]["token_ids"], case["input_ids"]);
    let s = steps(&doc);
    // transformers' numbers are rounded to 7 significant digits; attn-trace's f32 arithmetic
    // follows the same operations, so 1e-5 leaves room for summation order only.
    let mut want = Vec::new();
    for (l, a) in case["attentions"].as_array().unwrap().iter().enumerate() {
        want.push(Want::values(format!("layers.{l}.attn.weights"), a));
        want.push(Want::values(format!("layers.{l}.add_norm2.out"), &case["hidden_states"][l + 1]));
    }
    let mut oracle = Oracle::new("transformers", (1e-5, 1e-5));
    let compared = oracle.compare("bert_is_decoder/tiny-bert.json", &want, &s).values;
    oracle.finish("is_decoder BERT");
    assert!(compared > 300, "the fixture holds every layer ({compared} values)");
}

/// Rewrites a safetensors file with every f32 tensor rounded to bf16 (by truncation: any bf16
/// value will do), stored as bf16 when `as_bf16`, else widened back to f32. Other tensors and
/// `__metadata__` are kept.
fn rounded_to_bf16(src: &Path, dst: &Path, as_bf16: bool) {
    let bytes = std::fs::read(src).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, Value> = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let (mut out_header, mut out_data) = (serde_json::Map::new(), Vec::new());
    for (name, info) in &header {
        if name == "__metadata__" {
            out_header.insert(name.clone(), info.clone());
            continue;
        }
        let off = info["data_offsets"].as_array().unwrap();
        let raw = &data[off[0].as_u64().unwrap() as usize..off[1].as_u64().unwrap() as usize];
        let start = out_data.len();
        let mut info = info.clone();
        if info["dtype"] == "F32" {
            for c in raw.chunks_exact(4) {
                let top = (u32::from_le_bytes(c.try_into().unwrap()) >> 16) as u16;
                if as_bf16 {
                    out_data.extend_from_slice(&top.to_le_bytes());
                } else {
                    out_data.extend_from_slice(&((top as u32) << 16).to_le_bytes());
                }
            }
            if as_bf16 {
                info["dtype"] = json!("BF16");
            }
        } else {
            out_data.extend_from_slice(raw);
        }
        info["data_offsets"] = json!([start, out_data.len()]);
        out_header.insert(name.clone(), info);
    }
    let mut head = serde_json::to_vec(&out_header).unwrap();
    head.resize(head.len().next_multiple_of(8), b' ');
    std::fs::write(dst, [&(head.len() as u64).to_le_bytes()[..], &head, &out_data].concat()).unwrap();
}

/// The document without the fields that name the file, and the notes (the stored type's).
fn numbers(mut doc: Value) -> Value {
    doc.as_object_mut().unwrap().remove("notes");
    let c = doc["config"].as_object_mut().unwrap();
    c.remove("init");
    if let Some(m) = c.get_mut("model").and_then(Value::as_object_mut) {
        m.remove("path");
        m.remove("stored_dtype");
    }
    doc
}

#[test]
fn bf16_toy_weights_are_noted_recorded_and_computed_in_f32() {
    let dir = tempfile::tempdir().unwrap();
    let f32_file = dir.path().join("w.safetensors");
    cmd().args(["my shoes are small", "--heads", "2", "--save-weights", f32_file.to_str().unwrap()]).assert().success();
    let (bf16, widened) = (dir.path().join("bf16.safetensors"), dir.path().join("widened.safetensors"));
    rounded_to_bf16(&f32_file, &bf16, true);
    rounded_to_bf16(&f32_file, &widened, false);
    let (a, err) = traced(&["--weights", bf16.to_str().unwrap()]);
    assert!(err.contains("the weights are stored as bf16; the arithmetic is f32 on the stored values"), "{err}");
    assert_eq!(a["config"]["init"]["stored_dtype"], "bf16");
    assert_eq!(a["notes"][0], "the weights are stored as bf16; the arithmetic is f32 on the stored values");
    crate::export::assert_valid("a bf16 weights file's trace", &a);
    let (b, err) = traced(&["--weights", widened.to_str().unwrap()]);
    assert!(err.is_empty(), "f32 weights need no note: {err}");
    assert!(b["config"]["init"].get("stored_dtype").is_none());
    assert_eq!(numbers(a), numbers(b), "bf16 weights are computed as f32 holding the same values");
}

#[test]
fn bf16_bert_weights_are_noted_recorded_and_computed_in_f32() {
    let (bf16, widened) = (tiny_with(|_| {}), tiny_with(|_| {}));
    let src = root().join("fixtures/tiny-bert/model.safetensors");
    rounded_to_bf16(&src, &bf16.path().join("model.safetensors"), true);
    rounded_to_bf16(&src, &widened.path().join("model.safetensors"), false);
    let (a, err) = traced(&["my shoes are small", "--model", bf16.path().to_str().unwrap()]);
    assert!(err.contains("stored as bf16; the arithmetic is f32"), "{err}");
    assert_eq!(a["config"]["model"]["stored_dtype"], "bf16");
    crate::export::assert_valid("a bf16 BERT's trace", &a);
    let (b, err) = traced(&["my shoes are small", "--model", widened.path().to_str().unwrap()]);
    assert!(err.is_empty(), "{err}");
    assert!(b["config"]["model"].get("stored_dtype").is_none());
    assert_eq!(numbers(a), numbers(b));
}
