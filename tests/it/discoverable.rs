//! The command line is discoverable (issue 47, items 5 and 10): the help lists what `--model`
//! accepts and every sub-command, `attn-trace help` works as in cargo and git, the help fits
//! 100 columns, and messages point the right way (a missing GGUF file is called one, a token
//! is spelled as the tables spell it).

use crate::common::*;

/// The command's output, asserting success.
fn stdout(args: &[&str]) -> String {
    let out = cmd().env_remove("COLUMNS").args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// White space folded to single spaces, so that wrapped help reads as one line.
fn folded(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `--model`'s entry of the main help: from its flag to the next flag's.
fn model_entry(help: &str) -> String {
    let help = folded(help);
    let from = help.find("--model <DIR>").expect("--model in the help");
    let rest = &help[from + 1..];
    rest[..rest.find("--truncate").expect("--truncate after --model")].to_string()
}

#[test]
fn model_help_lists_every_registered_model_type() {
    for flag in ["-h", "--help"] {
        let entry = model_entry(&stdout(&[flag]));
        let types = attn_trace::sources::family::model_types();
        assert!(types.len() >= 15, "{types:?}");
        for t in types.iter().chain(&attn_trace::sources::family::gguf_archs()) {
            let word = |w: &str| w.trim_matches(|c: char| c == ',' || c == '.') == *t;
            assert!(entry.split(' ').any(word), "{flag}: {t} is not in --model's help: {entry}");
        }
        for named in ["GGUF file", "ollama:NAME", "ORG/NAME"] {
            assert!(entry.contains(named), "{flag}: {named} is not in --model's help: {entry}");
        }
    }
}

#[test]
fn a_missing_model_gets_the_message_of_what_was_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.gguf");
    let line = refused(&["Hi", "--model", missing.to_str().unwrap()], "no such GGUF file");
    assert!(!line.contains("folder"), "{line}");
    // Relative and with a folder part (which looks like a Hugging Face id).
    let line = refused(&["Hi", "--model", "models/missing.GGUF"], "--model models/missing.GGUF: no such GGUF file");
    assert!(!line.contains("Hugging Face"), "{line}");
    refused(&["Hi", "--model", "./nope"], "--model ./nope: no such folder");
    // A file that is neither a folder nor a GGUF file.
    refused(&["Hi", "--model", "Cargo.toml"], "--model Cargo.toml: a file, and --model reads a folder");
    // ollama:NAME: Ollama's store is named, not a folder.
    let out = cmd().env("OLLAMA_MODELS", dir.path()).args(["Hi", "--model", "ollama:nosuchmodel"]).output().unwrap();
    let line = refused_output(&out, "ollama:nosuchmodel", "no Ollama manifest");
    assert!(!line.contains("folder"), "{line}");
}

#[test]
fn induction_needs_no_sentence() {
    let m = root().join("fixtures/decoders/llama-gqa");
    let out = cmd()
        .args(["--model", m.to_str().unwrap(), "--stats", "--induction", "5", "--steps", "tokens", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids = doc["input"]["token_ids"].as_array().unwrap();
    assert_eq!(ids.len(), 1 + 2 * 5, "BOS and two repeats: {ids:?}");
    assert_eq!(ids[1..6], ids[6..]);
    assert!(doc["stats"].as_array().unwrap().iter().all(|s| s["induction"].is_number()));
    // The same tokens as with a sentence, which --induction does not use.
    let with =
        trace_json(&["ignored", "--model", m.to_str().unwrap(), "--stats", "--induction", "5", "--steps", "tokens"]);
    assert_eq!(with["input"]["token_ids"], doc["input"]["token_ids"]);
    // A tokenizer that adds no BOS (GPT-2): the random tokens alone.
    let gpt2 = root().join("fixtures/decoders/gpt2");
    let doc = trace_json(&["--model", gpt2.to_str().unwrap(), "--stats", "--induction", "3", "--steps", "tokens"]);
    assert_eq!(doc["input"]["token_ids"].as_array().unwrap().len(), 6, "{}", doc["input"]);
    // Without --induction a language model still needs its sentence.
    refused(&["--model", m.to_str().unwrap(), "--stats"], "sentence: none was given");
}

#[test]
fn messages_spell_tokens_as_the_tables_do() {
    let gpt2 = "fixtures/decoders/gpt2";
    let line =
        refused(&["The capital is", "--model", gpt2, "--attribute", " capital of"], "is 2 tokens (·capital ·of)");
    assert!(!line.contains('Ġ'), "{line}");
    let line = refused(&["The capital is", "--model", gpt2, "--patch", "capital", "--metric", " the", " a"], "");
    assert!(line.contains("\"·capital\"") && !line.contains('Ġ'), "{line}");
    let line =
        refused(&["The capital is", "--model", gpt2, "--patch", "The city is", "--metric", " capital of", " a"], "");
    assert!(line.contains("(·capital ·of)") && !line.contains('Ġ'), "{line}");
    // The tables label the same token the same way.
    let table = stdout(&["The capital is", "--model", gpt2, "--steps", "tokens", "--width", "100"]);
    assert!(table.contains("·capital"), "{table}");
}

#[test]
fn sub_commands_are_in_the_help_the_man_page_and_the_completions() {
    const SUBS: [&str; 4] = ["compare", "diff", "schema", "serve"];
    for flag in ["-h", "--help"] {
        let help = stdout(&[flag]);
        let commands = &help[help.find("Commands:").unwrap_or_else(|| panic!("{flag}: no Commands:\n{help}"))..];
        for sub in SUBS.iter().chain(&["help"]) {
            assert!(commands.lines().any(|l| l.trim_start().starts_with(sub)), "{flag}: {sub} not listed:\n{commands}");
        }
        // Still the main command's flags and usage.
        assert!(help.contains("--heads") && help.contains("Usage: attn-trace [OPTIONS] [SENTENCE]"), "{help}");
    }
    let man = stdout(&["--man"]);
    for sub in SUBS {
        // Named in the SUBCOMMANDS section, and its own page follows in the same file.
        assert!(man.contains(&format!("attn\\-trace\\-{sub}(1)")), "{sub}: {man}");
        assert!(man.contains(&format!(".TH attn-trace-{sub} 1")), "{sub}: {man}");
    }
    assert!(man.contains("\\-\\-atol") && man.contains("\\-\\-allow\\-remote"), "{man}");
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout(&["--completions", shell]);
        for sub in SUBS {
            assert!(script.contains(sub), "{shell}: {sub}");
        }
        // The sub-commands' own flags complete too.
        assert!(script.contains("atol") && script.contains("threshold") && script.contains("allow-remote"), "{shell}");
    }
}

#[test]
fn help_and_help_subcommand_work_as_in_cargo_and_git() {
    let main = stdout(&["--help"]);
    assert_eq!(stdout(&["help"]), main);
    for (sub, flag) in [
        ("diff", "--atol"),
        ("compare", "--threshold"),
        ("schema", "Usage: attn-trace schema"),
        ("serve", "--allow-remote"),
    ] {
        let via_help = stdout(&["help", sub]);
        assert!(via_help.contains(flag), "help {sub}: {via_help}");
        assert_eq!(via_help, stdout(&[sub, "--help"]), "help {sub} and {sub} --help differ");
        assert!(via_help.contains(&format!("Usage: attn-trace {sub}")), "{via_help}");
    }
    let line = refused(&["help", "nosuch"], "nosuch");
    assert!(line.contains("attn-trace help"), "{line}");
    // A sentence that is the word "help" is still traced after `--`.
    let doc: serde_json::Value =
        serde_json::from_str(&stdout(&["--steps", "tokens", "--format", "json", "--", "help"])).unwrap();
    assert_eq!(doc["input"]["tokens"], serde_json::json!(["help"]));
}

#[test]
fn help_fits_100_columns_when_piped() {
    let helps = [
        &["-h"][..],
        &["--help"],
        &["help"],
        &["diff", "--help"],
        &["diff", "-h"],
        &["compare", "--help"],
        &["compare", "-h"],
        &["schema", "--help"],
        &["serve", "--help"],
    ];
    for args in helps {
        let help = stdout(args);
        let long: Vec<&str> = help.lines().filter(|l| l.chars().count() > 100).collect();
        assert!(long.is_empty(), "{args:?}: {} lines past 100 columns: {long:#?}", long.len());
        assert!(help.lines().count() > 5, "{args:?}");
    }
    // Deterministic: a COLUMNS setting does not change piped help.
    let narrow = cmd().env("COLUMNS", "40").arg("--help").output().unwrap().stdout;
    assert_eq!(String::from_utf8(narrow).unwrap(), stdout(&["--help"]));
}

#[test]
fn defaults_are_written_one_way() {
    for args in [&["--help"][..], &["compare", "--help"], &["diff", "--help"], &["serve", "--help"]] {
        let help = folded(&stdout(args));
        for other in ["(default ", "(default:", "Default:", "default is", "[default ", "(defaults "] {
            assert!(!help.contains(other), "{args:?}: a default written as {other:?}: {help}");
        }
        assert!(help.contains("[default: "), "{args:?}");
    }
    let help = folded(&stdout(&["--help"]));
    // clap's own defaults and the written ones read the same: `[default: X]` after the text.
    assert!(help.contains("[default: 5]") && help.contains("[default: 1]"), "{help}");
}

#[test]
fn layers_are_layers() {
    let help = folded(&stdout(&["--help"]));
    assert!(!help.contains("Encoder layers"), "{help}");
    let at = help.find("--layers <N>").unwrap();
    assert!(help[at..].starts_with("--layers <N> Layers"), "{}", &help[at..at + 60]);
}
