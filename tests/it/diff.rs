//! `attn-trace diff`: identical traces, one changed value, missing steps, shape changes,
//! NaN, the three file forms of one trace, TransformerLens and short aliases, unusable
//! inputs (exit 2, one line), and the `--` escape for a sentence that is literally "diff".

use crate::common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const SENTENCE: &str = "my shoes are small, my feet are big.";

/// Writes a trace of the seed-000 sentence (2 heads) as JSON and returns its path.
fn reference(dir: &Path, extra: &[&str]) -> PathBuf {
    let path = dir.join("reference.json");
    let out = cmd().args([SENTENCE, "--heads", "2", "--format", "json"]).args(extra).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&path, out.stdout).unwrap();
    path
}

/// Runs `attn-trace diff a b --format json …`: (exit code, report, stderr).
fn diff(a: &Path, b: &Path, extra: &[&str]) -> (i32, Value, String) {
    let out = cmd().arg("diff").arg(a).arg(b).args(["--format", "json"]).args(extra).output().unwrap();
    let code = out.status.code().unwrap();
    let report = if out.stdout.is_empty() { Value::Null } else { serde_json::from_slice(&out.stdout).unwrap() };
    (code, report, String::from_utf8(out.stderr).unwrap())
}

/// The reference document's steps as a minimal named-tensor object, edited by `f`.
fn minimal(doc: &Value, f: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Value {
    let mut map = serde_json::Map::new();
    for s in doc["steps"].as_array().unwrap() {
        map.insert(s["id"].as_str().unwrap().to_string(), s["values"].clone());
    }
    f(&mut map);
    Value::Object(map)
}

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string(v).unwrap()).unwrap();
    p
}

#[test]
fn identical_traces_agree() {
    let dir = tempfile::tempdir().unwrap();
    let r = reference(dir.path(), &[]);
    let (code, rep, _) = diff(&r, &r, &[]);
    assert_eq!(code, 0);
    assert_eq!(rep["within_tolerance"], true);
    assert_eq!(rep["first_divergence"], Value::Null);
    assert_eq!(rep["compared"], 23);
    // The table report too.
    let out = cmd().arg("diff").arg(&r).arg(&r).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("no divergence") && text.contains("result: all 23 common steps within tolerance"), "{text}");
}

/// A version-1 document (before `tensor_types` changed form; the steps are the same) is read
/// as the current version is.
#[test]
fn a_schema_version_1_trace_is_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let r = reference(dir.path(), &[]);
    let mut old: Value = serde_json::from_str(&std::fs::read_to_string(&r).unwrap()).unwrap();
    old["schema_version"] = 1.into();
    let (code, rep, stderr) = diff(&write(dir.path(), "v1.json", &old), &r, &[]);
    assert_eq!((code, &rep["compared"]), (0, &Value::from(23)), "{stderr}");
}

#[test]
fn one_changed_value_is_found_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let r = reference(dir.path(), &[]);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&r).unwrap()).unwrap();
    let before = doc["steps"].as_array().unwrap().iter().find(|s| s["id"] == "layers.0.attn.weights").unwrap()
        ["values"][1][3][5]
        .as_f64()
        .unwrap();
    let changed = minimal(&doc, |m| {
        let w = m.get_mut("layers.0.attn.weights").unwrap();
        w[1][3][5] = json!(before + 0.001);
    });
    let a = write(dir.path(), "changed.json", &changed);
    let (code, rep, stderr) = diff(&a, &r, &[]);
    assert_eq!(code, 1, "{stderr}");
    let f = &rep["first_divergence"];
    assert_eq!(f["id"], "layers.0.attn.weights");
    assert_eq!((f["layer"].clone(), f["head"].clone(), f["kind"].clone()), (json!(0), json!(1), json!("value")));
    assert_eq!(f["index"], json!([1, 3, 5]));
    assert_eq!(f["dims"], json!(["head", "query_pos", "key_pos"]));
    assert!((f["b"].as_f64().unwrap() - before).abs() < 1e-7);
    assert!((f["a"].as_f64().unwrap() - (before + 0.001)).abs() < 1e-6);
    assert!((f["abs_error"].as_f64().unwrap() - 0.001).abs() < 1e-6);
    assert_eq!(rep["diverged"], 1);
    let w = rep["steps"].as_array().unwrap().iter().find(|s| s["id"] == "layers.0.attn.weights").unwrap();
    assert_eq!((w["outside"].clone(), w["at"].clone(), w["ok"].clone()), (json!(1), json!([1, 3, 5]), json!(false)));
    // Within a looser tolerance it passes.
    assert_eq!(diff(&a, &r, &["--atol", "0.01"]).0, 0);
    // The table report names the same place.
    let out = cmd().arg("diff").arg(&a).arg(&r).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("first divergence: layers.0.attn.weights (layer 0, head 1) at [1, 3, 5]"), "{text}");
}

#[test]
fn missing_steps_are_listed_and_shapes_compared() {
    let dir = tempfile::tempdir().unwrap();
    let r = reference(dir.path(), &[]);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&r).unwrap()).unwrap();
    let fewer = minimal(&doc, |m| {
        m.remove("layers.0.ffn.hidden");
        m.remove("tokens");
    });
    let (code, rep, _) = diff(&write(dir.path(), "fewer.json", &fewer), &r, &[]);
    assert_eq!(code, 0, "a missing step is reported, not a divergence");
    assert_eq!(rep["only_in_b"], json!(["tokens", "layers.0.ffn.hidden"]));
    assert_eq!(rep["only_in_a"], json!([]));

    let reshaped = minimal(&doc, |m| {
        m.insert("layers.0.attn.q".into(), json!([[1.0, 2.0], [3.0, 4.0]]));
    });
    let (code, rep, _) = diff(&write(dir.path(), "reshaped.json", &reshaped), &r, &[]);
    assert_eq!(code, 1);
    assert_eq!(rep["first_divergence"]["kind"], "shape");
    assert_eq!(rep["shape_mismatches"], json!([{"id": "layers.0.attn.q", "a": [2, 2], "b": [2, 8, 2]}]));
}

#[test]
fn nan_on_one_side_diverges_and_on_both_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let r = reference(dir.path(), &["--causal"]);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&r).unwrap()).unwrap();
    // Causal scores hold "-inf" on both sides: equal infinities agree.
    let same = write(dir.path(), "same.json", &minimal(&doc, |_| {}));
    assert_eq!(diff(&same, &r, &[]).0, 0);
    let nan = minimal(&doc, |m| m.get_mut("embed.sum").unwrap()[2][1] = json!("nan"));
    let a = write(dir.path(), "nan.json", &nan);
    let (code, rep, _) = diff(&a, &r, &[]);
    assert_eq!(code, 1);
    assert_eq!(rep["first_divergence"]["id"], "embed.sum");
    assert_eq!(rep["first_divergence"]["index"], json!([2, 1]));
    assert_eq!(rep["first_divergence"]["a"], "nan");
    assert_eq!(rep["first_divergence"]["abs_error"], "nan");
    // NaN against NaN at the same index agrees.
    assert_eq!(diff(&a, &a, &[]).0, 0);
}

#[test]
fn json_safetensors_npz_and_jsonl_of_one_trace_agree() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let args = [SENTENCE, "--heads", "2", "--causal", "--layers", "2"];
    let json_path = d.join("t.json");
    let out = cmd().args(args).args(["--format", "json", "--save-trace"]).arg(d.join("t.npz")).output().unwrap();
    assert!(out.status.success());
    std::fs::write(&json_path, out.stdout).unwrap();
    let out =
        cmd().args(args).args(["--format", "jsonl", "--save-trace"]).arg(d.join("t.safetensors")).output().unwrap();
    assert!(out.status.success());
    std::fs::write(d.join("t.jsonl"), out.stdout).unwrap();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let n = doc["steps"].as_array().unwrap().len();
    let files = ["t.json", "t.jsonl", "t.safetensors", "t.npz"];
    for a in files {
        for b in files {
            let (code, rep, stderr) = diff(&d.join(a), &d.join(b), &["--atol", "0", "--rtol", "0"]);
            assert_eq!(code, 0, "{a} vs {b}: {stderr}");
            assert_eq!(rep["compared"], n, "{a} vs {b}: every step, tokens and the mask included");
            assert_eq!(rep["only_in_a"], json!([]));
        }
    }
}

#[test]
fn transformer_lens_names_and_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let r = reference(dir.path(), &[]);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&r).unwrap()).unwrap();
    let step = |id: &str| doc["steps"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap()["values"].clone();
    // TransformerLens caches are [batch, pos, head, d_head] for q/k/v/z, [batch, …] otherwise.
    let tl_layout = |v: Value| {
        let (h, p) = (v.as_array().unwrap().len(), v[0].as_array().unwrap().len());
        json!([(0..p).map(|pi| (0..h).map(|hi| v[hi][pi].clone()).collect::<Vec<_>>()).collect::<Vec<_>>()])
    };
    let tl = json!({
        "hook_embed": [step("embed.token")],
        "hook_pos_embed": [step("embed.position")],
        "blocks.0.attn.hook_q": tl_layout(step("layers.0.attn.q")),
        "blocks.0.attn.hook_k": tl_layout(step("layers.0.attn.k")),
        "blocks.0.attn.hook_v": tl_layout(step("layers.0.attn.v")),
        "blocks.0.attn.hook_attn_scores": [step("layers.0.attn.scores")],
        "blocks.0.attn.hook_pattern": [step("layers.0.attn.weights")],
        "blocks.0.attn.hook_z": tl_layout(step("layers.0.attn.context")),
        "blocks.0.hook_attn_out": [step("layers.0.attn.out")],
        "blocks.0.hook_resid_mid": [step("layers.0.add_norm1.sum")],
        "blocks.0.mlp.hook_pre": [step("layers.0.ffn.hidden")],
        "blocks.0.mlp.hook_post": [step("layers.0.ffn.act")],
        "blocks.0.hook_mlp_out": [step("layers.0.ffn.out")],
        "blocks.0.hook_resid_post": [step("layers.0.add_norm2.sum")],
        "blocks.0.hook_not_a_step": [1.0],
    });
    let (code, rep, stderr) = diff(&write(dir.path(), "tl.json", &tl), &r, &["--atol", "0", "--rtol", "0"]);
    assert_eq!(code, 0, "{stderr} {rep}");
    assert_eq!(rep["compared"], 14);
    assert_eq!(rep["ignored"]["a"], json!(["blocks.0.hook_not_a_step"]));
    let notes = rep["notes"].to_string();
    assert!(notes.contains("[pos, head, d_head]") && notes.contains("batch dimension"), "{notes}");

    // Short aliases of --steps, with their layer, and blocks.{i} for layers.{i}.
    let short = json!({"layers.0.pattern": step("layers.0.attn.weights"), "blocks.0.z": step("layers.0.attn.context"),
                       "ids": step("token_ids"), "layers": {"0": {"q": step("layers.0.attn.q")}}});
    let (code, rep, _) = diff(&write(dir.path(), "short.json", &short), &r, &[]);
    assert_eq!(code, 0);
    assert_eq!(rep["compared"], 4);
    // Two names for one step is an error.
    let twice = json!({"hook_embed": step("embed.token"), "embed.token": step("embed.token")});
    let (code, _, stderr) = diff(&write(dir.path(), "twice.json", &twice), &r, &[]);
    assert_eq!(code, 2);
    assert!(stderr.contains("both name step embed.token"), "{stderr}");
}

#[test]
fn unusable_inputs_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r = reference(d, &[]);
    let st = d.join("t.safetensors");
    assert!(cmd().args([SENTENCE, "--save-trace"]).arg(&st).output().unwrap().status.success());
    let bytes = std::fs::read(&st).unwrap();
    std::fs::write(d.join("cut.safetensors"), &bytes[..bytes.len() / 2]).unwrap();
    std::fs::write(d.join("garbage.bin"), b"\x00\x01 not a trace").unwrap();
    std::fs::write(d.join("broken.json"), "{\"layers.0.attn.q\": [[1, 2], [3").unwrap();
    std::fs::write(d.join("ragged.json"), "{\"layers.0.attn.q\": [[1, 2], [3]]}").unwrap();
    std::fs::write(d.join("null.json"), "{\"layers.0.attn.q\": [[1, null]]}").unwrap();
    std::fs::write(d.join("nothing.json"), "{\"weights\": [1], \"foo\": 2}").unwrap();
    std::fs::write(d.join("v9.json"), "{\"schema_version\": 9, \"steps\": []}").unwrap();
    std::fs::write(d.join("empty.npz"), b"PK\x05\x06").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["missing.json", "reference.json"], "missing.json"),
        (&["cut.safetensors", "reference.json"], "not a readable safetensors file"),
        (&["garbage.bin", "reference.json"], "not a trace"),
        (&["broken.json", "reference.json"], "not valid JSON"),
        (&["ragged.json", "reference.json"], "ragged"),
        (&["null.json", "reference.json"], "null is not a number"),
        (&["nothing.json", "reference.json"], "no step in common"),
        (&["v9.json", "reference.json"], "schema_version 9"),
        (&["empty.npz", "reference.json"], "npz"),
        (&["reference.json"], "required arguments"),
        (&["reference.json", "reference.json", "--atol", "-1"], "--atol"),
        (&["reference.json", "reference.json", "--format", "xml"], "invalid value"),
    ];
    for (args, want) in cases {
        let out = cmd().current_dir(d).arg("diff").args(*args).output().unwrap();
        let stderr = refused_output(&out, args, want);
        assert!(stderr.starts_with("attn-trace: "), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}");
    }
    assert!(r.exists());
}

#[test]
fn the_words_diff_and_schema_can_still_be_traced() {
    for word in ["diff", "schema"] {
        let out = cmd().args(["--format", "json", "--", word]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["input"]["tokens"], json!([word]));
    }
    let help = cmd().args(["diff", "--help"]).output().unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8(help.stdout).unwrap().contains("--atol"));
}

#[test]
fn require_did_you_mean_and_every_ignored_name() {
    let dir = tempfile::tempdir().unwrap();
    let r = reference(dir.path(), &[]);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&r).unwrap()).unwrap();
    // One step right, four misspelled (the file), and 25 names that are no step.
    let mut typos = serde_json::Map::new();
    let value = |id: &str| minimal(&doc, |_| {})[id].clone();
    typos.insert("embed.sum".into(), value("embed.sum"));
    for (bad, id) in [
        ("layers.0.attn.weight", "layers.0.attn.weights"),
        ("layers.0.attn.scors", "layers.0.attn.scores"),
        ("layers.0.atn.q", "layers.0.attn.q"),
        ("embed.tokens", "embed.token"),
    ] {
        typos.insert(bad.into(), value(id));
    }
    for i in 0..25 {
        typos.insert(format!("my_debug_tensor_{i:02}"), json!([1.0]));
    }
    let a = write(dir.path(), "typos.json", &Value::Object(typos));
    let (code, rep, _) = diff(&a, &r, &[]);
    assert_eq!(code, 0, "without --require, missing steps are listed, not failed");
    assert_eq!(rep["ignored"]["a"].as_array().unwrap().len(), 29, "every ignored name, in full");
    assert_eq!(rep["did_you_mean"]["a"]["layers.0.attn.weight"], "layers.0.attn.weights");
    assert_eq!(rep["did_you_mean"]["a"]["layers.0.atn.q"], "layers.0.attn.q");
    assert_eq!(rep["did_you_mean"]["a"]["embed.tokens"], "embed.token");
    assert_eq!(rep["did_you_mean"]["a"].get("my_debug_tensor_00"), None);
    let (code, rep, _) = diff(&a, &r, &["--require", "all"]);
    assert_eq!(code, 1);
    assert_eq!(rep["within_tolerance"], false);
    assert_eq!(rep["required_missing"].as_array().unwrap().len(), 22);
    let out = cmd().arg("diff").arg(&a).arg(&r).args(["--require", "attn.weights,embed.sum"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("missing from A (1): layers.0.attn.weights (A has layers.0.attn.weight: a typo?)"), "{text}");
    assert!(text.contains("  layers.0.attn.weight  (did you mean layers.0.attn.weights?)"), "{text}");
    assert!(text.contains("… and 9 more (--format json lists every one)"), "{text}");
    assert!(text.contains("1 required step missing from A"), "{text}");
    // Required steps that A holds pass; a name that is no step is a usage error with a guess.
    assert_eq!(diff(&a, &r, &["--require", "embed.sum"]).0, 0);
    let (code, _, stderr) = diff(&a, &r, &["--require", "attn.weigths"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("did you mean attn.weights?") && stderr.lines().count() == 1, "{stderr}");
}

#[test]
fn only_and_skip_choose_the_steps_compared() {
    let dir = tempfile::tempdir().unwrap();
    let r = reference(dir.path(), &[]);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&r).unwrap()).unwrap();
    let changed =
        write(dir.path(), "changed.json", &minimal(&doc, |m| m.get_mut("embed.sum").unwrap()[0][0] = json!(9.0)));
    let (code, rep, _) = diff(&changed, &r, &["--only", "qkv,attn.weights"]);
    assert_eq!((code, rep["compared"].clone()), (0, json!(4)));
    assert_eq!(rep["only_in_b"], json!([]), "steps not chosen are not listed as missing");
    assert_eq!(diff(&changed, &r, &[]).0, 1);
    let (code, rep, _) = diff(&changed, &r, &["--skip", "embed.sum"]);
    assert_eq!((code, rep["compared"].clone()), (0, json!(22)));
    // `embed` stands for the four embedding steps this trace has (and embed.token_type).
    let (code, rep, _) = diff(&changed, &r, &["--skip", "embed"]);
    assert_eq!((code, rep["compared"].clone()), (0, json!(19)));
    assert_eq!(diff(&changed, &r, &["--only", "embed.sum", "--skip", "embed.sum"]).0, 2, "nothing left to compare");
}

/// `v` (nested arrays of numbers) with every number halved.
fn halved(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(halved).collect()),
        v => json!(v.as_f64().unwrap() * 0.5),
    }
}

#[test]
fn a_hint_repeated_in_every_layer_is_one_line_with_a_count() {
    // A copy of a 3-layer trace whose scores are halved in every layer (and nothing else):
    // each layer's scores get the scale hint, in JSON; the table says it once.
    let dir = tempfile::tempdir().unwrap();
    let r = reference(dir.path(), &["--layers", "3", "--steps", "all"]);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&r).unwrap()).unwrap();
    let a = minimal(&doc, |m| {
        for l in 0..3 {
            let s = m.get_mut(&format!("layers.{l}.attn.scores")).unwrap();
            *s = halved(s);
        }
    });
    let a = write(dir.path(), "a.json", &a);
    let (code, rep, _) = diff(&a, &r, &[]);
    assert_eq!(code, 1);
    let hinted: Vec<&str> = rep["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["hint"].as_str().is_some_and(|h| h.starts_with("A = 0.5000 × B throughout")))
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(hinted, ["layers.0.attn.scores", "layers.1.attn.scores", "layers.2.attn.scores"]);
    let table = cmd().arg("diff").arg(&a).arg(&r).output().unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    let lines: Vec<&str> = table.lines().filter(|l| l.starts_with("  hint: ")).collect();
    assert_eq!(lines.len(), 1, "{table}");
    assert!(lines[0].ends_with("(the same at 2 more steps: layers.1.attn.scores, layers.2.attn.scores)"), "{table}");
}
