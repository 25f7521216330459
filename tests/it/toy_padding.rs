//! `--pad-to` on the toy model (issue 17, item 6) against plain PyTorch: the padded batches of
//! fixtures/oracle/toy_padding (made by fixtures/oracle/toy_padding_oracle.py: the pad is
//! `<pad>`, one id past the vocabulary with a zero embedding row appended after the drawn
//! rows; pads hidden as nn.TransformerEncoderLayer's src_key_padding_mask hides them, with the
//! causal mask for --causal). Every step of every row PyTorch defines is compared.

use crate::common::*;
use serde_json::Value;

/// |a − b| ≤ 1e-5 + 1e-5·|b|: f32 arithmetic in another order than PyTorch's.
const TOL: f64 = 1e-5;

fn check(oracle: &mut Oracle, file: &str) -> usize {
    let case: Value =
        serde_json::from_slice(&std::fs::read(root().join("fixtures/oracle/toy_padding").join(file)).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("batch.txt");
    let sentences: Vec<&str> = case["sentences"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    std::fs::write(&batch, sentences.join("\n")).unwrap();
    let args: Vec<String> = case["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
    let n = case["pad_to"].as_u64().unwrap().to_string();
    let side = case["side"].as_str().unwrap();
    let out = cmd()
        .current_dir(root())
        .args(["--batch", batch.to_str().unwrap(), "--pad-to", &n, "--padding", side])
        .args(&args)
        .args(["--format", "json", "--steps", "all"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{file}: {}", String::from_utf8_lossy(&out.stderr));
    let docs: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut compared = 0;
    for (b, (doc, want)) in docs.as_array().unwrap().iter().zip(case["items"].as_array().unwrap()).enumerate() {
        let what = format!("{file} sentence {b}");
        assert_eq!(doc["input"]["tokens"], want["tokens"], "{what}: tokens");
        assert_eq!(doc["input"]["token_ids"], want["ids"], "{what}: ids");
        assert_eq!(doc["config"]["padding"]["attention_mask"], want["attention_mask"], "{what}: mask");
        let defined: Vec<bool> = want["defined"].as_array().unwrap().iter().map(|d| d.as_bool().unwrap()).collect();
        let got = steps(doc);
        compared += oracle.compare_rows(&what, &Want::steps(&want["steps"]), &got, Some(&defined)).values;
        // The mask hides every pad and, with --causal, every later key.
        let mask = &got["layers.0.attn.mask"].1;
        let len = defined.len();
        let causal = case["causal"].as_bool().unwrap();
        let pad = |k: usize| want["attention_mask"][k] == 0;
        for (i, m) in mask.iter().enumerate() {
            let (q, k) = (i / len, i % len);
            assert_eq!(*m == 1.0, pad(k) || (causal && k > q), "{what}: attn.mask[{q}][{k}]");
        }
        crate::export::assert_valid(&what, doc);
    }
    compared
}

#[test]
fn padded_toy_batches_match_pytorch() {
    // The oracle masks with torch.finfo(float32).min, attn-trace with −inf: both hide the key.
    let mut oracle = Oracle::new("PyTorch", (TOL, TOL)).lowest_is_masked();
    for model in ["vocab_encoder", "vocab_causal", "own_encoder"] {
        for side in ["right", "left"] {
            let n = check(&mut oracle, &format!("{model}_{side}.json"));
            assert!(n > 2000, "{model} {side}: only {n} values compared");
        }
    }
    oracle.finish("padded toy batches");
}

#[test]
fn padding_leaves_the_unpadded_numbers_alone() {
    // The pad is a row appended after the drawn ones: the vocabulary's embeddings, and every
    // weight drawn after them, are those of the unpadded run; the sentence's rows agree up to
    // the order of f32 sums over the longer (masked) rows.
    let s = "my shoes are small";
    let plain = trace_json(&[s, "--heads", "2", "--layers", "2", "--steps", "all"]);
    let padded = trace_json(&[s, "--heads", "2", "--layers", "2", "--steps", "all", "--pad-to", "6"]);
    let (a, b) = (steps(&plain), steps(&padded));
    assert_eq!(a["embed.token"].1, b["embed.token"].1[..16], "the vocabulary's rows");
    assert!(b["embed.token"].1[16..].iter().all(|v| *v == 0.0), "the pads' rows are zero");
    assert_eq!(padded["input"]["token_ids"], serde_json::json!([0, 1, 2, 3, 4, 4]));
    assert_eq!(padded["input"]["tokens"][4], "<pad>");
    let (x, y) = (&a["output"].1, &b["output"].1[..16]);
    assert!(x.iter().zip(y.iter()).all(|(p, q)| close(*q, *p, TOL, TOL)), "{x:?} {y:?}");
}
