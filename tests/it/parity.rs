//! The parity table of docs/PARITY.md, measured: for every decoder and family fixture that
//! transformers made (fixtures/oracle/decoders and fixtures/oracle/families), the largest
//! absolute difference of attn-trace's trace from transformers' over the fixture's prompts —
//! in the logits, in every layer's attention weights, and in every hidden state (each layer's
//! output and the final norm) — and at how many positions the top-1 next token agrees.
//!
//! The table is written from these measurements (`ATTN_TRACE_BLESS=1 cargo test parity`),
//! and checked against them on every run: each documented bound must hold and be the tightest
//! power of ten above the measurement or one above that (the last digits of f32 sums differ
//! between CPUs' vector kernels), and the rows and the top-1 counts must be equal. So the
//! published table cannot drift from what CI checks.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;

/// One row: a model (checkpoint folder) and how its fixtures compare.
#[derive(Default, Debug)]
struct Row {
    storage: String,
    prompts: usize,
    logits: f64,
    attention: f64,
    hidden: f64,
    top1: (usize, usize),
}

fn json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).filter(|(x, y)| x.is_finite() && y.is_finite()).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

/// The hidden states a fixture holds: its `hidden_states_steps`, else each layer's output
/// (`add_norm2.sum`, the pre-norm decoders' residual stream) and the final norm.
fn is_hidden(case: &Value, id: &str) -> bool {
    match case["hidden_states_steps"].as_array() {
        Some(ids) => ids.iter().any(|h| h == id),
        None => id.ends_with(".add_norm2.sum") || id == "final_norm.out",
    }
}

/// F32 GGUF files converted from a checkpoint (fixtures/gguf/make_*.py), with the checkpoint's
/// folder: traced on that checkpoint's fixtures, they are compared with transformers' run of
/// the same weights. (The tiny Gemma 2 GGUF is left out: llama.cpp fixes its scale at
/// head_dim^-½, not the checkpoint's `query_pre_attn_scalar`.)
const GGUF: &[(&str, &str)] = &[
    ("tiny-llama-f32.gguf", "llama-gqa"),
    ("tiny-qwen2-f32.gguf", "qwen2"),
    ("tiny-gptneox-f32.gguf", "gpt_neox"),
    ("tiny-phi3-f32.gguf", "phi3-partial"),
    ("tiny-mixtral-f32.gguf", "mixtral"),
    ("tiny-qwen2moe-f32.gguf", "qwen2_moe"),
];

/// How the checkpoint is stored, from the trace's own config.
fn storage(doc: &Value) -> String {
    let path = doc["config"]["init"]["path"].as_str().unwrap_or("");
    if path.ends_with(".gguf") {
        let types = doc["config"]["model"]["stored_dtype"].as_str().unwrap_or("gguf ?");
        return format!("GGUF, {}", types.trim_start_matches("gguf "));
    }
    let kind = if path.ends_with(".bin") {
        "pytorch .bin"
    } else if path.contains("-of-") {
        "safetensors shards"
    } else {
        "safetensors"
    };
    format!("{kind}, {}", doc["config"]["model"]["stored_dtype"].as_str().unwrap_or("f32"))
}

/// Measures one fixture into its model's row, tracing `model` (the fixture's checkpoint, or a
/// GGUF file converted from it).
fn measure(row: &mut Row, case: &Value, model: &str) {
    let doc = trace_json(&[case["sentence"].as_str().unwrap(), "--model", model, "--steps", "all"]);
    assert_eq!(doc["input"]["token_ids"], case["input_ids"], "{model}: the ids differ from the fixture's");
    let ours = steps(&doc);
    row.storage = storage(&doc);
    row.prompts += 1;
    for w in Want::steps(&case["steps"]) {
        let Some((_, got)) = ours.get(&w.id) else { continue };
        let d = max_diff(got, &w.values);
        if w.id == "logits" {
            row.logits = row.logits.max(d);
        } else if w.id.ends_with("attn.weights") {
            row.attention = row.attention.max(d);
        } else if is_hidden(case, &w.id) {
            row.hidden = row.hidden.max(d);
        }
    }
    let top = doc["predictions"].as_array().unwrap();
    for (pos, want) in case["top_k"].as_array().unwrap().iter().enumerate() {
        row.top1.0 += usize::from(top[pos]["top"][0]["id"] == want[0]["id"]);
        row.top1.1 += 1;
    }
}

/// Every row, by model, from both fixture folders (the families attn-trace does not read yet
/// are left out: tests/it/families.rs holds their refusal).
fn rows() -> BTreeMap<(String, String), Row> {
    let mut out: BTreeMap<(String, String), Row> = BTreeMap::new();
    for folder in ["fixtures/oracle/decoders", "fixtures/oracle/families"] {
        let folder = root().join(folder);
        for entry in json(&folder.join("MANIFEST.json"))["fixtures"].as_array().unwrap() {
            let case = json(&folder.join(entry["file"].as_str().unwrap()));
            let dir = root().join(case["model_dir"].as_str().unwrap());
            let model_type = json(&dir.join("config.json"))["model_type"].as_str().unwrap().to_string();
            if crate::families::PENDING.contains(&model_type.as_str()) {
                continue;
            }
            let name = format!("{} ({model_type})", case["model"].as_str().unwrap());
            let gguf = GGUF.iter().filter(|(_, m)| Some(*m) == case["model"].as_str());
            let files = gguf.map(|(f, _)| root().join("fixtures/gguf").join(f).to_str().unwrap().to_string());
            for model in std::iter::once(dir.to_str().unwrap().to_string()).chain(files) {
                let kind = if model.ends_with(".gguf") { "gguf" } else { "checkpoint" };
                measure(out.entry((name.clone(), kind.to_string())).or_default(), &case, &model);
            }
        }
    }
    out
}

/// The smallest power of ten at or above `x`, at least 1e-7 (below that, f32 rounding).
fn bound(x: f64) -> f64 {
    if x <= 1e-7 {
        return 1e-7;
    }
    let b = 10f64.powf(x.log10().ceil());
    if b < x {
        b * 10.0
    } else {
        b
    }
}

fn cell(x: f64) -> String {
    format!("≤ {:.0e}", bound(x))
}

fn table(rows: &BTreeMap<(String, String), Row>) -> String {
    let mut s = String::from(
        "| model (model_type) | stored as | prompts | logits | attention weights | hidden states | top-1 agrees |\n\
         |---|---|---:|---|---|---|---|\n",
    );
    for ((name, _), r) in rows {
        s.push_str(&format!(
            "| {name} | {} | {} | {} | {} | {} | {} of {} |\n",
            r.storage,
            r.prompts,
            cell(r.logits),
            cell(r.attention),
            cell(r.hidden),
            r.top1.0,
            r.top1.1
        ));
    }
    s
}

const BEGIN: &str = "<!-- parity: begin (tests/it/parity.rs writes this table) -->\n";
const END: &str = "<!-- parity: end -->";

/// A documented bound holds the measurement and is at most one power of ten looser than the
/// tightest one.
fn holds(doc: &str, measured: f64) -> bool {
    let b: f64 = doc.trim_start_matches("≤ ").parse().unwrap_or(f64::NAN);
    measured <= b && b <= bound(measured) * 10.0 * (1.0 + 1e-9)
}

#[test]
fn the_parity_table_is_what_the_fixtures_measure() {
    let rows = rows();
    assert!(rows.len() >= 20, "only {} models measured", rows.len());
    let path = root().join("docs/PARITY.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let (head, rest) = text.split_once(BEGIN).expect("docs/PARITY.md has the parity markers");
    let (documented, tail) = rest.split_once(END).unwrap();
    if std::env::var_os("ATTN_TRACE_BLESS").is_some() {
        std::fs::write(&path, format!("{head}{BEGIN}{}{END}{tail}", table(&rows))).unwrap();
        return;
    }
    let lines: Vec<&str> = documented.lines().skip(2).collect();
    assert_eq!(
        lines.len(),
        rows.len(),
        "docs/PARITY.md's rows are not the fixtures' models: rerun with ATTN_TRACE_BLESS=1"
    );
    for (line, ((name, _), r)) in lines.iter().zip(&rows) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!((cells[0], cells[1]), (name.as_str(), r.storage.as_str()), "{line}");
        assert_eq!(cells[2], r.prompts.to_string(), "{line}");
        for (i, m) in [(3, r.logits), (4, r.attention), (5, r.hidden)] {
            assert!(holds(cells[i], m), "{name}: documented {} but measured {m:e}", cells[i]);
        }
        assert_eq!(cells[6], format!("{} of {}", r.top1.0, r.top1.1), "{name}: top-1");
        assert_eq!(r.top1.0, r.top1.1, "{name}: top-1 disagrees somewhere");
    }
}
