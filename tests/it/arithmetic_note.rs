//! Issue 47, item 7: a GGUF traced with the f32 arithmetic says when llama.cpp's arithmetic
//! (`--arithmetic ggml`, bit for bit llama.cpp's: tests/it/ggml.rs) picks another token.

use crate::common::*;
use serde_json::Value;

const SMOLLM2: &str = ".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
const CHAT: &str = "What is the capital of France?";

fn stderr_of(args: &[&str]) -> String {
    let out = cmd().current_dir(root()).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stderr).unwrap()
}

/// SmolLM2's chat answer: f32 writes "The capital…", llama.cpp "L'Étoile…" (the case the
/// issue reported from Ollama); the note names the first token where they part.
#[test]
fn a_generation_that_llama_cpp_would_write_otherwise_is_named() {
    let f32 = stderr_of(&[CHAT, "--model", SMOLLM2, "--chat", "--generate", "2", "--steps", "none"]);
    let ggml: Value = serde_json::from_slice(
        &cmd()
            .current_dir(root())
            .args([CHAT, "--model", SMOLLM2, "--chat", "--generate", "1", "--arithmetic", "ggml", "--format", "json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let label = ggml["generation"]["tokens"][0]["token"].as_str().unwrap().replace(' ', "·");
    let note = f32.lines().find(|l| l.contains("llama.cpp's arithmetic")).unwrap_or_else(|| panic!("{f32}"));
    assert!(note.contains(&format!("would have written {label} as generated token 0")), "{note} ({label})");
    assert!(note.contains("add --arithmetic ggml"), "{note}");
    assert_eq!(f32.lines().filter(|l| l.contains("llama.cpp's arithmetic")).count(), 1, "one line: {f32}");
}

#[test]
fn no_note_where_they_agree_or_nobody_reads_a_table() {
    let agree = stderr_of(&["The capital of France is", "--model", SMOLLM2, "--steps", "none"]);
    assert!(!agree.contains("llama.cpp's arithmetic"), "{agree}");
    // (Under --arithmetic ggml itself there is nothing to compare: the note is for f32 runs.)
    for extra in [&["--format", "json"][..], &["--quiet"]] {
        let args = [&[CHAT, "--model", SMOLLM2, "--chat", "--generate", "2", "--steps", "none"][..], extra].concat();
        let err = stderr_of(&args);
        assert!(!err.contains("llama.cpp's arithmetic"), "{extra:?}: {err}");
    }
}

/// The note's second pass reads the sentence the first one read: standard input cannot be
/// read twice (it used to fail after the whole trace with "sentence: none was given").
#[test]
fn a_sentence_from_standard_input_gets_the_same_note() {
    let args = ["--model", SMOLLM2, "--chat", "--generate", "2", "--steps", "none"];
    let from_arg = stderr_of(&[&[CHAT][..], &args].concat());
    let out = cmd().current_dir(root()).args([&["-"][..], &args].concat()).write_stdin(CHAT).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let note = |s: &str| s.lines().find(|l| l.contains("llama.cpp's arithmetic")).map(str::to_string);
    assert_eq!(note(&String::from_utf8_lossy(&out.stderr)), note(&from_arg));
    assert!(note(&from_arg).is_some(), "{from_arg}");
}
