//! `--generate` on the command line: the document fits the schema, sampling is reproducible
//! and restricted as asked, the end-of-sequence token stops it, `--baseline` reports the
//! generation without the interventions, `diff` compares two generations, `--steps` selects
//! decode steps' steps, and bad input is one line with exit 2.

use super::common::{cmd, root};
use super::hostile::refused;
use serde_json::Value;

fn llama() -> String {
    root().join("fixtures/decoders/llama-gqa").display().to_string()
}

fn run(args: &[&str]) -> (Vec<u8>, Value) {
    let out = cmd().args(args).args(["--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let doc = serde_json::from_slice(&out.stdout).unwrap();
    (out.stdout, doc)
}

fn ids(doc: &Value) -> Vec<u64> {
    doc["generation"]["tokens"].as_array().unwrap().iter().map(|t| t["id"].as_u64().unwrap()).collect()
}

#[test]
fn a_generation_document_fits_the_schema() {
    let m = llama();
    for extra in [&["--generate", "4"][..], &["--generate", "3", "--sample", "--ablate", "0.1", "--baseline"]] {
        let mut args = vec!["The capital of France is", "--model", &m];
        args.extend(extra);
        let (_, doc) = run(&args);
        super::export::assert_valid(&format!("{extra:?}"), &doc);
        let g = &doc["generation"];
        let n = g["prompt_tokens"].as_u64().unwrap();
        assert_eq!(n as usize, doc["input"]["tokens"].as_array().unwrap().len());
        // Decode step t holds the new position's row over n + t keys.
        let step = &g["steps"][1];
        assert_eq!(step["step"], 2);
        let w = step["steps"].as_array().unwrap().iter().find(|s| s["id"] == "gen.2.layers.0.attn.weights").unwrap();
        assert_eq!(w["shape"], serde_json::json!([4, 1, n + 2]));
    }
}

#[test]
fn sampling_is_reproducible_and_restricted() {
    let m = llama();
    let base = ["The capital of France is", "--model", &m, "--generate", "12", "--sample"];
    let with = |extra: &[&str]| run(&[&base[..], extra].concat());
    let (a, _) = with(&["--sample-seed", "3", "--temperature", "1.5"]);
    let (b, _) = with(&["--sample-seed", "3", "--temperature", "1.5"]);
    assert_eq!(a, b, "the same seed gave other bytes");
    let (_, c) = with(&["--sample-seed", "4", "--temperature", "1.5"]);
    let (_, a) = with(&["--sample-seed", "3", "--temperature", "1.5"]);
    assert_ne!(ids(&a), ids(&c), "two seeds drew the same 12 tokens of a random model");
    // Top-k 1 leaves only the most probable token: the greedy generation.
    let (_, one) = with(&["--sample-top-k", "1"]);
    let (_, greedy) = run(&["The capital of France is", "--model", &m, "--generate", "12"]);
    assert_eq!(ids(&one), ids(&greedy));
    // Every sampled token is among its step's most probable tokens that reach probability
    // 0.3 together (the candidates hold the top 50).
    let (_, p) = with(&["--top-p", "0.3", "--top-k", "50"]);
    for t in p["generation"]["tokens"].as_array().unwrap() {
        let mut mass = 0.0;
        let mut allowed = Vec::new();
        for c in t["candidates"].as_array().unwrap() {
            allowed.push(c["id"].clone());
            mass += c["prob"].as_f64().unwrap();
            if mass >= 0.3 {
                break;
            }
        }
        assert!(allowed.contains(&t["id"]), "{} drawn outside the top-p set {allowed:?}", t["id"]);
    }
}

#[test]
fn the_end_of_sequence_token_stops_a_generation_unless_ignored() {
    let m = llama();
    let (_, greedy) = run(&["The capital of France is", "--model", &m, "--generate", "6"]);
    let second = ids(&greedy)[1];
    // The same model with generation_config.json naming the second greedy token as its eos.
    let dir = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(&m).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), dir.path().join(f.file_name())).unwrap();
    }
    std::fs::write(dir.path().join("generation_config.json"), format!("{{\"eos_token_id\": [999, {second}]}}"))
        .unwrap();
    let d = dir.path().to_str().unwrap();
    let (_, stopped) = run(&["The capital of France is", "--model", d, "--generate", "6"]);
    assert_eq!(stopped["generation"]["stop"], "eos");
    assert_eq!(ids(&stopped), ids(&greedy)[..2], "stops after the eos token, keeping it");
    assert_eq!(stopped["generation"]["steps"].as_array().unwrap().len(), 1);
    let (_, ignored) = run(&["The capital of France is", "--model", d, "--generate", "6", "--ignore-eos"]);
    assert_eq!(ignored["generation"]["stop"], "length");
    assert_eq!(ids(&ignored), ids(&greedy));
}

#[test]
fn a_baseline_is_the_generation_without_the_interventions() {
    let m = llama();
    let p = "The capital of France is";
    let (_, plain) = run(&[p, "--model", &m, "--generate", "8"]);
    let (_, ablated) = run(&[p, "--model", &m, "--generate", "8", "--ablate", "0.0,0.1,0.2,0.3,1.0,1.1"]);
    let (_, both) = run(&[p, "--model", &m, "--generate", "8", "--ablate", "0.0,0.1,0.2,0.3,1.0,1.1", "--baseline"]);
    let b = &both["generation"]["baseline"];
    assert_eq!(b["text"], plain["generation"]["text"]);
    assert_eq!(ids(&both), ids(&ablated));
    let base: Vec<u64> = b["tokens"].as_array().unwrap().iter().map(|t| t["id"].as_u64().unwrap()).collect();
    let parted = ids(&ablated).iter().zip(&base).position(|(a, b)| a != b);
    assert_eq!(b["parted_at"].as_u64().map(|x| x as usize), parted);
    assert!(parted.is_some(), "ablating 6 of 8 heads changed nothing in 8 tokens");
}

#[test]
fn diff_compares_two_generations_token_by_token() {
    let m = llama();
    let dir = tempfile::tempdir().unwrap();
    let save = |name: &str, extra: &[&str]| {
        let (bytes, _) = run(&[&["The capital of France is", "--model", &m, "--generate", "5"][..], extra].concat());
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    };
    let (a, b, c) = (save("a.json", &[]), save("b.json", &[]), save("c.json", &["--sample", "--temperature", "3"]));
    let same = cmd().args(["diff", &a, &b]).output().unwrap();
    assert_eq!(same.status.code(), Some(0), "{}", String::from_utf8_lossy(&same.stdout));
    let other = cmd().args(["diff", &a, &c]).output().unwrap();
    assert_eq!(other.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&other.stdout).contains("generation.token_ids"));
}

#[test]
fn steps_layer_and_head_select_decode_steps_too() {
    let m = llama();
    let (_, doc) =
        run(&["The capital", "--model", &m, "--generate", "3", "--steps", "q", "--layer", "1", "--head", "2"]);
    for d in doc["generation"]["steps"].as_array().unwrap() {
        let got: Vec<&str> = d["steps"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
        assert_eq!(got, [format!("gen.{}.layers.1.attn.q", d["step"])]);
        assert_eq!(d["steps"][0]["shape"], serde_json::json!([1, 1, 8]));
    }
}

#[test]
fn bad_generation_input_is_one_line() {
    let m = llama();
    let bert = root().join("fixtures/tiny-bert-mlm").display().to_string();
    let p = "The capital of France is";
    let cases: &[(&[&str], &str)] = &[
        (&[p, "--model", &m, "--generate", "0"], "--generate"),
        (&[p, "--model", &bert, "--generate", "3"], "not a language model"),
        (&["my shoes are small", "--generate", "3"], "not a language model"),
        (&[p, "--model", &m, "--generate", "3", "--sample", "--temperature", "0"], "--temperature"),
        (&[p, "--model", &m, "--generate", "3", "--sample", "--temperature", "NaN"], "--temperature"),
        (&[p, "--model", &m, "--generate", "3", "--sample", "--top-p", "1.5"], "--top-p"),
        (&[p, "--model", &m, "--generate", "3", "--sample", "--top-p", "0"], "--top-p"),
        (&[p, "--model", &m, "--generate", "3", "--sample", "--sample-top-k", "0"], "--sample-top-k"),
        (&[p, "--model", &m, "--generate", "3", "--temperature", "0.5"], "--sample"),
        (&[p, "--model", &m, "--sample"], "--generate"),
        (&[p, "--model", &m, "--generate", "3", "--baseline"], "--baseline"),
        (&[p, "--model", &m, "--generate", "3", "--ablate", "0.1", "--ablate-mode", "mean"], "--ablate-mode mean"),
        (&[p, "--model", &m, "--generate", "3", "--format", "jsonl"], "--format jsonl"),
        (&[p, "--model", &m, "--generate", "99999999999"], "more tokens than the model's whole context window holds"),
    ];
    for (args, fragment) in cases {
        refused(&cmd().args(*args).output().unwrap(), fragment);
    }
}

#[test]
fn a_generation_stops_at_the_last_position_with_a_note() {
    let out = cmd()
        .args(["my shoes are small", "--causal", "--lm-head", "tied", "--max-len", "10", "--generate", "10"])
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let g = &doc["generation"];
    assert_eq!(g["stop"], "positions");
    // 4 prompt tokens: tokens at positions 4..=10, the last never run (decode steps 1..=6).
    assert_eq!(g["tokens"].as_array().unwrap().len(), 7);
    assert_eq!(g["steps"].as_array().unwrap().len(), 6);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--generate stopped after 7 tokens") && err.contains("last position (10)"), "{err}");
}

#[test]
fn a_batch_generates_each_prompt_as_its_own_run() {
    let m = llama();
    let (_, batch) = run(&["The capital of France is", "my shoes are", "--model", &m, "--generate", "4"]);
    for (i, p) in ["The capital of France is", "my shoes are"].iter().enumerate() {
        let (_, one) = run(&[p, "--model", &m, "--generate", "4"]);
        assert_eq!(batch[i]["generation"], one["generation"], "{p}");
    }
}
