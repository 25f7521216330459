//! Batches (issue 17, item 6): several sentences, each traced on its own. Every item of a
//! batch must be exactly the single run of its sentence, in every format.

use crate::cli::assert_usage_error;
use crate::common::*;
use serde_json::Value;

const SENTENCES: [&str; 3] = ["my shoes are small", "my feet are big", "the cat sat on the mat"];

fn stdout<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(args: &[S]) -> Vec<u8> {
    let out = cmd().current_dir(root()).args(args).output().unwrap();
    assert!(out.status.success(), "attn-trace {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn batch_file(dir: &tempfile::TempDir, lines: &str) -> String {
    let p = dir.path().join("batch.txt");
    std::fs::write(&p, lines).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn each_item_is_the_single_run_of_its_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let file = batch_file(&dir, &format!("{}\n", SENTENCES.join("\n")));
    for model in [
        &["--heads", "2", "--causal", "--steps", "all"][..],
        &["--model", "fixtures/decoders/gpt2", "--steps", "all"][..],
        &["--model", "fixtures/tiny-bert", "--steps", "all"][..],
    ] {
        let with = |extra: &[&str]| -> Vec<String> { [extra, model].concat().into_iter().map(String::from).collect() };
        let singles: Vec<Vec<u8>> = SENTENCES.iter().map(|s| stdout(&with(&[s, "--format", "json"]))).collect();
        let json: Value = serde_json::from_slice(&stdout(&with(&["--batch", &file, "--format", "json"]))).unwrap();
        let items = json.as_array().expect("--format json of a batch is an array");
        assert_eq!(items.len(), 3);
        for (item, single) in items.iter().zip(&singles) {
            assert_eq!(item, &serde_json::from_slice::<Value>(single).unwrap(), "{model:?}");
            crate::export::assert_valid("a batch item", item);
        }
        let lines = stdout(&with(&["--batch", &file, "--format", "jsonl"]));
        let lines: Vec<&[u8]> = lines.strip_suffix(b"\n").unwrap().split(|b| *b == b'\n').collect();
        assert_eq!(lines.len(), 3, "one document per line");
        for (line, item) in lines.iter().zip(items) {
            assert_eq!(&serde_json::from_slice::<Value>(line).unwrap(), item);
        }
        let table = String::from_utf8(stdout(&with(&["--batch", &file]))).unwrap();
        for (i, s) in SENTENCES.iter().enumerate() {
            let single = String::from_utf8(stdout(&with(&[s]))).unwrap();
            let section = format!("== sentence {} of 3: {s} ==\n\n{single}", i + 1);
            assert!(table.contains(&section), "{model:?}: section {i} is not the single run's table");
        }
    }
}

#[test]
fn a_real_model_summary_is_the_single_runs() {
    // Without --steps a real model's table is a summary, reduced while the model runs.
    let dir = tempfile::tempdir().unwrap();
    let file = batch_file(&dir, &SENTENCES.join("\n"));
    for model in ["fixtures/tiny-bert", "fixtures/decoders/gpt2"] {
        let table = String::from_utf8(stdout(&["--batch", &file, "--model", model])).unwrap();
        for (i, s) in SENTENCES.iter().enumerate() {
            let single = String::from_utf8(stdout(&[s, "--model", model])).unwrap();
            assert!(single.contains("strongest links"), "{model}: a summary");
            assert!(table.contains(&format!("== sentence {} of 3: {s} ==\n\n{single}", i + 1)), "{model} {i}");
        }
    }
}

#[test]
fn positional_sentences_are_a_batch_except_a_bert_pair() {
    let dir = tempfile::tempdir().unwrap();
    let file = batch_file(&dir, &SENTENCES.join("\n"));
    // The toy model and decoders have no pairs: every positional sentence is traced.
    for model in [&[][..], &["--model", "fixtures/decoders/llama-gqa"][..]] {
        let positional = stdout(&[&SENTENCES[..], model, &["--format", "json"]].concat());
        assert_eq!(positional, stdout(&[&["--batch", file.as_str()], model, &["--format", "json"]].concat()));
    }
    // BERT keeps its pairs; a third sentence is an error that points to --batch.
    let pair: Value = serde_json::from_slice(&stdout(&[
        SENTENCES[0],
        SENTENCES[1],
        "--model",
        "fixtures/tiny-bert",
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(pair["input"]["sentence"], "my shoes are small ‖ my feet are big");
    let tiny = root().join("fixtures/tiny-bert");
    let tiny = tiny.to_str().unwrap();
    assert_usage_error(&[&SENTENCES[..], &["--model", tiny]].concat(), "a BERT model takes one sentence or a pair");
}

#[test]
fn bad_batches_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty_line = batch_file(&dir, "my shoes\n\nmy feet\n");
    assert_usage_error(&["--batch", &empty_line], "line 2 is empty");
    let blank = batch_file(&dir, "my shoes\n   \n");
    assert_usage_error(&["--batch", &blank], "line 2 is empty");
    let nothing = batch_file(&dir, "");
    assert_usage_error(&["--batch", &nothing], "holds no sentence");
    assert_usage_error(&["--batch", "/nonexistent/b.txt"], "--batch /nonexistent/b.txt");
    // An error in one sentence names it.
    let long = batch_file(&dir, "my shoes\none two three four five six seven eight nine ten eleven\n");
    assert_usage_error(&["--batch", &long], &format!("--batch {long} line 2: sentence: it has 11 tokens"));
    assert_usage_error(&["a b", "c d", "e f", "--max-len", "1"], "sentence 1: sentence: it has 2 tokens");
    let w = dir.path().join("w.safetensors");
    for flag in [vec!["--save-weights", w.to_str().unwrap()], vec!["--save-trace", "t.npz"]] {
        assert_usage_error(&[&["a b", "c d"], flag.as_slice()].concat(), "several sentences make a batch");
    }
    assert!(!w.exists(), "nothing is written");
}

#[test]
fn a_file_of_several_lines_is_one_sequence_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = batch_file(&dir, "my shoes are small\nmy feet are big\n");
    let out = cmd().args(["--file", &file, "--format", "json"]).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the input has 2 lines, traced as one sequence (--batch FILE traces each line)"), "{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input"]["tokens"].as_array().unwrap().len(), 8);
    let out = cmd().args(["--file", &file, "--quiet"]).output().unwrap();
    assert!(out.stderr.is_empty());
}
