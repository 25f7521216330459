//! Hostile input, round four (issue 48), class 5: generation bounds. `--generate` with a
//! count no context window holds, zero, negative or not a number; sampling settings that are
//! NaN, infinite, negative, zero or absurd; a prompt that already fills the window; a model
//! without an end-of-sequence token; a batch; and the same options sent to `attn-trace
//! serve`. Each is a one-line refusal (exit 2, nothing on stdout, no file left behind) or the
//! documented behaviour (docs/OPTIONS.md, "Generation"), never a panic or a hang.

use crate::common::{cmd, refused_output, root};
use serde_json::Value;
use std::path::Path;

/// The toy decoder (10 positions) continuing `prompt`.
fn toy(prompt: &str) -> Vec<String> {
    [prompt, "--causal", "--lm-head", "own", "--steps", "none"].map(String::from).to_vec()
}

/// Runs `args` with an `--html` page in `dir`: refused in one line naming `fragment`, exit 2,
/// empty stdout, no panic, no page.
fn refused(dir: &Path, args: &[String], fragment: &str) -> String {
    let page = dir.join("page.html");
    let out = cmd().args(args).arg("--html").arg(&page).output().unwrap();
    let err = refused_output(&out, args, fragment);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!page.exists(), "{args:?}: a refused run left its page");
    err
}

/// Runs `args` as JSON: the document and stderr.
fn generated(args: &[String]) -> (Value, String) {
    let out = cmd().args(args).args(["--format", "json"]).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{args:?}: {err}");
    (serde_json::from_slice(&out.stdout).unwrap(), err)
}

fn with(base: Vec<String>, more: &[&str]) -> Vec<String> {
    base.into_iter().chain(more.iter().map(|s| s.to_string())).collect()
}

/// Counts no context window holds, and values that are not counts: one line each. The toy
/// model has 10 positions, and a 3-token prompt leaves room for 8 new tokens (the last one
/// chosen is never run).
#[test]
fn generation_counts_beyond_the_window_or_not_counts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let window = "more tokens than the model's whole context window holds (10 positions) (pass --generate 8 or \
                  fewer: the prompt takes 3 positions, and a generation stops at the window's end)";
    let cases: &[(&str, &str)] = &[
        ("1000000000000", window),
        ("18446744073709551615", window),
        ("11", window),
        ("18446744073709551616", "number too large to fit in target type"),
        ("99999999999999999999999", "number too large to fit in target type"),
        ("-1", "unexpected argument '-1'"),
        ("abc", "invalid digit found in string"),
        ("1e3", "invalid digit found in string"),
        ("5.0", "invalid digit found in string"),
        (" 5", "invalid digit found in string"),
        ("", "cannot parse integer from empty string"),
        ("0", "--generate: 0 tokens (pass the number of tokens to generate, e.g. --generate 20)"),
    ];
    for (n, fragment) in cases {
        let err = refused(dir.path(), &with(toy("my shoes are"), &["--generate", n]), fragment);
        if *fragment == window {
            assert_eq!(err, format!("attn-trace: --generate {n}: {window}\n"));
        }
    }
    // Pads would stand between the prompt and what it continues (was a shape error, exit 1).
    for side in ["left", "right"] {
        let args = with(toy("my shoes are"), &["--generate", "3", "--pad-to", "8", "--padding", side]);
        refused(dir.path(), &args, "--generate with --pad-to: a generation continues one prompt from its last token");
    }
    // A stop string is not an option: a generation stops at the end-of-sequence token, its
    // count or the window's end.
    refused(
        dir.path(),
        &with(toy("my shoes are"), &["--generate", "3", "--stop", "."]),
        "unexpected argument '--stop'",
    );
}

/// Up to the window's size, a count is taken and the generation stops at the window's end
/// with a note; a prompt that already fills the window writes its one token.
#[test]
fn a_generation_stops_at_the_windows_end_and_a_full_prompt_writes_one_token() {
    let (doc, err) = generated(&with(toy("my shoes are"), &["--generate", "10"]));
    assert_eq!(doc["generation"]["stop"], "positions");
    assert_eq!(doc["generation"]["tokens"].as_array().unwrap().len(), 8);
    assert!(err.contains("--generate stopped after 8 tokens: the next would stand past the model's last position (10)"));
    let (doc, err) = generated(&with(toy("a b c d e f g h i j"), &["--generate", "5"]));
    assert_eq!(doc["generation"]["tokens"].as_array().unwrap().len(), 1);
    assert_eq!(
        err,
        "attn-trace: note: --generate stopped after 1 token: the next would stand past the model's last position \
         (10)\n"
    );
}

/// Sampling settings out of range are refused by name; a vanishing temperature is the
/// limit T → 0 (the most probable token, as greedy), an enormous one draws every token alike,
/// a huge top-k keeps every token, the largest seed is a seed.
#[test]
fn sampling_settings_out_of_range_are_refused_and_extremes_are_their_limits() {
    let dir = tempfile::tempdir().unwrap();
    let sample =
        || with(toy("my shoes are small my feet are big"), &["--generate", "6", "--max-len", "20", "--sample"]);
    let positive = "is not a positive number (pass a temperature above 0";
    let cases: &[(&[&str], &str)] = &[
        (&["--temperature", "NaN"], "--temperature: NaN is not a positive number"),
        (&["--temperature", "nan"], positive),
        (&["--temperature", "inf"], "--temperature: inf is not a positive number"),
        (&["--temperature", "-1"], "--temperature: -1 is not a positive number"),
        (&["--temperature", "0"], "--temperature: 0 is not a positive number"),
        (&["--temperature", "-0"], positive),
        (&["--temperature", "-inf"], "unexpected argument '-i'"),
        (&["--temperature", ""], "cannot parse float from empty string"),
        (&["--temperature", "0x1"], "invalid float literal"),
        (&["--top-p", "NaN"], "--top-p: NaN is outside (0, 1]"),
        (&["--top-p", "0"], "--top-p: 0 is outside (0, 1]"),
        (&["--top-p", "-0.5"], "--top-p: -0.5 is outside (0, 1]"),
        (&["--top-p", "1.0000001"], "--top-p: 1.0000001 is outside (0, 1]"),
        (&["--top-p", "inf"], "--top-p: inf is outside (0, 1]"),
        (&["--sample-top-k", "0"], "--sample-top-k: 0 tokens"),
        (&["--sample-top-k", "-1"], "unexpected argument '-1'"),
        (&["--sample-seed", "-1"], "unexpected argument '-1'"),
        (&["--sample-seed", "18446744073709551616"], "number too large to fit in target type"),
    ];
    for (flags, fragment) in cases {
        refused(dir.path(), &with(sample(), flags), fragment);
    }
    // Without --sample the sampling flags are clap's usage error.
    refused(dir.path(), &with(toy("my shoes"), &["--generate", "2", "--temperature", "0.5"]), "--sample");
    let ids = |doc: &Value| -> Vec<u64> {
        doc["generation"]["tokens"].as_array().unwrap().iter().map(|t| t["id"].as_u64().unwrap()).collect()
    };
    let greedy = with(toy("my shoes are small my feet are big"), &["--generate", "6", "--max-len", "20"]);
    let (want, _) = generated(&greedy);
    for t in ["1e-30", "1e-300", "5e-324"] {
        let (doc, _) = generated(&with(sample(), &["--temperature", t]));
        assert_eq!(ids(&doc), ids(&want), "--temperature {t} is greedy");
    }
    for flags in [&["--temperature", "1e300"][..], &["--sample-top-k", "18446744073709551615"], &["--top-p", "1e-300"]]
    {
        let (doc, _) = generated(&with(sample(), flags));
        assert_eq!(ids(&doc).len(), 6, "{flags:?}");
    }
    let seed = with(sample(), &["--sample-seed", "18446744073709551615"]);
    assert_eq!(generated(&seed).0, generated(&seed).0, "the largest seed draws the same tokens every run");
}

/// A batch is refused naming the sentence whose prompt the count does not fit.
#[test]
fn a_batch_with_a_count_beyond_the_window_is_refused_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("prompts.txt");
    std::fs::write(&batch, "my shoes are\nmy feet are big\n").unwrap();
    let args: Vec<String> = ["--batch", batch.to_str().unwrap(), "--causal", "--lm-head", "own", "--generate"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let err = refused(dir.path(), &with(args.clone(), &["1000000000000"]), "more tokens than the model's whole");
    assert!(err.contains(&format!("--batch {} line 1: --generate 1000000000000", batch.display())), "{err}");
    let (doc, _) = generated(&with(args, &["9"]));
    let stops: Vec<&str> = doc.as_array().unwrap().iter().map(|d| d["generation"]["stop"].as_str().unwrap()).collect();
    assert_eq!(stops, ["positions", "positions"]);
}

/// The llama-gqa fixture copied into `dir` with config.json's `eos_token_id` set to `eos`
/// (absent for None) and no generation_config.json.
fn llama_with_eos(dir: &Path, eos: Option<Value>) -> String {
    let src = root().join("fixtures/decoders/llama-gqa");
    let dest = dir.join("llama");
    std::fs::create_dir(&dest).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap() != "generation_config.json" {
            std::fs::copy(&p, dest.join(p.file_name().unwrap())).unwrap();
        }
    }
    let path = dest.join("config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    match eos {
        Some(v) => config["eos_token_id"] = v,
        None => drop(config.as_object_mut().unwrap().remove("eos_token_id")),
    }
    std::fs::write(&path, config.to_string()).unwrap();
    dest.to_str().unwrap().to_string()
}

/// A model whose end-of-sequence token is missing, or outside its vocabulary, generates to
/// its count (or the window) and says why; --ignore-eos asked for that and is not told.
#[test]
fn a_model_without_an_end_of_sequence_token_runs_to_its_count_with_a_note() {
    for (eos, said) in [(None, "none"), (Some(serde_json::json!(100000)), "[100000], outside its 416 tokens")] {
        let dir = tempfile::tempdir().unwrap();
        let model = llama_with_eos(dir.path(), eos);
        let args: Vec<String> = ["The capital of France is", "--model", &model, "--generate", "5", "--steps", "none"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (doc, err) = generated(&args);
        assert_eq!(doc["generation"]["stop"], "length");
        let note = format!(
            "--generate ran to its 5 tokens: the model names no end-of-sequence token it can write (eos_token_id: \
             {said})"
        );
        assert_eq!(err, format!("attn-trace: note: {note}\n"));
        assert_eq!(doc["notes"], serde_json::json!([note]));
        let (_, err) = generated(&with(args, &["--ignore-eos"]));
        assert_eq!(err, "", "--ignore-eos is not told");
    }
}

/// The same options sent to `attn-trace serve` get the command line's line, and the server
/// keeps answering.
#[test]
fn a_servers_generation_refusals_are_the_command_lines() {
    use crate::serve::{error_of, model, Server};
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[], dir.path());
    let cases: &[&[&str]] = &[
        &["The capital", "--generate", "100"],
        &["The capital", "--generate", "3", "--sample", "--temperature", "NaN"],
        &["The capital", "--generate", "3", "--sample", "--temperature", "0"],
        &["The capital", "--generate", "3", "--sample", "--top-p", "0"],
        &["The capital", "--generate", "3", "--sample", "--sample-top-k", "0"],
        &["The capital", "--generate", "3", "--sample", "--sample-seed", "-1"],
        &["The capital", "--generate", "x"],
    ];
    for args in cases {
        let (status, body) = server.trace(args);
        assert_eq!(status, 400, "{args:?}");
        let cli = cmd().args(*args).args(["--model", &model(), "--format", "json"]).output().unwrap();
        let line = refused_output(&cli, args, "");
        assert_eq!(format!("attn-trace: {}\n", error_of(&body)), line, "{args:?}");
    }
    let (status, _) = server.trace(&["The capital", "--generate", "3", "--sample", "--temperature", "1e-300"]);
    assert_eq!(status, 200, "a vanishing temperature is greedy, not an error");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a request wrote a file");
    assert!(server.stop().success());
}
