//! Activation patching (`--patch`) against hand-written PyTorch hooks on transformers' own
//! modules (fixtures/oracle/patching, made by fixtures/oracle/patching_oracle.py): GPT-2 and a
//! Llama with grouped-query attention, BERT with the output-distance metric, a BertForMaskedLM
//! with the logit difference at its `[MASK]`, and MiniLM. Plus the refusals around it.

use crate::common::*;
use serde_json::Value;

/// Runs a command line and returns the JSON document's `patching` object (also for
/// attrpatch.rs and pathpatch.rs, as are the helpers below).
pub(crate) fn patching(args: &[&str]) -> Value {
    let out = cmd().current_dir(root()).args(args).args(["--steps", "tokens", "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["patching"].clone()
}

/// One cell of a sweep: its layer, what it patched (`unit`, "head" or "position") and which,
/// the metric and the effect.
#[derive(Debug)]
pub(crate) struct Row {
    pub layer: u64,
    pub unit: &'static str,
    pub index: u64,
    pub metric: f64,
    pub effect: f64,
}

/// The rows of a `patching` object or of an oracle fixture.
pub(crate) fn rows(p: &Value) -> Vec<Row> {
    let row = |r: &Value| {
        let unit = if r.get("head").is_some() { "head" } else { "position" };
        let (layer, index) = (r["layer"].as_u64().unwrap(), r[unit].as_u64().unwrap());
        Row { layer, unit, index, metric: r["metric"].as_f64().unwrap(), effect: r["effect"].as_f64().unwrap() }
    };
    p["rows"].as_array().unwrap().iter().map(row).collect()
}

/// Every oracle fixture of fixtures/oracle/`dir` (its `*.json` files, in directory order),
/// run: (file name, fixture, the `patching` object of the fixture's `args`).
pub(crate) fn oracle_cases(dir: &str) -> impl Iterator<Item = (String, Value, Value)> {
    let paths = std::fs::read_dir(root().join("fixtures/oracle").join(dir)).unwrap().map(|e| e.unwrap().path());
    paths.filter(|path| path.extension().is_some_and(|x| x == "json")).map(|path| {
        let case: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let args: Vec<&str> = case["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        let p = patching(&args);
        (name, case, p)
    })
}

/// Every oracle fixture's metrics and effects are compared to 1e-4 absolute (both sides
/// compute in float32; each test says what that means for its sweep).
const TOL: f64 = 1e-4;

/// A sweep `p` against its oracle fixture `case` (named `name` in messages): the same
/// corrupted tokens; the clean and corrupted metrics within [`TOL`]; as many rows, not none,
/// each of the same layer and head (or position) as the fixture's, its metric and effect
/// within [`TOL`]. Returns the largest difference of a row's metric or effect.
pub(crate) fn assert_sweep_matches(name: &str, p: &Value, case: &Value) -> f64 {
    assert_eq!(p["corrupted_tokens"], case["corrupted_tokens"], "{name}");
    for key in ["clean_metric", "corrupted_metric"] {
        let (x, y) = (p[key].as_f64().unwrap(), case[key].as_f64().unwrap());
        assert!((x - y).abs() <= TOL, "{name} {key}: {x} vs {y}");
    }
    let (ours, want) = (rows(p), rows(case));
    assert!(!want.is_empty(), "{name}: no rows");
    assert_eq!(ours.len(), want.len(), "{name}: row count");
    let mut worst = 0f64;
    for (a, b) in ours.iter().zip(&want) {
        assert_eq!((a.layer, a.unit, a.index), (b.layer, b.unit, b.index), "{name}");
        assert!((a.metric - b.metric).abs() <= TOL, "{name} {a:?}: metric vs {b:?}");
        assert!((a.effect - b.effect).abs() <= TOL, "{name} {a:?}: effect vs {b:?}");
        worst = worst.max((a.metric - b.metric).abs()).max((a.effect - b.effect).abs());
    }
    worst
}

#[test]
fn patching_matches_pytorch_hooks() {
    let (mut n, mut kinds) = (0, std::collections::BTreeSet::new());
    for (name, case, p) in oracle_cases("patching") {
        kinds.insert(p["metric"]["kind"].as_str().unwrap().to_string());
        // The difference of two logits (or a distance) to 1e-4 absolute.
        assert_sweep_matches(&name, &p, &case);
        n += 1;
    }
    assert!(n >= 9, "only {n} patching fixtures");
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), ["logit_diff", "output_distance"]);
}

#[test]
fn an_encoder_with_sentences_of_different_lengths_is_refused_with_both_tokenizations() {
    let err = refused(
        &["my shoes are small.", "--model", "fixtures/tiny-bert", "--patch", "my shoes are tiny, really."],
        "7 and 17 tokens: [\"[CLS]\" \"my\" \"shoes\" \"are\" \"small\" \".\" \"[SEP]\"] and [",
    );
    assert!(err.contains("\"##y\" \",\" \"r\""), "{err}");
}

#[test]
fn an_encoder_metric_needs_a_mask_and_a_masked_lm_head() {
    // tiny-bert has no masked-LM head; tiny-bert-mlm has one, but the sentence has no [MASK].
    for (model, clean, corrupted) in [
        ("fixtures/tiny-bert", "my shoes are small.", "my shoes are big."),
        ("fixtures/tiny-bert-mlm", "my shoes are small.", "my shoes are big."),
    ] {
        let out = cmd()
            .current_dir(root())
            .args([clean, "--model", model, "--patch", corrupted, "--metric", "small", "big"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.starts_with("attn-trace: --metric: an encoder's metric is the output's distance"), "{err}");
    }
    // A sentence pair has no corrupted counterpart (the corrupted input is one sentence).
    let out = cmd()
        .current_dir(root())
        .args(["my shoes", "are small", "--model", "fixtures/tiny-bert", "--patch", "my feet are big"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        out.stdout.is_empty() && err.starts_with("attn-trace: --patch: the corrupted input is one sentence"),
        "{err}"
    );
    // Without --metric the masked-LM checkpoint measures the output's distance: the clean
    // run is at distance 0 from itself.
    let p = patching(&["my [MASK] is small.", "--model", "fixtures/tiny-bert-mlm", "--patch", "my [MASK] is big."]);
    assert_eq!(p["metric"]["kind"], "output_distance");
    assert_eq!(p["clean_metric"].as_f64(), Some(0.0));
    assert!(p["corrupted_metric"].as_f64().unwrap() > 0.0);
}

#[test]
fn the_heatmap_html_and_svg_draw_the_sweep() {
    // The same sweep as JSON, as a terminal heatmap, and in the --html and --svg files: every
    // effect appears in each, rounded to --precision, in its layer's row.
    let tmp = tempfile::tempdir().unwrap();
    let (html, svg) = (tmp.path().join("p.html"), tmp.path().join("p.svg"));
    let base = [
        "my shoes are small, my feet are",
        "--model",
        "fixtures/decoders/llama-gqa",
        "--patch",
        "my shoes are big, my feet are",
        "--metric",
        " big",
        " small",
    ];
    let p = patching(&base);
    let effects: Vec<(u64, f64)> = p["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["layer"].as_u64().unwrap(), r["effect"].as_f64().unwrap()))
        .collect();
    assert_eq!(effects.len(), 8);
    let out = cmd()
        .current_dir(root())
        .args(base)
        .args(["--format", "heatmap", "--color", "never", "--precision", "3", "--width", "200"])
        .args(["--html", html.to_str().unwrap(), "--svg", svg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let at = text.find("patching effect · layers × heads").expect("no patching grid in the heatmap");
    let grid = &text[at..];
    for l in 0..2u64 {
        let line = grid.lines().find(|x| x.starts_with(&format!("layer {l} "))).unwrap();
        // "layer 1 ░░-0.246 ██ 1.747 …": the shade (without colour) sits before the value.
        let got: Vec<&str> = line
            .split_whitespace()
            .skip(2)
            .map(|w| w.trim_start_matches(['░', '▒', '▓', '█']))
            .filter(|w| !w.is_empty())
            .collect();
        let want: Vec<String> = effects.iter().filter(|e| e.0 == l).map(|e| format!("{:.3}", e.1)).collect();
        assert_eq!(got, want, "{line}");
    }
    let lo = effects.iter().map(|e| e.1).fold(0.0, f64::min);
    assert!(grid.contains(&format!("scale {lo:.3} ")), "{grid}");
    let html = std::fs::read_to_string(&html).unwrap();
    let section = &html[html.find("<section id=\"patching\">").expect("no patching section")..];
    let section = &section[..section.find("</section>").unwrap()];
    assert_eq!(section.matches("<td ").count(), 8);
    for (_, e) in &effects {
        assert!(section.contains(&format!(">{e:.3}</td>")), "{e}");
    }
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(svg.matches("<rect class=\"effect\"").count(), 8);
    for (l, e) in &effects {
        assert!(svg.contains(&format!("layer {l} · head")) && svg.contains(&format!("effect {e:.4}")), "{e}");
    }
}
