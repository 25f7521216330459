//! Encoder–decoders (T5 v1.0, a gated T5 v1.1, BART) against transformers 4.46.3
//! (fixtures/oracle/seq2seq, made by fixtures/oracle/seq2seq_oracle.py from the tiny random
//! checkpoints in fixtures/seq2seq): every step of both stacks, teacher-forced over the
//! target as transformers trains (labels shifted right after the decoder's start token), the
//! tokens of both sides and the top-5 predictions at every decoder position.
//!
//! Tolerances as tests/it/families.rs: attention and cross-attention weights within 1e-5
//! absolute, every other step within 1e-4 absolute plus 1e-4 relative.

use crate::common::*;
use serde_json::Value;

const MODELS: &[&str] = &["t5", "t5-gated", "bart"];

fn fixtures() -> Vec<(String, Value)> {
    let dir = root().join("fixtures/oracle/seq2seq");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The document's numeric steps (each stack's `tokens` are strings).
fn numbers(doc: &Value) -> Steps {
    let mut doc = doc.clone();
    doc["steps"].as_array_mut().unwrap().retain(|s| !s["id"].as_str().unwrap().ends_with(".tokens"));
    steps(&doc)
}

fn tolerance(id: &str) -> (f64, f64) {
    if id.ends_with("attn.weights") {
        (1e-5, 0.0)
    } else {
        (1e-4, 1e-4)
    }
}

/// The document's `alignment`: each decoder position's strongest source positions, by the
/// cross-attention's weights averaged over every layer and head, recomputed here from the steps.
fn alignment_is_the_mean_cross_attention(name: &str, doc: &Value) {
    let maps: Vec<Vec<f64>> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["id"].as_str().unwrap().ends_with("cross_attn.weights"))
        .map(|s| flat(&s["values"]))
        .collect();
    let (rows, cols) =
        (doc["input"]["target"]["tokens"].as_array().unwrap().len(), doc["input"]["tokens"].as_array().unwrap().len());
    let heads = maps[0].len() / (rows * cols);
    let rows_json = doc["alignment"].as_array().unwrap_or_else(|| panic!("{name}: no alignment"));
    assert_eq!(rows_json.len(), rows, "{name}: one alignment row per decoder position");
    for (q, row) in rows_json.iter().enumerate() {
        let mean = |k: usize| {
            let sum: f64 = maps.iter().flat_map(|m| (0..heads).map(move |h| m[(h * rows + q) * cols + k])).sum();
            sum / (maps.len() * heads) as f64
        };
        let mut want: Vec<(usize, f64)> = (0..cols).map(|k| (k, mean(k))).collect();
        want.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (got, (k, w)) in row["sources"].as_array().unwrap().iter().zip(&want) {
            assert_eq!(got["position"], *k, "{name}: decoder position {q}");
            assert!(close(got["weight"].as_f64().unwrap(), *w, 1e-6, 0.0), "{name}: decoder position {q}");
        }
    }
}

#[test]
fn every_step_of_both_stacks_matches_transformers() {
    let cases = fixtures();
    for m in MODELS {
        assert!(cases.iter().any(|(n, _)| n.starts_with(&format!("{m}_"))), "no fixture for {m}");
    }
    let mut oracle = Oracle::new("transformers 4.46.3", tolerance("")).per_step(tolerance);
    for (name, case) in &cases {
        let dir = root().join(case["model_dir"].as_str().unwrap());
        let (source, target) = (case["source"].as_str().unwrap(), case["target"].as_str().unwrap());
        let doc = trace_json(&[source, "--model", dir.to_str().unwrap(), "--target", target, "--steps", "all,logits"]);
        crate::export::assert_valid(name, &doc);
        let input = &doc["input"];
        assert_eq!(input["tokens"], case["encoder"]["tokens"], "{name}: source tokens");
        assert_eq!(input["token_ids"], case["encoder"]["input_ids"], "{name}: source ids");
        assert_eq!(input["target"]["token_ids"], case["decoder"]["input_ids"], "{name}: decoder ids");
        assert_eq!(input["target"]["tokens"], case["decoder"]["tokens"], "{name}: decoder tokens");
        // The token strings of each stack are compared above.
        let ours = numbers(&doc);
        let want = Want::steps(&case["steps"]);
        let compared = oracle.compare(name, &want, &ours);
        assert!(compared.steps >= 60, "{name}: only {} steps compared", compared.steps);
        for id in ["encoder.layers.1.attn.weights", "decoder.layers.1.cross_attn.weights", "decoder.logits"] {
            assert!(want.iter().any(|w| w.id == id), "{name}: the fixture has no {id}");
        }
        alignment_is_the_mean_cross_attention(name, &doc);
        let top = doc["predictions"].as_array().unwrap_or_else(|| panic!("{name}: no predictions"));
        for (pos, want) in case["top_k"].as_array().unwrap().iter().enumerate() {
            let got = &top[pos]["top"];
            assert_eq!(got[0]["id"], want[0]["id"], "{name}: top-1 at decoder position {pos}");
            for (g, w) in got.as_array().unwrap().iter().zip(want.as_array().unwrap()) {
                let (a, b) = (g["prob"].as_f64().unwrap(), w["prob"].as_f64().unwrap());
                assert!(close(a, b, 1e-5, 1e-4), "{name}: probability at {pos}: {a} vs {b}");
            }
        }
    }
    oracle.finish("seq2seq");
}

/// Greedy generation (`--generate 8`) writes transformers' `generate` tokens, and each
/// decode step's cross-attention rows (the source words each new token read) are
/// transformers' within 1e-5.
#[test]
fn greedy_generation_matches_transformers_generate() {
    for (name, case) in fixtures().iter().filter(|(n, _)| n.ends_with("_short")) {
        let dir = root().join(case["model_dir"].as_str().unwrap());
        let g = &case["generate"];
        let n = g["max_new_tokens"].as_u64().unwrap().to_string();
        let source = case["source"].as_str().unwrap();
        let args = [source, "--model", dir.to_str().unwrap(), "--generate", &n, "--steps", "cross_attn.weights"];
        let doc = trace_json(&args);
        crate::export::assert_valid(name, &doc);
        let gen = &doc["generation"];
        let ids: Vec<u64> = gen["tokens"].as_array().unwrap().iter().map(|t| t["id"].as_u64().unwrap()).collect();
        let want: Vec<u64> = g["sequences"].as_array().unwrap()[1..].iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(ids, want, "{name}: generated ids");
        let rows = case["generate_steps"].as_array().unwrap();
        let layers = rows[0].as_array().unwrap().len();
        let mut compared = 0;
        for (t, step) in rows.iter().enumerate() {
            for l in 0..layers {
                let got = match t {
                    // Step 0 is the prompt's pass (the start token alone).
                    0 => doc["steps"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|s| s["id"] == format!("decoder.layers.{l}.cross_attn.weights")),
                    _ => gen["steps"][t - 1]["steps"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|s| s["id"] == format!("gen.{t}.decoder.layers.{l}.cross_attn.weights")),
                };
                let got =
                    flat(&got.unwrap_or_else(|| panic!("{name}: no cross-attention at step {t}, layer {l}"))["values"]);
                let want = flat(&step[l]);
                assert_eq!(got.len(), want.len(), "{name}: step {t} layer {l}");
                for (a, b) in got.iter().zip(&want) {
                    assert!(close(*a, *b, 1e-5, 0.0), "{name}: step {t} layer {l}: {a} vs {b}");
                }
                compared += 1;
            }
        }
        assert!(compared >= 16, "{name}: only {compared} rows compared");
    }
}

/// A copy of fixtures/seq2seq/t5 whose config.json and tokenizer.json `edit` changes.
fn broken_t5(edit: impl Fn(&mut Value, &mut Value)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(root().join("fixtures/seq2seq/t5")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    let read = |f: &str| -> Value { serde_json::from_slice(&std::fs::read(dir.path().join(f)).unwrap()).unwrap() };
    let (mut config, mut tokenizer) = (read("config.json"), read("tokenizer.json"));
    edit(&mut config, &mut tokenizer);
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
    std::fs::write(dir.path().join("tokenizer.json"), tokenizer.to_string()).unwrap();
    dir
}

#[test]
fn bad_encoder_decoder_input_is_refused_in_one_line() {
    let t5 = root().join("fixtures/seq2seq/t5");
    let t5 = t5.to_str().unwrap();
    let no_buckets = broken_t5(|c, _| {
        c.as_object_mut().unwrap().remove("relative_attention_num_buckets");
    });
    refused(&["my shoes", "--model", no_buckets.path().to_str().unwrap()], "no relative_attention_num_buckets");
    // No decoder_start_token_id, and no <pad> in the tokenizer to fall back on.
    let no_start = broken_t5(|c, t| {
        c.as_object_mut().unwrap().remove("decoder_start_token_id");
        for a in t["added_tokens"].as_array_mut().unwrap() {
            if a["content"] == "<pad>" {
                a["content"] = "<nothing>".into();
            }
        }
        t["model"]["vocab"][0][0] = "<nothing>".into();
    });
    refused(&["my shoes", "--model", no_start.path().to_str().unwrap()], "no decoder_start_token_id");
    let gpt2 = root().join("fixtures/decoders/gpt2");
    refused(&["my shoes", "--model", gpt2.to_str().unwrap(), "--target", "x"], "--target: it is the decoder's text");
    refused(&["my shoes", "--target", "x"], "--target: it is the decoder's text");
    refused(&["my shoes", "are small", "--model", t5], "give the decoder's text with --target TEXT");
    refused(&["my shoes", "--model", t5, "--target", " "], "--target: it is empty");
    let bart = root().join("fixtures/seq2seq/bart");
    let long = "the shoes are small ".repeat(30);
    refused(&["my shoes", "--model", bart.to_str().unwrap(), "--target", &long], "--target: it has 123 tokens");
    refused(&["my shoes", "--model", t5, "--chat"], "--chat");
    refused(&["my shoes", "--model", t5, "--pad-to", "8"], "--pad-to");
    for flag in [&["--lens"][..], &["--focus", "1"], &["--patch", "x"], &["--attribute", "the"], &["--check"]] {
        let args: Vec<&str> = ["my shoes", "--model", t5].iter().copied().chain(flag.iter().copied()).collect();
        refused(&args, "is for one-stack models");
    }
    refused(&["my shoes", "--model", t5, "--stats"], "add --stack encoder or --stack decoder");
    refused(&["my shoes", "--model", t5, "--ablate", "0.1"], "write enc.L.H");
    refused(&["my shoes", "--model", t5, "--ablate", "cross.2.0"], "the decoder has layers 0 to 1");
    refused(&["my shoes", "--ablate", "cross.0.0"], "this model has one");
}

/// Without `--target` the decoder runs on its start token alone: one position, whose
/// predictions are the first token the model would write; `--stack` chooses the attention the
/// views draw (the cross-attention by default: decoder tokens down, source tokens across).
#[test]
fn the_views_draw_the_attention_stack_names() {
    let t5 = root().join("fixtures/seq2seq/t5");
    let t5 = t5.to_str().unwrap();
    let doc = trace_json(&["my shoes are small", "--model", t5, "--target", "the shoes", "--steps", "weights"]);
    let (enc, dec) =
        (doc["input"]["tokens"].as_array().unwrap().len(), doc["input"]["target"]["tokens"].as_array().unwrap().len());
    assert_ne!(enc, dec, "a test of non-square maps needs two lengths");
    for (stack, rows, cols) in [("cross", dec, enc), ("encoder", enc, enc), ("decoder", dec, dec)] {
        let args =
            ["my shoes are small", "--model", t5, "--target", "the shoes", "--format", "heatmap", "--stack", stack];
        let out = String::from_utf8(cmd().args(args).output().unwrap().stdout).unwrap();
        let title = format!("[query_pos × key_pos = {rows} × {cols}]");
        assert!(out.contains(&title), "--stack {stack}: no {title} in\n{out}");
    }
    // The step tables label each stack's rows by its own tokens: the encoder's by the source's.
    let args =
        ["my shoes are small", "--model", t5, "--target", "the shoes", "--steps", "attn.weights", "--layer", "0"];
    let out =
        String::from_utf8(cmd().args(args).args(["--head", "0", "--width", "200"]).output().unwrap().stdout).unwrap();
    let table = |id: &str| {
        out.split(&format!("\n{id} · head 0")).nth(1).unwrap_or_else(|| panic!("no {id} in\n{out}")).to_string()
    };
    let (source, target) = (doc["input"]["texts"].clone(), doc["input"]["target"]["texts"].clone());
    let first = |texts: &Value| texts[0].as_str().unwrap().replace(' ', "·");
    assert!(table("encoder.layers.0.attn.weights").contains(&format!("0 {}", first(&source))), "{out}");
    assert!(table("decoder.layers.0.attn.weights").contains(&format!("0 {}", first(&target))), "{out}");
}

/// `--ablate enc.L.H,dec.L.H,cross.L.H` removes one head of each attention: the logits are
/// transformers' with `head_mask`, `decoder_head_mask` and `cross_attn_head_mask` zeroing the
/// same heads, within 1e-4; and the config says which heads each stack lost.
#[test]
fn ablating_a_head_of_each_stack_matches_transformers_head_masks() {
    for (name, case) in fixtures().iter().filter(|(n, _)| n.ends_with("_short")) {
        let dir = root().join(case["model_dir"].as_str().unwrap());
        let ab = &case["ablated"];
        let (source, target) = (case["source"].as_str().unwrap(), case["target"].as_str().unwrap());
        let spec = ab["ablate"].as_str().unwrap();
        let args =
            [source, "--model", dir.to_str().unwrap(), "--target", target, "--ablate", spec, "--steps", "logits"];
        let doc = trace_json(&args);
        crate::export::assert_valid(name, &doc);
        let cfg = &doc["config"];
        assert_eq!(cfg["interventions"]["ablate"], serde_json::json!([[0, 1]]), "{name}: encoder");
        let dec = &cfg["seq2seq"]["decoder"]["interventions"];
        assert_eq!(
            (&dec["ablate"], &dec["ablate_cross"]),
            (&serde_json::json!([[1, 3]]), &serde_json::json!([[1, 2]]))
        );
        let got =
            flat(&doc["steps"].as_array().unwrap().iter().find(|s| s["id"] == "decoder.logits").unwrap()["values"]);
        let want = flat(&ab["logits"]);
        assert_eq!(got.len(), want.len(), "{name}");
        let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(worst <= 1e-4, "{name}: ablated logits differ by {worst:.2e}");
    }
}

/// `attn-trace diff` reads both stacks' steps in trace order (the encoder's, then the
/// decoder's): an ablated cross-attention head is the first divergence, and nothing before.
#[test]
fn diff_finds_an_ablated_cross_attention_head_first() {
    let dir = tempfile::tempdir().unwrap();
    let t5 = root().join("fixtures/seq2seq/t5");
    let run = |file: &str, extra: &[&str]| {
        let mut args = vec!["my shoes are small", "--model", t5.to_str().unwrap(), "--target", "the shoes"];
        args.extend_from_slice(&["--steps", "all", "--format", "json"]);
        args.extend_from_slice(extra);
        let out = cmd().args(&args).output().unwrap();
        assert!(out.status.success());
        std::fs::write(dir.path().join(file), out.stdout).unwrap();
        dir.path().join(file).to_str().unwrap().to_string()
    };
    let (a, b) = (run("a.json", &[]), run("b.json", &["--ablate", "cross.1.2"]));
    let out = cmd().args(["diff", &a, &b]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("first divergence: decoder.layers.1.cross_attn.context (layer 1, head 2)"), "{text}");
    let same = cmd().args(["diff", &a, &a]).output().unwrap();
    assert!(same.status.success() && String::from_utf8(same.stdout).unwrap().contains("all 105 common steps"));
}

/// The storage forms a decoder's folder may take hold an encoder–decoder too: BART's tensors
/// split over two safetensors shards with an index give every step exactly as the single file
/// does, and stored as bf16 they are read as bf16 (`config.model.stored_dtype`), computed in f32.
#[test]
fn shards_and_bf16_hold_an_encoder_decoder() {
    use candle_core::{DType, Device, Tensor};
    let bart = root().join("fixtures/seq2seq/bart");
    let tensors = candle_core::safetensors::load(bart.join("model.safetensors"), &Device::Cpu).unwrap();
    let copy = |dir: &std::path::Path| {
        for f in [
            "config.json",
            "generation_config.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "special_tokens_map.json",
        ] {
            std::fs::copy(bart.join(f), dir.join(f)).unwrap();
        }
    };
    let sharded = tempfile::tempdir().unwrap();
    copy(sharded.path());
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    let (first, second) = names.split_at(names.len() / 2);
    let mut weight_map = serde_json::Map::new();
    for (i, part) in [first, second].iter().enumerate() {
        let file = format!("model-0000{}-of-00002.safetensors", i + 1);
        let shard: std::collections::HashMap<String, Tensor> =
            part.iter().map(|n| ((*n).clone(), tensors[*n].clone())).collect();
        candle_core::safetensors::save(&shard, sharded.path().join(&file)).unwrap();
        part.iter().for_each(|n| _ = weight_map.insert((*n).clone(), file.clone().into()));
    }
    let index = serde_json::json!({"metadata": {}, "weight_map": weight_map});
    std::fs::write(sharded.path().join("model.safetensors.index.json"), index.to_string()).unwrap();
    let bf16 = tempfile::tempdir().unwrap();
    copy(bf16.path());
    let halved: std::collections::HashMap<String, Tensor> =
        tensors.iter().map(|(n, t)| (n.clone(), t.to_dtype(DType::BF16).unwrap())).collect();
    candle_core::safetensors::save(&halved, bf16.path().join("model.safetensors")).unwrap();

    let run = |dir: &std::path::Path| {
        trace_json(&[
            "my shoes are small",
            "--model",
            dir.to_str().unwrap(),
            "--target",
            "the shoes",
            "--steps",
            "all,logits",
        ])
    };
    let (whole, split, half) = (run(&bart), run(sharded.path()), run(bf16.path()));
    assert_eq!(whole["steps"], split["steps"], "two shards give the single file's steps exactly");
    assert_eq!(half["config"]["model"]["stored_dtype"], "bf16");
    let (a, b) = (numbers(&whole), numbers(&half));
    let logits = |s: &Steps| s["decoder.logits"].1.clone();
    let worst = logits(&a).iter().zip(&logits(&b)).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    assert!(worst > 0.0 && worst < 0.2, "bf16 weights move the logits a little: {worst}");
}
