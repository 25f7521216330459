//! Mixtures of experts beyond the plain forward pass (tests/it/families.rs compares that):
//! `--ablate-expert` against transformers run with the same experts removed
//! (fixtures/oracle/experts, made by fixtures/oracle/expert_oracle.py), its refusals, the
//! summary table's routing, and the one-line refusals of MoE checkpoints that contradict
//! themselves.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// attention weights within 1e-5; the chosen experts exactly; the rest 1e-4 + 1e-4 relative.
fn tolerance(id: &str) -> (f64, f64) {
    match id {
        _ if id.ends_with("attn.weights") => (1e-5, 0.0),
        _ if id.ends_with("ffn.router.chosen") => (0.0, 0.0),
        _ => (1e-4, 1e-4),
    }
}

#[test]
fn removed_experts_route_as_transformers_routes_without_them() {
    let folder = root().join("fixtures/oracle/experts");
    let mut oracle = Oracle::new("transformers", tolerance("")).per_step(tolerance);
    let mut files: Vec<_> = std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let case = json(path);
        let dir = root().join(case["model_dir"].as_str().unwrap());
        let flags: Vec<&str> = case["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        let mut args = vec![case["sentence"].as_str().unwrap(), "--model", dir.to_str().unwrap(), "--steps", "all"];
        args.extend(&flags);
        let doc = trace_json(&args);
        assert_eq!(doc["input"]["token_ids"], case["input_ids"], "{name}: ids");
        assert_eq!(doc["config"]["interventions"]["ablate_expert"], case["ablate_expert"], "{name}: recorded");
        let compared = oracle.compare(&name, &Want::steps(&case["steps"]), &steps(&doc));
        assert!(compared.steps >= 15, "{name}: only {} steps compared", compared.steps);
        let top = doc["predictions"].as_array().unwrap();
        for (pos, want) in case["top_k"].as_array().unwrap().iter().enumerate() {
            assert_eq!(top[pos]["top"][0]["id"], want[0]["id"], "{name}: top-1 at position {pos}");
        }
    }
    oracle.finish(&format!("{} expert ablations", files.len()));
    assert!(files.len() >= 3, "the expert ablation fixtures were not found");
}

#[test]
fn ablate_expert_is_checked_against_the_model() {
    let (s, m) = ("my shoes are small", "fixtures/decoders/qwen3_moe");
    for (flags, want) in [
        (&["--ablate-expert", "x"][..], "--ablate-expert: \"x\" is not LAYER.EXPERT"),
        (&["--ablate-expert", ","], "--ablate-expert: the list is empty"),
        (&["--ablate-expert", "2.0"], "--ablate-expert: layer 2 does not exist; the model has layers 0 to 1"),
        (&["--ablate-expert", "0.6"], "--ablate-expert: expert 6 does not exist; the model has experts 0 to 5"),
        (&["--ablate-expert", "0.0,0.1,0.2,0.3"], "layer 0 would keep 2 of 6 experts, and each token runs 3"),
    ] {
        refused(&[&[s, "--model", m][..], flags].concat(), want);
    }
    refused(&[s, "--model", "fixtures/decoders/llama-gqa", "--ablate-expert", "0.0"], "has no mixture of experts");
    refused(&[s, "--ablate-expert", "0.0"], "has no mixture of experts");
    // Three of six removed leaves exactly top_k: allowed; a repeat counts once.
    let doc = trace_json(&[s, "--model", &root().join(m).to_string_lossy(), "--ablate-expert", "0.0,0.1,0.2,0.1"]);
    assert_eq!(doc["config"]["interventions"]["ablate_expert"], serde_json::json!([[0, 0], [0, 1], [0, 2]]));
}

/// The summary table's routing rows are the trace's `ffn.router.chosen` and `.weights`, and
/// a model without experts has none.
#[test]
fn the_summary_says_which_experts_each_token_went_to() {
    let m = root().join("fixtures/decoders/qwen2_moe");
    let m = m.to_str().unwrap();
    let s = "The capital of France is";
    let doc = trace_json(&[s, "--model", m, "--steps", "router"]);
    let out = cmd().args([s, "--model", m]).output().unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    let values =
        |id: &str| doc["steps"].as_array().unwrap().iter().find(|st| st["id"] == id).unwrap()["values"].clone();
    for l in 0..2 {
        let (chosen, weights) =
            (values(&format!("layers.{l}.ffn.router.chosen")), values(&format!("layers.{l}.ffn.router.weights")));
        let head = format!("layer {l} · experts each token went to");
        let at = table.find(&head).unwrap_or_else(|| panic!("no routing table for layer {l}:\n{table}"));
        let rows: Vec<&str> = table[at..].lines().skip(4).take(chosen.as_array().unwrap().len()).collect();
        for (pos, row) in rows.iter().enumerate() {
            let cell: Vec<String> =
                (0..2).map(|r| format!("{}:{:.2}", chosen[pos][r], weights[pos][r].as_f64().unwrap() as f32)).collect();
            assert!(row.ends_with(&cell.join("  ")), "layer {l} position {pos}: {row:?} vs {cell:?}");
        }
    }
    assert!(table.contains("4 experts of d_ff 8 (top 2 per token) + a shared expert of d_ff 24"), "{table}");
    let dense =
        cmd().args([s, "--model", &root().join("fixtures/decoders/llama-gqa").to_string_lossy()]).output().unwrap();
    assert!(!String::from_utf8(dense.stdout).unwrap().contains("experts each token"));
}

/// A copy of fixtures/decoders/`name` whose config.json has `edits` and whose weights file
/// has every `from` renamed to `to` (same length, so the header stays valid).
fn broken(name: &str, edits: &[(&str, Value)], rename: Option<(&str, &str)>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(root().join("fixtures/decoders").join(name)).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    let cfg = dir.path().join("config.json");
    let mut v = json(&cfg);
    for (k, x) in edits {
        v[*k] = x.clone();
    }
    std::fs::write(&cfg, v.to_string()).unwrap();
    if let Some((from, to)) = rename {
        assert_eq!(from.len(), to.len());
        let st = dir.path().join("model.safetensors");
        let mut bytes = std::fs::read(&st).unwrap();
        let at = bytes.windows(from.len()).position(|w| w == from.as_bytes()).expect("tensor name in the header");
        bytes[at..at + to.len()].copy_from_slice(to.as_bytes());
        std::fs::write(&st, bytes).unwrap();
    }
    dir
}

#[test]
fn checkpoints_that_contradict_themselves_are_refused_in_one_line() {
    let router = "model.layers.0.block_sparse_moe.gate.weight";
    let cases: Vec<(tempfile::TempDir, String)> = vec![
        (
            broken("mixtral", &[("num_local_experts", 8.into())], None),
            format!("config.json: num_local_experts is 8 but tensor {router} holds 4 experts"),
        ),
        (
            broken("mixtral", &[("num_experts_per_tok", 5.into())], None),
            "config.json: num_experts_per_tok 5 is more than num_local_experts 4".into(),
        ),
        (
            broken("mixtral", &[], Some((router, "model.layers.0.block_sparse_moe.gatX.weight"))),
            format!("the checkpoint has no tensor {router}"),
        ),
        (broken("qwen2_moe", &[("num_experts", 0.into())], None), "config.json: num_experts is 0".into()),
        (
            broken("qwen2_moe", &[("mlp_only_layers", serde_json::json!([1]))], None),
            "mlp_only_layers (dense layers) is not supported".into(),
        ),
        (
            broken("qwen3_moe", &[("decoder_sparse_step", 2.into())], None),
            "decoder_sparse_step other than 1 (dense layers) is not supported".into(),
        ),
        (
            broken("qwen2_moe", &[("norm_topk_prob", "yes".into())], None),
            "config.json: norm_topk_prob is the string \"yes\"; expected true or false".into(),
        ),
    ];
    for (dir, want) in &cases {
        let path = dir.path().to_str().unwrap();
        refused(&["my shoes", "--model", path], want);
        refused(&["my shoes", "--model", path], &format!("--model {path}"));
    }
}

/// fixtures/gguf/tiny-mixtral-f32.gguf written again into `dir` with its metadata `edits`
/// (a `None` removes the key).
fn broken_gguf(dir: &Path, edits: &[(&str, Option<u32>)]) -> String {
    use candle_core::quantized::gguf_file::{self, Value as G};
    let mut f = std::fs::File::open(root().join("fixtures/gguf/tiny-mixtral-f32.gguf")).unwrap();
    let mut content = gguf_file::Content::read(&mut f).unwrap();
    for (k, v) in edits {
        match v {
            Some(n) => content.metadata.insert(k.to_string(), G::U32(*n)),
            None => content.metadata.remove(*k),
        };
    }
    let mut names: Vec<String> = content.tensor_infos.keys().cloned().collect();
    names.sort();
    let device = candle_core::Device::Cpu;
    let tensors: Vec<(String, candle_core::quantized::QTensor)> = names
        .iter()
        .map(|n| (n.clone(), content.tensor_infos[n].read(&mut f, content.tensor_data_offset, &device).unwrap()))
        .collect();
    let mut keys: Vec<&String> = content.metadata.keys().collect();
    keys.sort();
    let metadata: Vec<(&str, &G)> = keys.iter().map(|k| (k.as_str(), &content.metadata[*k])).collect();
    let tensors: Vec<(&str, &candle_core::quantized::QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let path = dir.join("moe.gguf");
    gguf_file::write(&mut std::fs::File::create(&path).unwrap(), &metadata, &tensors).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn gguf_metadata_that_contradicts_the_experts_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for (edits, want) in [
        (
            &[("llama.expert_count", Some(8))][..],
            "GGUF metadata llama.expert_count is 8 but tensor blk.0.ffn_gate_inp.weight holds 4 experts",
        ),
        (
            &[("llama.expert_used_count", Some(5))],
            "GGUF metadata llama.expert_used_count is 5; expected 1 to llama.expert_count (4)",
        ),
        (&[("llama.expert_used_count", None)], "the GGUF metadata has no llama.expert_used_count"),
    ] {
        let file = broken_gguf(dir.path(), edits);
        refused(&["my shoes", "--model", &file], want);
        refused(&["my shoes", "--model", &file], &format!("--model {file}"));
    }
    // Without an expert count the file is a plain Llama, whose dense FFN it lacks.
    let file = broken_gguf(dir.path(), &[("llama.expert_count", None)]);
    refused(&["my shoes", "--model", &file], "the GGUF has no tensor blk.0.ffn_up.weight");
}
