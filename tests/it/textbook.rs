//! Textbook attention modules (fixtures/oracle/textbook_oracle.py): Raschka's
//! `MultiHeadAttentionWrapper` and `MultiHeadAttention(d_in, d_out, …)`, Karpathy's GPT built
//! from single-head `Head` modules, and `nn.TransformerEncoder(…, norm=…)`, each written in
//! plain PyTorch and run by PyTorch 2.5.1 after `torch.manual_seed`. attn-trace, run with the
//! case's arguments, must give every step the module computed within 1e-6 (relative above 1).

use crate::common::*;
use serde_json::Value;

/// |a − b| ≤ 1e-6 + 1e-6·|b|. f32 throughout: the modules divide where attn-trace multiplies
/// by the scale, add biases inside `addmm` and sum in other orders, which moves the last bit
/// or two (a score of 5.957177 is 5.957176 here: one f32 step at that size is 4.8e-7).
const ATOL: f64 = 1e-6;
const RTOL: f64 = 1e-6;

fn cases() -> Vec<std::path::PathBuf> {
    let dir = root().join("fixtures/oracle/textbook");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    cases.sort();
    cases
}

fn run(args: &[&str]) -> Value {
    let out = cmd().current_dir(root()).args(args).args(["--format", "json"]).output().unwrap();
    assert!(out.status.success(), "attn-trace {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn textbook_modules_match_pytorch_within_1e_6() {
    let cases = cases();
    assert!(cases.len() >= 10, "expected the textbook cases in fixtures/oracle/textbook");
    let mut oracle = Oracle::new("PyTorch", (ATOL, RTOL));
    for path in &cases {
        let case: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let name = case["name"].as_str().unwrap().to_string();
        let args: Vec<&str> = case["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        oracle.compare(&name, &Want::steps(&case["steps"]), &steps(&run(&args)));
    }
    oracle.finish(&format!("{} textbook cases", cases.len()));
}

/// The sentence of seed notebook 000.
const S: &str = "my shoes are small, my feet are big.";

fn header(args: &[&str]) -> String {
    let out = cmd().args(args).args(["--steps", "tokens"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    // The header line, unwrapped.
    text.split("\n\n").next().unwrap().split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn seeded_weights_are_called_untrained_and_file_weights_are_not() {
    let seeded = header(&[S]);
    assert!(seeded.contains("random untrained weights, seed 123"), "{seeded}");
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.safetensors");
    cmd().args([S, "--save-weights", w.to_str().unwrap()]).assert().success();
    let loaded = header(&[S, "--weights", w.to_str().unwrap()]);
    assert!(!loaded.contains("untrained") && loaded.contains("weights "), "{loaded}");
}

#[test]
fn config_says_which_form_was_used() {
    let plain = trace_json(&[S, "--heads", "2"]);
    for key in ["separate_heads", "attention_only", "no_out_proj", "d_out"] {
        assert!(plain["config"].get(key).is_none(), "{key} in a plain trace's config");
    }
    let doc = trace_json(&[S, "--heads", "2", "--separate-heads", "--attention-only", "--no-out-proj", "--d-k", "3"]);
    let c = &doc["config"];
    assert_eq!((c["separate_heads"].as_bool(), c["attention_only"].as_bool()), (Some(true), Some(true)));
    assert_eq!((c["no_out_proj"].as_bool(), c["d_out"].as_u64()), (Some(true), Some(6)));
    let last = doc["steps"].as_array().unwrap().last().unwrap();
    assert_eq!((last["id"].as_str(), &last["dims"]), (Some("output"), &serde_json::json!(["pos", "d_out"])));
    let h = header(&[S, "--heads", "2", "--separate-heads", "--attention-only", "--no-out-proj", "--d-k", "3"]);
    assert!(h.contains("attention only, no output projection, separate head modules"), "{h}");
}

#[test]
fn separate_heads_change_the_draws_only_when_there_are_several() {
    let values = |args: &[&str]| steps(&trace_json(args)).get("layers.0.attn.q").unwrap().1.clone();
    // One head: the single module draws q, k, v as the fused projections do.
    assert_eq!(values(&[S]), values(&[S, "--separate-heads"]));
    // Two heads: head 0 is drawn first and whole, so its q differs from the fused draw's rows.
    assert_ne!(values(&[S, "--heads", "2"]), values(&[S, "--heads", "2", "--separate-heads"]));
}

#[test]
fn an_attention_only_file_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.safetensors");
    let args = [S, "--attention-only", "--heads", "2", "--d-out", "6", "--qkv-bias", "--out-proj-bias"];
    let seeded = trace_json(&[&args[..], &["--save-weights", w.to_str().unwrap()]].concat());
    // The file alone says attention-only, d_out 6 and the biases.
    let loaded = trace_json(&[S, "--heads", "2", "--weights", w.to_str().unwrap()]);
    assert_eq!(seeded["steps"], loaded["steps"]);
    assert_eq!(loaded["config"]["d_out"], 6);
    assert_eq!(
        (loaded["config"]["attn_bias"].as_bool(), loaded["config"]["attn_out_bias"].as_bool()),
        (Some(true), None)
    );
}

#[test]
fn textbook_flags_that_cannot_apply_are_refused() {
    let assert_usage_error = crate::cli::assert_usage_error;
    assert_usage_error(&[S, "--d-out", "6"], "--d-out: it shapes a self-attention module traced alone");
    assert_usage_error(&[S, "--no-out-proj"], "add --attention-only");
    assert_usage_error(&[S, "--attention-only", "--d-ff", "8"], "--d-ff: --attention-only traces self-attention alone");
    assert_usage_error(&[S, "--attention-only", "--final-norm"], "--final-norm");
    assert_usage_error(
        &[S, "--attention-only", "--layers", "2", "--d-out", "6"],
        "--layers: each attention-only layer",
    );
    assert_usage_error(&[S, "--attention-only", "--no-out-proj", "--out-proj-bias"], "no output projection");
    assert_usage_error(&[S, "--attention-only", "--no-out-proj", "--d-k", "2", "--d-out", "6"], "side by side, 2 wide");
    assert_usage_error(&[S, "--heads", "2", "--kv-heads", "1", "--separate-heads"], "--separate-heads");
    assert_usage_error(&[S, "--attention-only", "--heads", "4", "--d-out", "6"], "d_out 6 is not divisible by 4 heads");
    assert_usage_error(&[S, "--model", "x", "--attention-only"], "--attention-only: it applies to the toy encoder");
    let encoder = [S, "--linear-init", "encoder-layer", "--heads", "2"];
    assert_usage_error(&encoder, "biases everywhere (bias=True) or nowhere");
    assert_usage_error(&[&encoder[..], &["--attn-bias", "--d-k", "3"]].concat(), "splits d_model 4 evenly");
    assert_usage_error(&[&encoder[..], &["--attn-bias", "--separate-heads"]].concat(), "has no --separate-heads");
}

#[test]
fn a_final_norm_may_be_named_as_nn_transformer_encoder_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.json");
    // The file of the nn.TransformerEncoder case, with its final norm also as final_norm.*.
    let case = root().join("fixtures/oracle/textbook/inputs/torch_encoder_norm_pre_l2.weights.json");
    let mut doc: serde_json::Map<String, Value> = serde_json::from_slice(&std::fs::read(case).unwrap()).unwrap();
    assert!(doc.contains_key("norm.weight") && doc.contains_key("norm.bias"));
    doc.insert("final_norm.weight".into(), doc["norm.weight"].clone());
    std::fs::write(&w, serde_json::to_vec(&doc).unwrap()).unwrap();
    let input = root().join("fixtures/oracle/textbook/inputs/torch_encoder_norm_pre_l2.input.json");
    let args = ["--input", input.to_str().unwrap(), "--weights", w.to_str().unwrap(), "--heads", "2", "--norm", "pre"];
    crate::cli::assert_usage_error(&args, "the final norm is given twice, as final_norm.* and as norm.*");
}
