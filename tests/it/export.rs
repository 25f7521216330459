//! Traces as files: `--format jsonl` (the JSON document's steps, one per line, streamed;
//! `| head` ends it quietly), `--save-trace` (safetensors and npz with the JSON's numbers,
//! deterministic), `attn-trace schema` validating every JSON golden and the example
//! document of docs/OUTPUT.md, and `--check` against candle-transformers' BertModel.
//!
//! The schema is checked by a small validator of the keywords it uses (type, const, enum,
//! properties, required, additionalProperties, items, anyOf, oneOf, minimum, pattern,
//! local $ref), rather than the jsonschema crate, whose dependency tree would cost more
//! build time than the whole test suite; a test fails if the schema uses another keyword.

use crate::common::*;
use serde_json::{json, Value};

const SENTENCE: &str = "my shoes are small, my feet are big.";

fn stdout(args: &[&str]) -> Vec<u8> {
    let out = cmd().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn jsonl_lines_are_the_documents_steps() {
    for extra in [&["--causal", "--layers", "2"][..], &["--head", "1", "--steps", "weights,tokens"][..]] {
        let base = [&[SENTENCE, "--heads", "2"][..], extra].concat();
        let doc: Value = serde_json::from_slice(&stdout(&[&base[..], &["--format", "json"]].concat())).unwrap();
        let text = String::from_utf8(stdout(&[&base[..], &["--format", "jsonl"]].concat())).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let steps = doc["steps"].as_array().unwrap();
        assert_eq!(lines.len(), steps.len() + 1, "a header line, then one line per step");
        assert_eq!(lines[0], json!({"schema_version": 2, "input": doc["input"], "config": doc["config"]}));
        assert_eq!(&lines[1..], &steps[..]);
    }
}

#[test]
fn jsonl_stops_quietly_when_the_reader_leaves() {
    // 24 layers of a wide model are ~500 lines; `head -3` leaves after the third.
    let bin = assert_cmd::cargo::cargo_bin("attn-trace");
    let script = format!(
        "set -o pipefail; '{}' \"{SENTENCE}\" --d-model 64 --heads 4 --layers 24 --format jsonl | head -3",
        bin.display()
    );
    let out = std::process::Command::new("bash").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "exit {:?}: {}", out.status.code(), String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 3);
    assert!(text.lines().nth(2).unwrap().starts_with("{\"id\": \"token_ids\""));
}

#[test]
fn save_trace_holds_the_json_numbers_in_both_formats() {
    let dir = tempfile::tempdir().unwrap();
    let args = [SENTENCE, "--heads", "2", "--causal", "--format", "json"];
    for name in ["t.safetensors", "t.npz"] {
        let path = dir.path().join(name);
        let doc: Value =
            serde_json::from_slice(&stdout(&[&args[..], &["--save-trace", path.to_str().unwrap()]].concat())).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let named = if name.ends_with(".npz") {
            attn_trace::export::npz::read(&bytes, name).unwrap()
        } else {
            attn_trace::export::safetensors::read(&bytes, name).unwrap()
        };
        let want = steps(&doc);
        for (id, (shape, values)) in &want {
            let t = named.iter().find(|t| &t.name == id).unwrap_or_else(|| panic!("{name}: no {id}"));
            assert_eq!(&t.shape, shape, "{name} {id}");
            let attn_trace::export::Data::Num(got) = &t.data else { panic!("{name} {id}: not numbers") };
            for (a, b) in got.iter().zip(values) {
                assert!(*a == *b as f32 as f64 || (a.is_nan() && b.is_nan()), "{name} {id}: {a} != {b}");
            }
        }
        let tokens = named.iter().find(|t| t.name == "tokens").unwrap();
        assert_eq!(json!(tokens.data.clone().strings()), doc["input"]["tokens"], "{name}");
        assert_eq!(named.len(), want.len() + 1, "{name}: every step and the tokens");
        // The same run writes the same bytes.
        stdout(&[&args[..], &["--save-trace", path.to_str().unwrap()]].concat());
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name}: deterministic");
    }
    // The header names dtypes: the mask is uint8, ids int64, tensors float32.
    let st = std::fs::read(dir.path().join("t.safetensors")).unwrap();
    let n = u64::from_le_bytes(st[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&st[8..8 + n]).unwrap();
    assert_eq!(header["layers.0.attn.mask"]["dtype"], "U8");
    assert_eq!(header["token_ids"]["dtype"], "I64");
    assert_eq!(header["layers.0.attn.weights"]["dtype"], "F32");
    assert_eq!(header["__metadata__"]["schema_version"], "2");
}

trait Strings {
    fn strings(self) -> Vec<String>;
}

impl Strings for attn_trace::export::Data {
    fn strings(self) -> Vec<String> {
        match self {
            attn_trace::export::Data::Str(s) => s,
            other => panic!("not strings: {other:?}"),
        }
    }
}

#[test]
fn testing_flags_are_checked() {
    let cases: &[(&[&str], &str)] = &[
        (&[SENTENCE, "--save-trace", "t.pt"], ".safetensors or .npz"),
        (&[SENTENCE, "--check"], "--model"),
        (&[SENTENCE, "--check-tol", "1e-3"], "--check"),
        (&[SENTENCE, "--format", "jsonl", "--focus", "1"], "jsonl"),
    ];
    for (args, want) in cases {
        refused(args, want);
    }
}

#[test]
fn check_agrees_with_candle_transformers_bert() {
    let tiny = root().join("fixtures/tiny-bert");
    let minilm = root().join(".cache/models/all-MiniLM-L6-v2");
    assert!(minilm.join("model.safetensors").is_file(), "run tests/fetch-model.sh");
    for dir in [&tiny, &minilm] {
        let m = dir.to_str().unwrap();
        let out = cmd().args(["the cats played", "--model", m, "--check", "--format", "json"]).output().unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(out.status.success(), "{m}: {stderr}");
        assert!(stderr.starts_with("attn-trace: check: ok: ") && stderr.lines().count() == 1, "{stderr}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let c = &doc["check"];
        assert_eq!(c["ok"], true);
        // Measured: 6.0e-7 (tiny-bert), 2.5e-6 (MiniLM); candle's one-pass LayerNorm differs
        // from attn-trace's two-pass one in the last bits.
        let d = c["max_abs_diff"].as_f64().unwrap();
        assert!(d < 1e-5, "{m}: {d}");
        // An absurd tolerance fails: exit 1, the one line is the error, the output is written.
        let out = cmd().args(["the cats played", "--model", m, "--check", "--check-tol", "0"]).output().unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        if d > 0.0 {
            assert_eq!(out.status.code(), Some(1), "{stderr}");
            assert!(stderr.starts_with("attn-trace: check: failed: ") && stderr.lines().count() == 1, "{stderr}");
            assert!(!out.stdout.is_empty());
        }
    }
    // A pair, JSON Lines, a narrowed selection: the check uses the output whatever is shown.
    let m = minilm.to_str().unwrap();
    let out = cmd()
        .args([
            "my shoes are small.",
            "my feet are big.",
            "--model",
            m,
            "--check",
            "--format",
            "jsonl",
            "--steps",
            "weights",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8(out.stderr).unwrap().contains("check: ok"));
}

// ---- the schema ----

fn schema() -> Value {
    serde_json::from_slice(&stdout(&["schema"])).unwrap()
}

/// Errors of `v` against `s` (a small draft 2020-12 validator; see the module doc).
fn validate(root: &Value, s: &Value, v: &Value, at: &str, errs: &mut Vec<String>) {
    let known = [
        "$schema",
        "$id",
        "$defs",
        "title",
        "description",
        "version",
        "type",
        "const",
        "enum",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "oneOf",
        "minimum",
        "pattern",
        "$ref",
    ];
    for k in s.as_object().unwrap().keys() {
        assert!(known.contains(&k.as_str()), "the schema uses {k}, which this validator does not check");
    }
    if let Some(r) = s["$ref"].as_str() {
        let target = r.strip_prefix("#/").unwrap().split('/').fold(root, |n, k| &n[k]);
        return validate(root, target, v, at, errs);
    }
    let mut fail = |why: String| errs.push(format!("{at}: {why}"));
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::Array(a) => a.iter().map(|x| x.as_str().unwrap()).collect(),
            x => vec![x.as_str().unwrap()],
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.as_i64().is_some() || v.as_u64().is_some(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            other => panic!("type {other}"),
        });
        if !ok {
            return fail(format!("{v} is not {types:?}"));
        }
    }
    if let Some(c) = s.get("const") {
        if c != v {
            fail(format!("{v} is not {c}"));
        }
    }
    if let Some(e) = s["enum"].as_array() {
        if !e.contains(v) {
            fail(format!("{v} is not one of {s}", s = s["enum"]));
        }
    }
    if let (Some(m), Some(x)) = (s["minimum"].as_f64(), v.as_f64()) {
        if x < m {
            fail(format!("{x} < {m}"));
        }
    }
    if let (Some(p), Some(x)) = (s["pattern"].as_str(), v.as_str()) {
        if !regex::Regex::new(p).unwrap().is_match(x) {
            fail(format!("{x:?} does not match {p}"));
        }
    }
    if let Some(o) = v.as_object() {
        for r in s["required"].as_array().into_iter().flatten() {
            if !o.contains_key(r.as_str().unwrap()) {
                fail(format!("missing {r}"));
            }
        }
        for (k, x) in o {
            match s["properties"].get(k) {
                Some(ps) => validate(root, ps, x, &format!("{at}.{k}"), errs),
                None if s["additionalProperties"] == false => errs.push(format!("{at}: unexpected {k}")),
                None => {}
            }
        }
    }
    if let (Some(items), Some(a)) = (s.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            validate(root, items, x, &format!("{at}[{i}]"), errs);
        }
    }
    for (key, need_one) in [("anyOf", false), ("oneOf", true)] {
        if let Some(alts) = s[key].as_array() {
            let passing = alts
                .iter()
                .filter(|alt| {
                    let mut e = Vec::new();
                    validate(root, alt, v, at, &mut e);
                    e.is_empty()
                })
                .count();
            if passing == 0 || (need_one && passing > 1) {
                errs.push(format!("{at}: {passing} of the {key} alternatives match"));
            }
        }
    }
}

pub fn assert_valid(what: &str, doc: &Value) {
    let s = schema();
    let mut errs = Vec::new();
    validate(&s, &s, doc, "$", &mut errs);
    assert!(errs.is_empty(), "{what}: {}", errs.join("; "));
}

#[test]
fn every_json_golden_and_fresh_output_fits_the_schema() {
    let s = schema();
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(s["version"], 2);
    let mut n = 0;
    for entry in std::fs::read_dir(root().join("fixtures/golden")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            assert_valid(&path.display().to_string(), &doc);
            n += 1;
        }
    }
    assert!(n >= 3, "the JSON goldens were not found");
    let tiny = root().join("fixtures/tiny-bert");
    for args in [
        &[SENTENCE, "--heads", "2", "--causal", "--norm", "pre", "--head", "1"][..],
        &["--input", "fixtures/seeds/002_input.json", "--d-k", "3", "--scale", "0.5", "--attn-bias"][..],
        // Textbook forms: attention only, d_out, separate heads, an output bias of its own.
        &[SENTENCE, "--attention-only", "--heads", "2", "--d-out", "6", "--separate-heads", "--out-proj-bias"][..],
        &[SENTENCE, "--attention-only", "--no-out-proj", "--heads", "2", "--d-k", "3", "--focus", "shoes", "--explain"]
            [..],
        &[SENTENCE, "--d-model", "8", "--heads", "2", "--linear-init", "encoder-layer", "--attn-bias", "--final-norm"]
            [..],
        &["the cats", "played", "--model", tiny.to_str().unwrap(), "--check"][..],
        // Decoders: rotary positions, grouped-query attention, a window, logits, predictions.
        &["my shoes are small", "--model", "fixtures/decoders/mistral", "--steps", "all"][..],
        &["my shoes are small", "--model", "fixtures/decoders/gpt2", "--steps", "all"][..],
        // A mixture of experts with a shared expert, one expert removed: config.experts,
        // integer steps (ffn.router.chosen), −inf router logits.
        &["my shoes are small", "--model", "fixtures/decoders/qwen2_moe", "--steps", "all", "--ablate-expert", "1.2"][..],
        // Gemma: sandwich norms, soft-caps, local layers and their own rotary base, q/k norms.
        &["my shoes are small", "--model", "fixtures/decoders/gemma2", "--steps", "all"][..],
        &["my shoes are small", "--model", "fixtures/decoders/gemma3", "--steps", "all"][..],
        // Interventions and analyses: config.interventions, lens, stats, rollout.
        &[
            "my shoes are small",
            "--model",
            "fixtures/decoders/llama-gqa",
            "--ablate",
            "0.1",
            "--ablate-mode",
            "mean",
            "--knockout",
            "1.2:3->1",
            "--lens",
            "--stats",
            "--rollout",
        ][..],
        // Activation patching (the sentence is the clean run).
        &[
            "The capital of France is",
            "--model",
            "fixtures/decoders/gpt2",
            "--patch",
            "The capital of Paris is",
            "--metric",
            " Paris",
            " the",
        ][..],
    ] {
        let out = cmd().current_dir(root()).args(args).args(["--format", "json"]).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        let mut doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        // `check` is an addition of --check, documented in CHANGELOG.md; the schema covers it.
        assert_valid(&format!("{args:?}"), &doc);
        doc["steps"][0]["id"] = json!("layers.0.attn.softmax");
        let mut errs = Vec::new();
        validate(&s, &s, &doc, "$", &mut errs);
        assert!(!errs.is_empty(), "a renamed step must not validate");
    }
}

#[test]
fn the_documented_example_fits_the_schema() {
    let page = std::fs::read_to_string(root().join("docs/OUTPUT.md")).unwrap();
    let start = page.find("```json\n").expect("docs/OUTPUT.md has a ```json example") + 8;
    let text = &page[start..start + page[start..].find("```").unwrap()];
    // The example elides values with "..."; with the elisions removed it must be a document.
    let text = text.replace(",...", "").replace("...", "");
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("docs/OUTPUT.md example: {e}\n{text}"));
    assert_valid("docs/OUTPUT.md's JSON example", &doc);
}
