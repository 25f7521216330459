//! `--generate N` (issue 31) against transformers' greedy `generate(do_sample=False)`
//! (fixtures/oracle/generate, made by fixtures/oracle/generate_oracle.py under transformers
//! 4.46.3 or 4.51.0, as each fixture's made_by says): for every tiny checkpoint family of
//! fixtures/decoders and for SmolLM2's GGUF, the generated ids exactly, each decode step's
//! attention row of every recorded layer within 1e-5 of transformers' cached step AND of a
//! forward pass without a cache over the whole sequence (the KV cache must change nothing),
//! the prompt's weights (step 0), the chosen tokens' probabilities and runners-up, generation
//! with a head ablated at every step (`--ablate L.H`, a forward pre-hook on o_proj in
//! transformers), a generation that stops at the EOS token, and SmolLM2 with `--chat` (the
//! template of the GGUF's metadata rendered as transformers' apply_chat_template renders it,
//! tokenized as llama.cpp tokenizes it).
//!
//! The step numbering is the contract's: step 0 is the prompt's pass; decode step t runs
//! generated token t at position n + t − 1 and its row covers the n + t keys so far; token i
//! was chosen by the logits of step i − 1. Every greedy choice in the fixtures has a top-1 −
//! top-2 logit margin of at least 1e-3 (the script replaces prompts with near-ties), so the ids
//! are compared exactly.

use crate::common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Attention weights: 1e-5 absolute (the bound).
const WEIGHTS: (f64, f64) = (1e-5, 0.0);
/// The chosen token's probability and the runners-up's: a logit off by δ moves a
/// probability by about p·δ, and transformers' own cached and uncached logits differ by up to
/// 7e-5 on SmolLM2.
const PROBS: (f64, f64) = (1e-5, 1e-3);
/// The mean of a decode step's final-norm output (SmolLM2's hidden states carry 30 layers of
/// f32 sums in another order).
const MEANS: (f64, f64) = (1e-4, 1e-3);
/// A runner-up's rank is compared only where its logit is this far from its neighbours'.
const RANK_GAP: f64 = 1e-3;

fn folder() -> PathBuf {
    root().join("fixtures/oracle/generate")
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn arr(v: &Value) -> &Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("not an array: {v}"))
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The fixtures of MANIFEST.json (which lists every JSON of the folder but the token file).
fn fixtures() -> Vec<Value> {
    let manifest = json_file(&folder().join("MANIFEST.json"));
    let listed = arr(&manifest["fixtures"]).clone();
    let files = std::fs::read_dir(folder())
        .unwrap()
        .filter(|e| {
            let f = e.as_ref().unwrap().file_name().to_string_lossy().to_string();
            f.ends_with(".json") && f != "MANIFEST.json" && f != "smollm2_tokens.json"
        })
        .count();
    assert_eq!(files, listed.len(), "MANIFEST.json lists every fixture, and only those");
    listed
}

/// The fixture's attn-trace command line with its model path made absolute.
fn args(case: &Value, model: &str) -> Vec<String> {
    let mut a: Vec<String> = arr(&case["args"]).iter().map(|s| s.as_str().unwrap().to_string()).collect();
    assert_eq!(a[1], "--model");
    a[2] = model.to_string();
    a
}

/// One fixture's oracles: weights, and probabilities / means.
struct Oracles {
    weights: Oracle,
    probs: Oracle,
}

impl Oracles {
    fn new() -> Oracles {
        Oracles { weights: Oracle::new("transformers", WEIGHTS), probs: Oracle::new("transformers", PROBS) }
    }

    fn finish(self, label: &str) {
        self.weights.finish(&format!("{label}: attention weights"));
        self.probs.finish(&format!("{label}: probabilities and final-norm means"));
    }
}

/// Runs one fixture with `model` and compares everything it holds.
fn check(o: &mut Oracles, case: &Value, model: &str) {
    let argv = args(case, model);
    let doc = trace_json(&argv.iter().map(String::as_str).collect::<Vec<_>>());
    crate::export::assert_valid(case["name"].as_str().unwrap(), &doc);
    compare(o, case, &doc);
}

/// attn-trace's document `doc` against the fixture `case`.
fn compare(o: &mut Oracles, case: &Value, doc: &Value) {
    let name = case["name"].as_str().unwrap();
    let n = case["prompt_tokens"].as_u64().unwrap() as usize;
    assert_eq!(
        doc["input"]["token_ids"], case["input_ids"],
        "{name}: the prompt's ids (the sentence as attn-trace tokenizes it)"
    );
    if !case["chat"].is_null() {
        let chat = &doc["input"]["chat"];
        assert_eq!(chat["rendered"], case["chat"]["rendered"], "{name}: the rendered chat template");
        assert_eq!(chat["user"], case["chat"]["user"], "{name}: input.chat.user");
        assert_eq!(chat["system"], Value::Null, "{name}: input.chat.system");
    }

    let g = &doc["generation"];
    assert!(g.is_object(), "{name}: no \"generation\" object in the trace");
    assert_eq!(g["prompt_tokens"], json!(n), "{name}: generation.prompt_tokens");
    assert_eq!(g["strategy"], json!({"sample": false}), "{name}: generation.strategy");
    assert_eq!(g["stop"], case["stop"], "{name}: generation.stop");

    // The tokens: transformers' greedy ids exactly, their positions, probabilities, runners-up.
    let tokens = arr(&g["tokens"]);
    let got: Vec<&Value> = tokens.iter().map(|t| &t["id"]).collect();
    let want: Vec<&Value> = arr(&case["generated_ids"]).iter().collect();
    assert_eq!(got, want, "{name}: the generated ids (transformers' greedy generate)");
    if case["stop"] == "eos" {
        assert_eq!(*got.last().unwrap(), &case["eos_token_id"], "{name}: the EOS token is kept");
    }
    for (i, (tok, choice)) in tokens.iter().zip(arr(&case["choices"])).enumerate() {
        assert_eq!(tok["position"], json!(n + i), "{name}: tokens[{i}].position");
        let top = arr(&choice["top5"]);
        let what = format!("{name}: tokens[{i}].prob");
        o.probs.values(&what, &[1], &[num(&tok["prob"])], &[num(&top[0]["prob"])], PROBS, |_| true);
        let logit = |r: usize| top.get(r).map(|c| num(&c["logit"]));
        for (r, cand) in arr(&tok["candidates"]).iter().enumerate().take(top.len()) {
            let apart = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => (a - b).abs() >= RANK_GAP,
                _ => true,
            };
            let prev = if r == 0 { None } else { logit(r - 1) };
            // The fifth's successor is not in the fixture, so only ranks 1-4 can be known safe.
            let safe = apart(prev, logit(r)) && (r + 1 < top.len()) && apart(logit(r), logit(r + 1));
            if safe || r == 0 {
                assert_eq!(cand["id"], top[r]["id"], "{name}: tokens[{i}].candidates[{r}]");
                let what = format!("{name}: tokens[{i}].candidates[{r}].prob");
                o.probs.values(&what, &[1], &[num(&cand["prob"])], &[num(&top[r]["prob"])], PROBS, |_| true);
            }
        }
    }

    // Step 0: the prompt's weights (the rows the fixture holds).
    let ours = steps(doc);
    let rows: Vec<usize> = arr(&case["prompt_rows"]).iter().map(|r| r.as_u64().unwrap() as usize).collect();
    for (l, layer) in arr(&case["prompt_layers"]).iter().zip(arr(&case["prompt_weights"])) {
        let id = format!("layers.{l}.attn.weights");
        let (shape, vals) = ours.get(&id).unwrap_or_else(|| panic!("{name}: {id} not traced"));
        let heads = arr(layer).len();
        assert_eq!(shape, &vec![heads, n, n], "{name}: {id} shape");
        let mut got = Vec::new();
        for h in 0..heads {
            for &r in &rows {
                got.extend_from_slice(&vals[(h * n + r) * n..(h * n + r + 1) * n]);
            }
        }
        o.weights.values(
            &format!("{name}: {id} (rows {rows:?})"),
            &[heads, rows.len(), n],
            &got,
            &flat(layer),
            WEIGHTS,
            |_| true,
        );
    }

    // Decode steps: every recorded layer's row against transformers' step and, where the
    // fixture has it, against the full pass.
    let gen_steps = arr(&g["steps"]);
    let want_steps = arr(&case["steps"]);
    assert_eq!(gen_steps.len(), want_steps.len(), "{name}: decode steps (N − 1 for N tokens)");
    let mut traced = std::collections::BTreeMap::new();
    for (j, (gs, ws)) in gen_steps.iter().zip(want_steps).enumerate() {
        let t = j + 1;
        assert_eq!(gs["step"], json!(t), "{name}: generation.steps[{j}].step");
        assert_eq!(gs["position"], json!(n + t - 1), "{name}: generation.steps[{j}].position");
        let ours = steps(gs);
        o.weights.compare(name, &rows_of(ws, t, n), &ours);
        let id = format!("gen.{t}.final_norm.out");
        let (_, vals) = ours.get(&id).unwrap_or_else(|| panic!("{name}: {id} not traced"));
        let mean = vals.iter().sum::<f64>() / vals.len() as f64;
        let what = format!("{name}: mean of {id}");
        o.probs.values(&what, &[1], &[mean], &[num(&ws["final_norm_out_mean"])], MEANS, |_| true);
        traced.insert(t, ours);
    }
    let full = arr(&case["full_pass"]["steps"]);
    assert!(full.len() >= 2 || gen_steps.len() < 2, "{name}: full-pass rows");
    for fs in full {
        let t = fs["step"].as_u64().unwrap() as usize;
        o.weights.compare(&format!("{name} (full pass)"), &rows_of(fs, t, n), &traced[&t]);
    }
}

/// A fixture step's rows as the trace's steps `gen.{t}.layers.{l}.attn.weights` [head, 1, n + t].
fn rows_of(step: &Value, t: usize, n: usize) -> Vec<Want> {
    arr(&step["layers"])
        .iter()
        .zip(arr(&step["weights"]))
        .map(|(l, w)| Want {
            id: format!("gen.{t}.layers.{l}.attn.weights"),
            shape: Some(vec![arr(w).len(), 1, n + t]),
            values: flat(w),
        })
        .collect()
}

#[test]
fn tiny_decoders_generate_as_transformers_greedy_generate() {
    let (mut o, mut checked, mut eos, mut ablated) = (Oracles::new(), 0, 0, 0);
    let mut families = std::collections::BTreeSet::new();
    for entry in fixtures().iter().filter(|e| e["model"] != "smollm2") {
        let case = json_file(&folder().join(entry["file"].as_str().unwrap()));
        let dir = root().join(case["model_path"].as_str().unwrap());
        check(&mut o, &case, dir.to_str().unwrap());
        checked += 1;
        eos += (case["stop"] == "eos") as usize;
        if !case["intervention"].is_null() {
            ablated += 1;
            assert_ne!(
                case["generated_ids"], case["clean_generated_ids"],
                "{}: the ablation changes nothing",
                case["name"]
            );
        }
        families.insert(json_file(&dir.join("config.json"))["model_type"].as_str().unwrap().to_string());
    }
    o.finish(&format!("{checked} tiny generations"));
    assert!(eos >= 2, "only {eos} fixtures stop at EOS");
    assert!(ablated >= 2, "only {ablated} ablated generations");
    let want = [
        "gpt2",
        "llama",
        "qwen2",
        "mistral",
        "gemma2",
        "gemma3_text",
        "qwen3",
        "gpt_neox",
        "phi3",
        "mixtral",
        "qwen2_moe",
        "qwen3_moe",
    ];
    for f in want {
        assert!(families.contains(f), "no generation fixture for {f}: {families:?}");
    }
}

/// SmolLM2's GGUF (tests/fetch-smollm2-f32.sh; the fixtures were made from its F32 twin). The
/// Q4_1 file holds the same values once dequantized (compare.rs's smollm2_against_its_f32_twin
/// proves every step agrees exactly), so it stands in when only it was fetched.
fn smollm2_file() -> Option<String> {
    let dir = root().join(".cache/models/smollm2");
    ["SmolLM2-135M-Instruct.F32.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.is_file())
        .map(|p| p.to_str().unwrap().to_string())
}

#[test]
fn smollm2_generates_as_transformers_greedy_generate() {
    let Some(model) = smollm2_file() else {
        eprintln!(
            "SKIPPED smollm2_generates_as_transformers_greedy_generate: no SmolLM2 GGUF in .cache/models/smollm2 \
             (run tests/fetch-smollm2-f32.sh or tests/fetch-smollm2.sh)"
        );
        return;
    };
    let (mut o, mut checked, mut chat, mut long) = (Oracles::new(), 0, 0, 0);
    for entry in fixtures().iter().filter(|e| e["model"] == "smollm2") {
        let case = json_file(&folder().join(entry["file"].as_str().unwrap()));
        check(&mut o, &case, &model);
        checked += 1;
        chat += !case["chat"].is_null() as usize;
        long += (arr(&case["generated_ids"]).len() >= 32) as usize;
        if !case["intervention"].is_null() {
            assert_ne!(
                case["generated_ids"], case["clean_generated_ids"],
                "{}: the ablation changes nothing",
                case["name"]
            );
        }
    }
    o.finish(&format!("{checked} SmolLM2 generations ({model})"));
    assert!(checked >= 4 && chat >= 1 && long >= 2, "{checked} SmolLM2 fixtures, {chat} chat, {long} of 32+ tokens");
}
