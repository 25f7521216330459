//! What `--save-trace` writes never depends on what is printed (issue 47, item 2): `--steps`,
//! `--layer` and `--head` choose the screen, `--save-steps` the file.

use crate::common::*;
use std::collections::BTreeMap;

const SMOLLM2: &str = ".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// The tensors of a safetensors file: name → (shape, the bytes' length).
fn tensors(path: &std::path::Path) -> BTreeMap<String, Vec<usize>> {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    header
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .map(|(k, v)| (k.clone(), serde_json::from_value(v["shape"].clone()).unwrap()))
        .collect()
}

fn save(dir: &std::path::Path, name: &str, args: &[&str]) -> (std::path::PathBuf, Vec<u8>) {
    let path = dir.join(name);
    let out = cmd().current_dir(root()).args(args).arg("--save-trace").arg(&path).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    (path, out.stdout)
}

#[test]
fn the_file_holds_every_step_whatever_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    for model in [&["--heads", "2"][..], &["--model", SMOLLM2][..]] {
        let base = [&["The capital of France is"][..], model].concat();
        let (all, _) = save(dir.path(), "all.safetensors", &base);
        let (short, printed) = save(dir.path(), "short.safetensors", &[&base[..], &["--steps", "tokens"]].concat());
        let (narrow, _) = save(
            dir.path(),
            "narrow.safetensors",
            &[&base[..], &["--steps", "weights", "--layer", "0", "--head", "0"]].concat(),
        );
        let everything = tensors(&all);
        assert!(everything.len() > 20, "{model:?}: {}", everything.len());
        assert!(everything.contains_key("layers.0.attn.q") && everything.contains_key("layers.0.attn.weights"));
        // The same file, byte for byte, whatever the screen showed.
        assert_eq!(std::fs::read(&short).unwrap(), std::fs::read(&all).unwrap(), "{model:?}: --steps tokens");
        assert_eq!(std::fs::read(&narrow).unwrap(), std::fs::read(&all).unwrap(), "{model:?}: --layer/--head");
        // …while the screen shows only what --steps asked.
        let text = String::from_utf8(printed).unwrap();
        assert!(!text.contains("attn.q"), "{model:?}: {text}");
    }
}

#[test]
fn save_steps_narrows_the_file_and_not_the_screen() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["my shoes are small", "--heads", "2", "--layers", "2", "--steps", "tokens", "--save-steps", "weights"];
    let (path, _) = save(dir.path(), "w.safetensors", &args);
    let got = tensors(&path);
    let names: Vec<&str> = got.keys().map(String::as_str).collect();
    assert_eq!(names, ["layers.0.attn.weights", "layers.1.attn.weights"]);
    assert_eq!(got["layers.0.attn.weights"], vec![2, 4, 4], "every head, whatever --head says");
    // JSON Lines print what --steps asks (one layer, one head) and the file keeps its own.
    let path = dir.path().join("j.safetensors");
    let out = cmd()
        .args([
            "my shoes are small",
            "--heads",
            "2",
            "--layers",
            "2",
            "--steps",
            "weights",
            "--layer",
            "1",
            "--head",
            "0",
        ])
        .args(["--format", "jsonl", "--save-trace"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let printed: Vec<&str> = lines.iter().filter_map(|l| l["id"].as_str()).collect();
    assert_eq!(printed, ["layers.1.attn.weights"]);
    assert_eq!(lines[1]["shape"], serde_json::json!([1, 4, 4]));
    let saved = tensors(&path);
    assert_eq!(saved["layers.0.attn.weights"], vec![2, 4, 4]);
    assert!(saved.contains_key("embed.sum") && saved.contains_key("layers.1.ffn.out"));
}

#[test]
fn save_steps_is_checked() {
    refused(&["my shoes", "--save-steps", "weights"], "--save-steps: it narrows what --save-trace writes");
    refused(
        &["my shoes", "--save-trace", "never-written.safetensors", "--save-steps", "wieghts"],
        "--save-steps: unknown step",
    );
    assert!(!root().join("never-written.safetensors").exists());
}
