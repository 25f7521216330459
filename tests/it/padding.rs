//! Padding (issue 17, item 6): `--pad-to N --padding left|right` on a batch against
//! transformers 4.46.3 running the same padded batch with its attention_mask
//! (fixtures/oracle/padding, made by fixtures/oracle/padding_oracle.py), for BERT, GPT-2 and
//! Llama. Every position transformers defines (a query that sees at least one real key) is
//! compared: each layer's attention weights and hidden states, within 1e-5.

use crate::cli::assert_usage_error;
use crate::common::*;
use serde_json::Value;

/// |a − b| ≤ 1e-5 + 1e-5·|b|: f32 arithmetic in another order than PyTorch's, on values
/// rounded to 7 significant digits.
const TOL: f64 = 1e-5;

fn fixture(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(root().join("fixtures/oracle/padding").join(name)).unwrap()).unwrap()
}

fn check(oracle: &mut Oracle, file: &str) -> usize {
    let case = fixture(file);
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("batch.txt");
    let sentences: Vec<&str> = case["sentences"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    std::fs::write(&batch, sentences.join("\n")).unwrap();
    let model = root().join(case["model_dir"].as_str().unwrap());
    let n = case["pad_to"].as_u64().unwrap().to_string();
    let side = case["side"].as_str().unwrap();
    let out = cmd()
        .args(["--batch", batch.to_str().unwrap(), "--model", model.to_str().unwrap(), "--pad-to", &n])
        .args(["--padding", side, "--format", "json", "--steps", "all"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{file}: {}", String::from_utf8_lossy(&out.stderr));
    let docs: Value = serde_json::from_slice(&out.stdout).unwrap();
    let causal = case["causal"].as_bool().unwrap();
    let mut compared = 0;
    for (b, (doc, want)) in docs.as_array().unwrap().iter().zip(case["items"].as_array().unwrap()).enumerate() {
        let what = format!("{file} sentence {b}");
        assert_eq!(doc["input"]["token_ids"], want["input_ids"], "{what}: ids");
        assert_eq!(doc["config"]["padding"]["attention_mask"], want["attention_mask"], "{what}: mask");
        assert_eq!(doc["config"]["padding"]["side"], side);
        let mask: Vec<bool> = want["attention_mask"].as_array().unwrap().iter().map(|m| m == 1).collect();
        let len = mask.len();
        // A query transformers defines sees at least one of the sentence's tokens.
        let defined: Vec<bool> = (0..len).map(|q| (0..len).any(|k| mask[k] && (!causal || k <= q))).collect();
        let s = steps(doc);
        let layers = want["attentions"].as_array().unwrap().len();
        let mut wanted = Vec::new();
        for l in 0..layers {
            let id = format!("layers.{l}.attn.weights");
            // Pads are hidden: their columns hold exactly 0 in every row.
            let w = &s[&id].1;
            assert!(w.iter().enumerate().all(|(i, v)| mask[i % len] || *v == 0.0), "{what} {id}: a pad is seen");
            wanted.push(Want::values(id, &want["attentions"][l]));
            let hid = if !causal {
                format!("layers.{l}.add_norm2.out")
            } else if l + 1 < layers {
                format!("layers.{l}.add_norm2.sum")
            } else {
                "final_norm.out".to_string()
            };
            wanted.push(Want::values(hid, &want["hidden_states"][l + 1]));
        }
        compared += oracle.compare_rows(&what, &wanted, &s, Some(&defined)).values;
        crate::export::assert_valid(&what, doc);
    }
    compared
}

#[test]
fn padded_batches_match_transformers() {
    let mut oracle = Oracle::new("transformers", (TOL, TOL));
    for model in ["tiny-bert", "gpt2", "llama-gqa"] {
        for side in ["right", "left"] {
            let n = check(&mut oracle, &format!("{model}_{side}.json"));
            assert!(n > 1000, "{model} {side}: only {n} values compared");
        }
    }
    oracle.finish("padded batches");
}

#[test]
fn right_padding_leaves_a_decoder_sentence_unchanged() {
    // With right padding and the causal mask, no real token sees a pad: the sentence's rows
    // are those of its unpadded run (the pads change nothing before them), up to the order
    // of f32 sums, which longer rows change.
    let model = root().join("fixtures/decoders/llama-gqa");
    let m = model.to_str().unwrap();
    let plain = trace_json(&["the cat sat", "--model", m, "--steps", "all"]);
    let padded = trace_json(&["the cat sat", "--model", m, "--steps", "all", "--pad-to", "9"]);
    let (a, b) = (steps(&plain), steps(&padded));
    let n = plain["input"]["token_ids"].as_array().unwrap().len();
    let id = "layers.1.add_norm2.sum";
    let width = a[id].1.len() / n;
    let mut unpadded = Oracle::new("unpadded", (TOL, TOL));
    unpadded.values(id, &a[id].0, &b[id].1[..n * width], &a[id].1, (TOL, TOL), |_| true);
    unpadded.finish("the sentence's rows");
    assert_eq!(padded["config"]["padding"]["attention_mask"].as_array().unwrap().len(), 9);
}

#[test]
fn bad_padding_is_one_line() {
    let tiny = root().join("fixtures/tiny-bert");
    let t = tiny.to_str().unwrap();
    assert_usage_error(&["my shoes", "--pad-to", "11"], "--pad-to: 11 is more than the learned position table's 10");
    assert_usage_error(&["my shoes are small", "--pad-to", "3"], "the sentence has 4 tokens, more than 3");
    assert_usage_error(&["my shoes", "--pad-to", "4", "--save-weights", "w.st"], "--save-weights: it does not take");
    assert_usage_error(&["my shoes", "--model", t, "--padding", "left"], "--padding: it says where --pad-to puts");
    assert_usage_error(&["my shoes are small", "--model", t, "--pad-to", "3"], "has 6 tokens, more than 3");
    assert_usage_error(&["my shoes", "--model", t, "--pad-to", "33"], "33 is more than the model's 32 positions");
    assert_usage_error(&["my shoes", "--model", t, "--pad-to", "8", "--check"], "--check: it does not take a padded");
}
