//! `attn-trace compare`: its numbers against a numpy oracle (fixtures/compare/oracle.json,
//! computed by compare_oracle.py from two committed traces), two quantizations of one model
//! against its F32 file (the first divergence where a hand computation puts it), a fine-tune
//! simulated by changing one head, the pairs that must work, the refusals, the formats, the
//! same bytes every run, and SmolLM2 against its F32 twin.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

/// Runs `attn-trace compare PROMPT --model A --model B --format json …`: (exit code, report,
/// stderr).
fn compare(prompt: &str, a: &str, b: &str, extra: &[&str]) -> (i32, Value, String) {
    let out =
        cmd().args(["compare", prompt, "--model", a, "--model", b, "--format", "json"]).args(extra).output().unwrap();
    let code = out.status.code().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(code == 2 || !out.stdout.is_empty(), "no report: {err}");
    let report = if out.stdout.is_empty() { Value::Null } else { serde_json::from_slice(&out.stdout).unwrap() };
    (code, report, err)
}

fn path(p: &str) -> String {
    root().join(p).to_str().unwrap().to_string()
}

fn num(v: &Value) -> f64 {
    match v {
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "nan" => f64::NAN,
        v => v.as_f64().unwrap_or_else(|| panic!("not a number: {v}")),
    }
}

fn fixture(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(root().join("fixtures/compare").join(name)).unwrap()).unwrap()
}

/// Equal within `rtol` relative (and 1e-12 absolute), infinities equal.
fn near(a: f64, b: f64, rtol: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 + rtol * b.abs()
}

/// The report of fixtures/gguf/tiny-llama.gguf (Q8_0, Q4_1) against tiny-llama-f32.gguf holds
/// the oracle's numbers: every step's relative error and largest difference, the ranking
/// (steps the oracle finds equal may come in either order), every head's JS divergence (mean,
/// largest, its query) in the oracle's order, the residual profile, the KL per position and
/// each side's top-1. The traces are f32 and both sides sum in f64, so 1e-9 holds; if the
/// model's arithmetic changes, regenerate the traces and the oracle (fixtures/README.md).
#[test]
fn ranking_and_divergences_match_the_numpy_oracle() {
    let want = fixture("oracle.json");
    let sentence = want["sentence"].as_str().unwrap();
    let (code, got, err) =
        compare(sentence, &path("fixtures/gguf/tiny-llama.gguf"), &path("fixtures/gguf/tiny-llama-f32.gguf"), &[]);
    assert_eq!(code, 1, "{err}");
    let ours: Vec<&Value> = got["steps"].as_array().unwrap().iter().collect();
    let theirs = want["steps"].as_array().unwrap();
    assert_eq!(ours.len(), theirs.len(), "steps compared");
    let mut last_group = 0;
    for s in &ours {
        let id = s["id"].as_str().unwrap();
        let w = theirs.iter().find(|w| w["id"] == id).unwrap_or_else(|| panic!("{id}: not in the oracle"));
        let (r, wr) = (num(&s["relative_error"]), num(&w["relative_error"]));
        assert!(near(r, wr, 1e-9), "{id}: relative error {r} against the oracle's {wr}");
        if !w["max_abs_error"].is_null() {
            assert!(near(num(&s["max_abs_error"]), num(&w["max_abs_error"]), 1e-9), "{id}: max |a − b|");
        }
        let group = w["group"].as_u64().unwrap();
        assert!(
            group >= last_group,
            "{id} ranks before a step with a larger error (oracle group {group} < {last_group})"
        );
        last_group = group;
    }
    let heads = got["heads"].as_array().unwrap();
    let want_heads = want["heads"].as_array().unwrap();
    assert_eq!(heads.len(), want_heads.len());
    for (h, w) in heads.iter().zip(want_heads) {
        let at = format!("layer {} head {}", w["layer"], w["head"]);
        assert_eq!((&h["layer"], &h["head"]), (&w["layer"], &w["head"]), "rank of {at}");
        assert!(
            near(num(&h["js_mean"]), num(&w["js_mean"]), 1e-9),
            "{at}: mean JS {} vs {}",
            h["js_mean"],
            w["js_mean"]
        );
        assert!(near(num(&h["js_max"]), num(&w["js_max"]), 1e-9), "{at}: max JS");
        assert_eq!(h["js_max_query"], w["js_max_query"], "{at}: the query of the largest");
    }
    for (l, w) in got["layers"].as_array().unwrap().iter().zip(want["layers"].as_array().unwrap()) {
        assert_eq!(l["layer"], w["layer"]);
        assert!(near(num(&l["relative_error"]), num(&w["relative_error"]), 1e-9), "layer {}", w["layer"]);
    }
    let rows = got["predictions"]["rows"].as_array().unwrap();
    for (i, row) in rows.iter().enumerate() {
        assert!(near(num(&row["kl"]), num(&want["kl"][i]), 1e-9), "KL at {i}: {} vs {}", row["kl"], want["kl"][i]);
        assert_eq!(row["a"][0]["id"], want["top1"]["a"][i], "A's top-1 at {i}");
        assert_eq!(row["b"][0]["id"], want["top1"]["b"][i], "B's top-1 at {i}");
    }
    assert_eq!(rows.len(), want["kl"].as_array().unwrap().len());
}

/// Q4_0 and Q8_0 files of one checkpoint (fixtures/compare/make_fixtures.py, the gguf
/// package's quantizers) against its F32 file: Q4_0 is further at every layer; both part at
/// `layers.0.attn.q`, the first step made with a quantized matrix, by the relative error that
/// make_fixtures.py computes by hand from the dequantized W_Q; nothing before it differs.
#[test]
fn q4_0_diverges_more_than_q8_0_and_first_where_the_hand_computation_says() {
    let hand = fixture("quant.json");
    let prompt = hand["prompt"].as_str().unwrap();
    let f32_file = path("fixtures/gguf/tiny-llama-f32.gguf");
    let run = |q: &str| compare(prompt, &path(&format!("fixtures/compare/tiny-llama-{q}.gguf")), &f32_file, &[]);
    let ((c8, q8, _), (c4, q4, _)) = (run("q8_0"), run("q4_0"));
    assert_eq!((c8, c4), (1, 1));
    assert_eq!(q8["token_ids"], hand["input_ids"]);
    let (l8, l4) = (q8["layers"].as_array().unwrap(), q4["layers"].as_array().unwrap());
    assert_eq!(l8.len(), 3, "the embeddings and two layers");
    for (x, y) in l8.iter().zip(l4) {
        let (r8, r4) = (num(&x["relative_error"]), num(&y["relative_error"]));
        match x["layer"].as_u64() {
            // The token table is F32 in both.
            None => assert_eq!((r8, r4), (0.0, 0.0)),
            Some(l) => assert!(r4 > r8 && r8 > 0.0, "layer {l}: Q4_0 {r4} is not further than Q8_0 {r8}"),
        }
    }
    for (q, rep) in [("q8_0", &q8), ("q4_0", &q4)] {
        let first = &rep["first_divergence"];
        assert_eq!(first["id"], hand["first_divergence"], "{q}");
        let (r, want) = (num(&first["relative_error"]), hand["relative_error"][q].as_f64().unwrap());
        assert!(near(r, want, 1e-4), "{q}: layers.0.attn.q relative error {r}, by hand {want}");
        for s in rep["steps"].as_array().unwrap() {
            let before = ["token_ids", "embed.token", "embed.sum", "embed.out", "layers.0.norm1.out"];
            if before.contains(&s["id"].as_str().unwrap()) {
                assert_eq!(num(&s["relative_error"]), 0.0, "{q}: {}", s["id"]);
            }
        }
    }
}

/// A fine-tune simulated by changing layer 1 head 2's query rows (fixtures/compare/
/// llama-gqa-tuned, make_fixtures.py): that head ranks first by JS divergence and is the only
/// head whose attention changed; no step before layer 1 differs, and the first divergence is
/// the changed projection's output.
#[test]
fn a_changed_head_ranks_first_and_nothing_before_its_layer_diverges() {
    let tuned = fixture("tuned.json");
    let (code, rep, err) = compare(
        "Hello world, the cat",
        &path("fixtures/compare/llama-gqa-tuned"),
        &path("fixtures/decoders/llama-gqa"),
        &[],
    );
    assert_eq!(code, 1, "{err}");
    let heads = rep["heads"].as_array().unwrap();
    assert_eq!((&heads[0]["layer"], &heads[0]["head"]), (&tuned["layer"], &tuned["head"]));
    assert!(num(&heads[0]["js_mean"]) > 1e-3);
    assert!(heads[1..].iter().all(|h| num(&h["js_mean"]) == 0.0 && num(&h["js_max"]) == 0.0), "{heads:?}");
    let layer = tuned["layer"].as_u64().unwrap();
    for s in rep["steps"].as_array().unwrap() {
        let before = s["layer"].as_u64().is_some_and(|l| l < layer) || s["id"].as_str().unwrap().starts_with("embed");
        if before {
            assert_eq!(num(&s["relative_error"]), 0.0, "{} diverges before layer {layer}", s["id"]);
        }
    }
    assert_eq!(rep["first_divergence"]["id"], format!("layers.{layer}.attn.q"));
    for l in rep["layers"].as_array().unwrap() {
        let zero = l["layer"].as_u64().is_none_or(|l| l < layer);
        assert_eq!(num(&l["relative_error"]) == 0.0, zero, "{l}");
    }
}

/// A GGUF and the Hugging Face checkpoint it came from agree within the default threshold
/// (the Q/K rows are un-permuted); a toy model against its own weights file agrees exactly,
/// against another seed's it does not; two quantizations of one model compare directly.
#[test]
fn the_pairs_that_must_work() {
    let (code, rep, err) =
        compare("Hello world", &path("fixtures/gguf/tiny-llama-f32.gguf"), &path("fixtures/decoders/llama-gqa"), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(rep["within_threshold"], true);
    assert!(rep["compared"].as_u64().unwrap() > 40 && rep["only_in_a"] == serde_json::json!([]));
    let dir = tempfile::tempdir().unwrap();
    let save = |seed: &str, name: &str| {
        let p = dir.path().join(name);
        let out = cmd()
            .args(["my shoes are small", "--heads", "2", "--seed", seed, "--save-weights"])
            .arg(&p)
            .output()
            .unwrap();
        assert!(out.status.success());
        p.to_str().unwrap().to_string()
    };
    let (same, other) = (save("123", "same.safetensors"), save("7", "other.safetensors"));
    let (code, rep, err) = compare("my shoes are small", "toy", &same, &["--heads", "2"]);
    assert_eq!(code, 0, "{err}");
    assert!(rep["steps"].as_array().unwrap().iter().all(|s| num(&s["relative_error"]) == 0.0));
    assert_eq!(rep["a"]["family"], "toy");
    let (code, rep, _) = compare("my shoes are small", "toy", &other, &["--heads", "2"]);
    assert_eq!(code, 1);
    assert_eq!(rep["first_divergence"]["id"], "embed.token");
    let (code, rep, err) = compare(
        "Hello world",
        &path("fixtures/compare/tiny-llama-q4_0.gguf"),
        &path("fixtures/compare/tiny-llama-q8_0.gguf"),
        &[],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(rep["first_divergence"]["id"], "layers.0.attn.q");
}

/// A step one side has and the other lacks is listed, and the rest is compared.
#[test]
fn a_step_only_one_side_has_is_listed() {
    let dir = tempfile::tempdir().unwrap();
    let save = |extra: &[&str], name: &str| {
        let p = dir.path().join(name);
        let args = ["my shoes are small", "--rms-norm", "--norm", "pre"];
        let out = cmd().args(args).args(extra).arg("--save-weights").arg(&p).output().unwrap();
        assert!(out.status.success());
        p.to_str().unwrap().to_string()
    };
    let (plain, with_norm) = (save(&[], "plain.safetensors"), save(&["--final-norm"], "norm.safetensors"));
    let (code, rep, _) = compare("my shoes are small", &plain, &with_norm, &[]);
    assert_eq!(code, 1, "output differs: B's is after its final norm");
    assert_eq!(rep["only_in_b"], serde_json::json!(["final_norm.out"]));
    assert_eq!(rep["first_divergence"]["id"], "output");
    let out = cmd().args(["compare", "my shoes are small", "--model", &plain, "--model", &with_norm]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("only in B (1), not compared: final_norm.out"), "{text}");
}

/// What cannot be compared is refused: one line on stderr, exit 2, nothing on stdout, no file
/// written.
#[test]
fn refusals_are_one_line_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let w6 = dir.path().join("w6.safetensors");
    let out = cmd().args(["my shoes are small and red", "--save-weights"]).arg(&w6).output().unwrap();
    assert!(out.status.success());
    let (llama, spm) = (path("fixtures/decoders/llama-gqa"), path("fixtures/gguf/tiny-llama-spm.gguf"));
    let w6 = w6.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![llama.clone(), path("fixtures/decoders/qwen2")], "is qwen2 with 2 layers"),
        (vec!["toy".into(), w6], "different vocabularies"),
        (
            vec![llama.clone(), spm.clone()],
            "the two tokenizers split the prompt differently (from position 1): A into 10 tokens [<s> (1), H (42)",
        ),
        (vec![llama.clone(), path("fixtures/decoders/llama-tied")], "different shapes"),
        (vec![llama.clone()], "it takes two models"),
        (vec![llama.clone(), llama.clone(), llama.clone()], "3 were given"),
    ];
    let (html, svg) = (dir.path().join("c.html"), dir.path().join("c.svg"));
    for (models, fragment) in cases {
        let prompt = if models[0] == "toy" { "my shoes are small" } else { "Hello world" };
        let mut c = cmd();
        c.args(["compare", prompt]).args(models.iter().flat_map(|m| ["--model", m.as_str()]));
        let out = c.arg("--html").arg(&html).arg("--svg").arg(&svg).output().unwrap();
        refused_output(&out, &models, fragment);
        assert!(!html.exists() && !svg.exists(), "{models:?} left a file");
    }
    for flag in [&["--focus", "1"][..], &["--format", "jsonl"], &["--patch", "x"], &["--steps", "q"]] {
        refused(&[&["compare", "my shoes", "--model", "toy", "--model", "toy"][..], flag].concat(), flag[0]);
    }
    // --ids-from gives both sides one tokenization.
    let (code, rep, err) = compare("Hello world", &llama, &spm, &["--ids-from", "a"]);
    assert_ne!(code, 2, "{err}");
    assert_eq!(rep["ids_from"], "a");
    assert_eq!(rep["token_ids"], serde_json::json!([1, 42, 71, 78, 78, 81, 304, 301, 78, 70]));
    assert!(err.contains("B: --ids-from: ran on A's token ids"), "{err}");
}

/// The text report, the heatmap, the SVG and the page: the same bytes on every run, the
/// grids drawn by the renderers that draw a patching sweep's.
#[test]
fn every_format_gives_the_same_bytes_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (path("fixtures/compare/llama-gqa-tuned"), path("fixtures/decoders/llama-gqa"));
    let run = |format: &str, i: usize| {
        let (html, svg) = (dir.path().join(format!("{format}{i}.html")), dir.path().join(format!("{format}{i}.svg")));
        let out = cmd()
            .args(["compare", "Hello world", "--model", &a, "--model", &b, "--format", format, "--color", "never"])
            .arg("--html")
            .arg(&html)
            .arg("--svg")
            .arg(&svg)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
        (out.stdout, std::fs::read(html).unwrap(), std::fs::read(svg).unwrap())
    };
    for format in ["table", "json", "heatmap"] {
        let first = run(format, 0);
        assert_eq!(first, run(format, 1), "{format}: the bytes differ between runs");
        let text = String::from_utf8(first.0).unwrap();
        match format {
            "table" => {
                assert!(text.contains("heads by Jensen–Shannon divergence") && text.contains("layer 1  "), "{text}")
            }
            "heatmap" => {
                assert!(text.contains("attention JS divergence, mean over queries (bits) · layers × heads"), "{text}")
            }
            _ => {}
        }
        let svg = String::from_utf8(first.2).unwrap();
        roxmltree::Document::parse(&svg).expect("the SVG is XML");
        assert_eq!(svg.matches("class=\"js-mean\"").count(), 8, "a cell per head");
        let html = String::from_utf8(first.1).unwrap();
        assert!(html.contains("<table class=\"patch\">") && html.contains("layers.1.attn.q"), "the page");
    }
}

/// SmolLM2's Q4_1 file against its F32 twin (tests/fetch-smollm2-f32.sh: every tensor
/// dequantized by the gguf package): attn-trace computes in f32 on the dequantized values,
/// so the two are one model and every step agrees exactly, through 30 layers and the head.
#[test]
fn smollm2_against_its_f32_twin() {
    let q = crate::gguf::smollm2();
    let twin = Path::new(&q).with_file_name("SmolLM2-135M-Instruct.F32.gguf");
    assert!(twin.is_file(), "the twin is missing at {}: run tests/fetch-smollm2-f32.sh", twin.display());
    let (code, rep, err) = compare("The capital of France is", &q, twin.to_str().unwrap(), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(rep["layers"].as_array().unwrap().len(), 31);
    assert_eq!(rep["heads"].as_array().unwrap().len(), 270);
    assert!(rep["steps"].as_array().unwrap().iter().all(|s| num(&s["relative_error"]) == 0.0));
    assert_eq!(rep["predictions"]["agree"], 5);
    assert_eq!(rep["predictions"]["rows"][4]["b"][0]["token"], "ĠParis");
    assert_eq!(rep["a"]["stored"], "gguf f32+q4_1+q8_0");
}
