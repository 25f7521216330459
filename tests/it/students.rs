//! Test material a course can trust (issue 17): committed PyTorch "students"
//! (fixtures/students/make_students.py), one correct and one per classic bug, diffed against
//! attn-trace's trace of the same weights. The correct ones (masked_fill(-1e9), and
//! float("-inf") written by json.dump as `-Infinity`) pass; each buggy one fails at the step
//! where the bug is, with the hint that names it. Also: Python's NaN/Infinity in `--weights`
//! and `--input`, and the masked-score rule.

use crate::common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const SENTENCE: &str = "my shoes are small, my feet are big.";
const CONFIG: [&str; 5] = ["--d-model", "12", "--heads", "3", "--causal"];

fn students() -> PathBuf {
    root().join("fixtures/students")
}

/// attn-trace's trace of the students' config, written to `dir`.
fn reference(dir: &Path) -> PathBuf {
    let path = dir.join("reference.json");
    let out = cmd().arg(SENTENCE).args(CONFIG).args(["--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&path, out.stdout).unwrap();
    path
}

/// `attn-trace diff A B --format json` and the table: (exit code, report, table text).
fn diff(a: &Path, b: &Path, extra: &[&str]) -> (i32, Value, String) {
    let out = cmd().arg("diff").arg(a).arg(b).args(["--format", "json"]).args(extra).output().unwrap();
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let table = cmd().arg("diff").arg(a).arg(b).args(extra).output().unwrap();
    assert_eq!(table.status.code(), out.status.code(), "both formats give one verdict");
    (out.status.code().unwrap(), report, String::from_utf8(table.stdout).unwrap())
}

#[test]
fn the_students_weights_are_attn_traces() {
    // make_students.py computed from this file: attn-trace must still write the same numbers.
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.safetensors");
    let out = cmd().arg(SENTENCE).args(CONFIG).arg("--save-weights").arg(&w).output().unwrap();
    assert!(out.status.success());
    assert_eq!(read_safetensors(&w), read_safetensors(&students().join("weights.safetensors")));
}

#[test]
fn correct_students_pass() {
    let dir = tempfile::tempdir().unwrap();
    let r = reference(dir.path());
    for name in ["correct", "correct_inf"] {
        let (code, rep, table) = diff(&students().join(format!("{name}.json")), &r, &[]);
        assert_eq!(code, 0, "{name}: {table}");
        assert_eq!(rep["compared"], 20, "{name}: every step the student wrote");
        let scores = rep["steps"].as_array().unwrap().iter().find(|s| s["id"] == "layers.0.attn.scores").unwrap();
        // 8 tokens, causal: 28 hidden keys per head, 3 heads.
        assert_eq!((scores["masked"].clone(), scores["outside"].clone()), (json!(84), json!(0)), "{name}");
        assert!(table.contains("0 of 192 (84 masked on both sides)"), "{name}: {table}");
        assert!(!table.contains("inf > allowed"), "{table}");
    }
    // The -inf student's file is Python's: the word -Infinity, not a string.
    let text = std::fs::read_to_string(students().join("correct_inf.json")).unwrap();
    assert!(text.contains("-Infinity") && !text.contains("\"-inf\""));
}

#[test]
fn each_classic_bug_fails_at_its_step_with_its_hint() {
    let dir = tempfile::tempdir().unwrap();
    let r = reference(dir.path());
    let cases: &[(&str, &str, &str, &[&str])] = &[
        (
            "scale_dmodel",
            "layers.0.attn.scores",
            "value",
            &["A = 0.5774 × B", "√d_k/√d_model = √4/√12", "divided by √d_model instead of √d_k"],
        ),
        ("softmax_dim", "layers.0.attn.weights", "value", &["columns sum to 1, not its rows", "dim=-2"]),
        (
            "transposed",
            "layers.0.attn.q",
            "shape",
            &["[pos, head, d_head] instead of [head, pos, d_head]", "transpose"],
        ),
        (
            "mask_after",
            "layers.0.attn.scores",
            "value",
            &["finite scores at the 84 positions B masks", "after the softmax"],
        ),
        ("heads_order", "layers.0.attn.q", "value", &["head 0 holds columns 0, 3, 6", "view(pos, d_head, heads)"]),
    ];
    for (name, step, kind, hint) in cases {
        let (code, rep, table) = diff(&students().join(format!("{name}.json")), &r, &[]);
        assert_eq!(code, 1, "{name}");
        let first = &rep["first_divergence"];
        assert_eq!((first["id"].as_str(), first["kind"].as_str()), (Some(*step), Some(*kind)), "{name}");
        let h = first["hint"].as_str().unwrap_or_else(|| panic!("{name}: no hint in {first}"));
        for want in *hint {
            assert!(h.contains(want), "{name}: {h}");
            assert!(table.contains(want), "{name}: the table says it too: {table}");
        }
        assert!(table.contains(&format!("first divergence: {step}")), "{table}");
    }
    // Past the unmasked scores, the weights of the same student show the mask after the softmax.
    let (code, rep, _) = diff(&students().join("mask_after.json"), &r, &["--skip", "scores"]);
    assert_eq!(code, 1);
    assert_eq!(rep["first_divergence"]["id"], "layers.0.attn.weights");
    assert!(rep["first_divergence"]["hint"]
        .as_str()
        .unwrap()
        .contains("0 where B is masked, but its rows sum to less than 1"));
}

#[test]
fn masked_scores_agree_down_to_the_floor_and_a_mismatch_says_what_each_side_holds() {
    let dir = tempfile::tempdir().unwrap();
    let r = reference(dir.path());
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(students().join("correct.json")).unwrap()).unwrap();
    // -1e4 is the default floor (inclusive); -9999 is above it, so that score is a real value.
    doc["layers.0.attn.scores"][0][0][1] = json!(-1e4);
    let at_floor = dir.path().join("floor.json");
    std::fs::write(&at_floor, doc.to_string()).unwrap();
    assert_eq!(diff(&at_floor, &r, &[]).0, 0);
    doc["layers.0.attn.scores"][0][0][1] = json!(-9999.0);
    std::fs::write(&at_floor, doc.to_string()).unwrap();
    let (code, rep, table) = diff(&at_floor, &r, &[]);
    assert_eq!(code, 1);
    assert_eq!(rep["first_divergence"]["index"], json!([0, 0, 1]));
    let why = rep["first_divergence"]["why"].as_str().unwrap();
    assert!(why.starts_with("A holds the finite value -9999.0, B -inf (masked)"), "{why}");
    assert!(table.contains(why) && !table.contains("> allowed inf"), "{table}");
    // A higher floor takes -9999 in (and -1e9, the other masked scores, still agree).
    assert_eq!(diff(&at_floor, &r, &["--mask-floor", "-9000"]).0, 0);
    // Two finite masks agree too: -1e9 against torch.finfo(torch.float32).min (transformers').
    let correct = students().join("correct.json");
    let mut finfo: Value = serde_json::from_str(&std::fs::read_to_string(&correct).unwrap()).unwrap();
    let mut replaced = 0;
    for row in finfo["layers.0.attn.scores"].as_array_mut().unwrap().iter_mut().flat_map(|h| h.as_array_mut().unwrap())
    {
        for v in row.as_array_mut().unwrap() {
            if v.as_f64() == Some(-1e9) {
                *v = json!(f32::MIN);
                replaced += 1;
            }
        }
    }
    assert_eq!(replaced, 84);
    let finfo_path = dir.path().join("finfo.json");
    std::fs::write(&finfo_path, finfo.to_string()).unwrap();
    let (code, rep, _) = diff(&correct, &finfo_path, &[]);
    assert_eq!(code, 0);
    assert_eq!(
        rep["steps"].as_array().unwrap().iter().find(|s| s["id"] == "layers.0.attn.scores").unwrap()["masked"],
        84
    );
    // The floor must be a finite negative number.
    let out = cmd().arg("diff").arg(&at_floor).arg(&r).args(["--mask-floor", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--mask-floor"));
}

#[test]
fn python_non_finite_words_are_read_by_weights_and_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A weights JSON as json.dump writes it, with NaN in the one position row 8 tokens never use.
    let tensors = read_safetensors(&students().join("weights.safetensors"));
    let mut text = String::from("{");
    for (i, (name, (shape, vals))) in tensors.iter().enumerate() {
        let mut vals: Vec<String> = vals.iter().map(|v| format!("{:?}", *v as f32)).collect();
        if name == "embed.position.weight" {
            let last = vals.len() - 1;
            vals[last] = "NaN".into();
            vals[last - 1] = "Infinity".into();
            vals[last - 2] = "-Infinity".into();
        }
        let rows: Vec<String> = if shape.len() == 2 {
            vals.chunks(shape[1]).map(|r| format!("[{}]", r.join(", "))).collect()
        } else {
            vals
        };
        text += &format!("{}\"{name}\": [{}]", if i > 0 { ", " } else { "" }, rows.join(", "));
    }
    text += "}";
    let w = d.join("w.json");
    std::fs::write(&w, text).unwrap();
    let from_json =
        trace_json(&[SENTENCE, "--d-model", "12", "--heads", "3", "--causal", "--weights", w.to_str().unwrap()]);
    let seeded = trace_json(&[SENTENCE, "--d-model", "12", "--heads", "3", "--causal"]);
    assert_eq!(from_json["steps"], seeded["steps"], "the NaN row is never used");
    // --input: Python's words are read, and a non-finite number is named as such.
    let input = d.join("x.json");
    std::fs::write(&input, "[[0.5, 0.25], [NaN, 1.0]]").unwrap();
    let out = cmd().args(["--input", input.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("row 1, column 0 is not a finite number") && !stderr.contains("not valid JSON"),
        "{stderr}"
    );
}

#[test]
fn a_student_with_two_bugs_gets_a_hint_for_each() {
    // two_bugs records q, k and v as [pos, head, d_k] and divides the scores by √d_model: the
    // report gives both hints, each under its step, the transpose's once for q, k and v.
    let dir = tempfile::tempdir().unwrap();
    let r = reference(dir.path());
    let (code, rep, table) = diff(&students().join("two_bugs.json"), &r, &[]);
    assert_eq!(code, 1);
    assert_eq!(rep["first_divergence"]["id"], "layers.0.attn.q");
    let hint_of = |id: &str| -> Option<String> {
        let step = rep["steps"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap();
        step["hint"].as_str().map(String::from)
    };
    let transpose = "[pos, head, d_head] instead of [head, pos, d_head]";
    for id in ["layers.0.attn.q", "layers.0.attn.k", "layers.0.attn.v"] {
        assert!(hint_of(id).is_some_and(|h| h.contains(transpose)), "{id}: {:?}", hint_of(id));
    }
    let scale = "√d_k/√d_model = √4/√12: the scores were likely divided by √d_model instead of √d_k";
    assert!(
        hint_of("layers.0.attn.scores").is_some_and(|h| h.contains(scale)),
        "{:?}",
        hint_of("layers.0.attn.scores")
    );
    assert_eq!(hint_of("layers.0.attn.raw_scores"), None, "a step within tolerance has no hint");
    assert_eq!(rep["first_divergence"]["hint"].as_str(), hint_of("layers.0.attn.q").as_deref());
    // The table: each hint under its step, the repeated one once with a count.
    let under = |step: &str| {
        let at = table.find(&format!("\n{step} ")).unwrap_or_else(|| panic!("no row {step}: {table}"));
        table[at + 1..].lines().nth(1).unwrap_or("").to_string()
    };
    assert!(under("layers.0.attn.q").contains(transpose), "{table}");
    assert!(under("layers.0.attn.q").ends_with("(the same at 2 more steps: layers.0.attn.k, layers.0.attn.v)"));
    assert!(!under("layers.0.attn.k").contains("hint:"), "{table}");
    assert!(under("layers.0.attn.scores").starts_with("  hint: ") && under("layers.0.attn.scores").contains(scale));
    assert_eq!(table.matches("hint: ").count(), 3, "the first divergence's, and one per distinct hint: {table}");
}
