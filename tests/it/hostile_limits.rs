//! Hostile input, round three (issue 27), classes 5 and 6: numbers the docs define where the
//! arithmetic is 0/0 (a query whose every key is knocked out, a patching sweep whose runs do
//! not differ on the metric), said in a note on stderr and in JSON's `notes`; and limits that
//! hold for a whole run (a batch under `--max-memory` as a whole, `--pad-to` refused before
//! anything sized by it exists, and a batch that opens nothing per sentence).

use crate::common::{cmd, flat, refused_output, root};
use serde_json::Value;
use std::process::Output;

/// Runs attn-trace with `args`.
fn run(args: &[&str]) -> Output {
    cmd().args(args).output().unwrap()
}

/// A refusal ([`refused_output`]) naming `fragment`, with no panic.
fn refused(out: &Output, fragment: &str) {
    let err = refused_output(out, format!("the run refused with {fragment:?}"), fragment);
    assert!(!err.contains("panicked"), "{err}");
}

/// A JSON run that succeeds: the document and stderr.
fn json(args: &[&str]) -> (Value, String) {
    let out = cmd().args(args).args(["--format", "json"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{args:?}: {err}");
    (serde_json::from_slice(&out.stdout).unwrap(), err)
}

/// A step's values, flat.
fn values(doc: &Value, id: &str) -> Vec<f64> {
    let step = doc["steps"].as_array().unwrap().iter().find(|s| s["id"] == id);
    flat(&step.unwrap_or_else(|| panic!("no step {id}"))["values"])
}

fn notes(doc: &Value) -> Vec<String> {
    doc["notes"].as_array().map_or(Vec::new(), |a| a.iter().map(|n| n.as_str().unwrap().to_string()).collect())
}

/// A knockout case: its arguments, the blind rows as (head, query), the heads and tokens (0:
/// read from the document).
type Case<'a> = (Vec<&'a str>, Vec<(usize, usize)>, usize, usize);

#[test]
fn a_query_whose_every_key_is_knocked_out_has_weights_and_context_zero() {
    let gpt2 = root().join("fixtures/decoders/gpt2");
    let gpt2 = gpt2.to_str().unwrap();
    let steps = ["--steps", "weights,context,output"];
    let cases: Vec<Case> = vec![
        // Causal: query 0 sees only key 0.
        (vec!["my shoes are small", "--causal", "--knockout", "0:0->0"], vec![(0, 0)], 1, 4),
        // Bidirectional: every key of query 1 knocked out, one flag each (one twice).
        (
            vec![
                "a b c",
                "--knockout",
                "0:1->0",
                "--knockout",
                "0:1->1",
                "--knockout",
                "0:1->2",
                "--knockout",
                "0:1->2",
            ],
            vec![(0, 1)],
            1,
            3,
        ),
        // A real decoder, one head of several: the others' row 0 is still 1 (0: from the document).
        (vec!["my shoes are small", "--model", gpt2, "--knockout", "0.1:0->0"], vec![(1, 0)], 0, 0),
    ];
    for (args, blind, heads, n) in cases {
        let all: Vec<&str> = args.iter().copied().chain(steps).collect();
        let (doc, err) = json(&all);
        let w = values(&doc, "layers.0.attn.weights");
        let n = if n == 0 { doc["input"]["tokens"].as_array().unwrap().len() } else { n };
        let heads = if heads == 0 { doc["config"]["heads"].as_u64().unwrap() as usize } else { heads };
        assert_eq!(w.len(), heads * n * n, "{args:?}");
        assert!(w.iter().all(|x| x.is_finite()), "{args:?}: NaN in the weights {w:?}");
        for h in 0..heads {
            for q in 0..n {
                let sum: f64 = w[(h * n + q) * n..(h * n + q + 1) * n].iter().sum();
                let want = if blind.contains(&(h, q)) { 0.0 } else { 1.0 };
                assert!((sum - want).abs() < 1e-5, "{args:?}: head {h} query {q} sums to {sum}");
            }
        }
        let c = values(&doc, "layers.0.attn.context");
        assert!(c.iter().all(|x| x.is_finite()), "{args:?}: NaN in the context");
        let d_v = c.len() / (heads * n);
        for &(h, q) in &blind {
            assert!(c[(h * n + q) * d_v..(h * n + q + 1) * d_v].iter().all(|&x| x == 0.0), "{args:?}: context");
        }
        // Every later step is finite too (a NaN would reach every token through the values).
        let out = values(&doc, "output");
        assert!(out.iter().all(|x| x.is_finite()), "{args:?}: NaN in the output");
        let note = notes(&doc);
        assert!(note.iter().any(|n| n.contains("--knockout hides every key") && n.contains("0/0")), "{note:?}");
        assert!(err.contains("note: --knockout hides every key"), "{err}");
    }
    // A knockout that leaves a key: renormalised, no note; --quiet keeps the JSON note only.
    let (doc, err) = json(&["my shoes are small", "--causal", "--knockout", "0:1->0", "--steps", "weights"]);
    let w = values(&doc, "layers.0.attn.weights");
    assert_eq!((w[4], w[5]), (0.0, 1.0), "{w:?}");
    assert!(notes(&doc).is_empty() && err.is_empty(), "{err}");
    let (doc, err) = json(&["my shoes are small", "--causal", "--knockout", "0:0->0", "--quiet"]);
    assert!(err.is_empty() && notes(&doc).len() == 1, "{err}");
    // The --focus walkthrough of a blind query: exps 0, no NaN, in JSON and in the table.
    let (doc, _) = json(&["my shoes are small", "--causal", "--knockout", "0:0->0", "--focus", "0"]);
    assert!(!doc["focus"].to_string().contains("nan"), "{}", doc["focus"]);
    let out = run(&["my shoes are small", "--causal", "--knockout", "0:0->0", "--focus", "0", "--explain"]);
    assert!(out.status.success() && !String::from_utf8_lossy(&out.stdout).contains("nan"));
}

#[test]
fn a_patching_sweep_whose_runs_do_not_differ_has_undefined_effects() {
    let (bert, gpt2) = (root().join("fixtures/tiny-bert"), root().join("fixtures/decoders/gpt2"));
    let (bert, gpt2) = (bert.to_str().unwrap(), gpt2.to_str().unwrap());
    let s = "my shoes are small, my feet are";
    for args in [
        // The output distance of a sentence from itself.
        vec!["my shoes are small.", "--model", bert, "--patch", "my shoes are small."],
        vec!["my shoes are small.", "--model", bert, "--patch", "my shoes are small.", "--patch-what", "resid"],
        // The same sentence twice, and a logit difference of a token with itself.
        vec![s, "--model", gpt2, "--patch", s, "--metric", " big", " small"],
        vec![s, "--model", gpt2, "--patch", "my shoes are big, my feet are", "--metric", " big", " big"],
    ] {
        let (doc, err) = json(&args);
        let p = &doc["patching"];
        assert_eq!(p["clean_metric"], p["corrupted_metric"], "{args:?}");
        let rows = p["rows"].as_array().unwrap();
        assert!(!rows.is_empty() && rows.iter().all(|r| r["effect"].is_null()), "{args:?}: {rows:?}");
        assert!(rows.iter().all(|r| r["metric"].is_number()), "{args:?}: each run's metric is kept");
        assert!(notes(&doc).iter().any(|n| n.contains("same metric") && n.contains("0/0")), "{args:?}");
        assert!(err.contains("note: --patch: the clean and corrupted runs give the same metric"), "{err}");
        // The table says it too: a dash, never 0.0000.
        let out = run(&args);
        let text = String::from_utf8_lossy(&out.stdout);
        let table = &text[text.find("patching effect").expect("no patching table")..];
        assert!(table.contains('—') && !table.contains("0.0000"), "{args:?}: {table}");
    }
    // Runs that differ keep numbers and give no note.
    let (doc, _) =
        json(&[s, "--model", gpt2, "--patch", "my shoes are big, my feet are", "--metric", " big", " small"]);
    assert!(doc["patching"]["rows"].as_array().unwrap().iter().all(|r| r["effect"].is_number()));
    assert!(notes(&doc).is_empty(), "{:?}", notes(&doc));
}

#[test]
fn a_batch_is_held_to_the_memory_cap_as_a_whole() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("b.txt");
    let lines: Vec<String> = (1..=40).map(|i| format!("sentence number {i}")).collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let batch = ["--batch", file.to_str().unwrap()];
    let shape = ["--d-model", "64", "--heads", "4", "--max-len", "100", "--pad-to", "100", "--steps", "all"];
    let with = |cap: &str, format: &str| -> Output {
        let args: Vec<&str> =
            batch.iter().chain(&shape).copied().chain(["--max-memory", cap, "--format", format]).collect();
        run(&args)
    };
    // Each sentence fits 20 MiB alone; forty of them kept for the output do not.
    let one: Vec<&str> = ["sentence number 1"].iter().chain(&shape).copied().chain(["--max-memory", "20MiB"]).collect();
    assert!(run(&one).status.success());
    for format in ["json", "jsonl", "table"] {
        let out = with("20MiB", format);
        refused(&out, "of results the batch holds for the sentences before it");
        refused(&out, "above the cap of 20.0 MiB (split the batch into smaller files");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--batch"), "the sentence is named");
    }
    // With room for all, the batch runs.
    let out = with("2GiB", "json");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let docs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(docs.len(), 40);
}

#[test]
fn pad_to_is_refused_before_anything_sized_by_it_exists() {
    let gpt2 = root().join("fixtures/decoders/gpt2");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("b.txt");
    std::fs::write(&file, "my shoes\nmy feet\n").unwrap();
    for args in [
        vec!["my shoes", "--pad-to", "1000000000"],
        vec!["my shoes", "--pad-to", "1000000000", "--positions", "sinusoidal", "--max-memory", "1000TiB"],
        vec!["my shoes", "--pad-to", "18446744073709551615", "--positions", "rope"],
        vec!["my shoes", "--pad-to", "1000000000", "--model", gpt2.to_str().unwrap()],
        vec!["--batch", file.to_str().unwrap(), "--pad-to", "1000000000"],
        vec!["my shoes", "--pad-to", "100000", "--positions", "sinusoidal", "--max-memory", "100MiB"],
    ] {
        let out = run(&args);
        refused(&out, "--pad-to: ");
        refused(&out, "positions need at least");
    }
    // A size that fits is not refused by the lower bound.
    assert!(run(&["my shoes", "--pad-to", "64", "--positions", "sinusoidal"]).status.success());
    // The other size flags reach the estimate before anything they size, and the estimate
    // itself does not loop over 4·10⁹ layers (`--max-output none`: the output's size, checked
    // first, would refuse most of them already; hostile_memory.rs).
    for flag in ["--layers", "--d-model", "--d-ff", "--d-k", "--max-len"] {
        let args = ["my shoes", flag, "4000000000", "--max-output", "none"];
        refused(&run(&[&args[..], &["--max-memory", "2GiB"]].concat()), "above the cap of 2.0 GiB");
        // The default cap (auto: three quarters of what is available) refuses them too.
        refused(&run(&args), "sizes: this run needs about");
    }
}
