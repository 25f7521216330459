//! `--save-trace FILE --names transformer-lens`: TransformerLens's hook names and cache
//! layouts. Against a real TransformerLens cache (fixtures/oracle/tl_oracle.py: transformer-lens
//! 2.15.4's `run_with_cache` on the tiny GPT-2 of fixtures/decoders/gpt2, written with
//! json.dump), key by key as numpy would compare them; against attn-trace's own JSON trace of
//! the same run for the toy encoder (the renaming and layouts, element by element); and read
//! back by `attn-trace diff`.

use crate::common::*;
use serde_json::Value;

const ARGS: [&str; 7] =
    ["my shoes are small, my feet are big.", "--heads", "2", "--layers", "2", "--causal", "--attn-bias"];

#[test]
fn hook_names_and_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let reference = d.join("reference.json");
    let out = cmd()
        .args(ARGS)
        .args(["--format", "json", "--names", "transformer-lens", "--save-trace"])
        .arg(d.join("tl.safetensors"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&reference, &out.stdout).unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ours = steps(&doc);
    let tl = read_safetensors(&d.join("tl.safetensors"));

    let mut want: Vec<String> = ["hook_embed", "hook_pos_embed", "hook_full_embed"].map(String::from).to_vec();
    for l in 0..2 {
        for hook in [
            "attn.hook_q",
            "attn.hook_k",
            "attn.hook_v",
            "attn.hook_attn_scores",
            "attn.hook_pattern",
            "attn.hook_z",
            "hook_attn_out",
            "hook_resid_mid",
            "hook_normalized_resid_mid",
            "mlp.hook_pre",
            "mlp.hook_post",
            "hook_mlp_out",
            "hook_resid_post",
            "hook_normalized_resid_post",
        ] {
            want.push(format!("blocks.{l}.{hook}"));
        }
    }
    want.sort();
    assert_eq!(tl.keys().cloned().collect::<Vec<_>>(), want, "every hook the catalogue names, nothing else");

    // (JSON holds the shortest decimal of each f32, read as f64: compared as f32.)
    // q, k, v, z: [batch 1, pos, head, d_head] from attn-trace's [head, pos, d_head].
    for (hook, id) in [
        ("attn.hook_q", "attn.q"),
        ("attn.hook_k", "attn.k"),
        ("attn.hook_v", "attn.v"),
        ("attn.hook_z", "attn.context"),
    ] {
        let (shape, vals) = &tl[&format!("blocks.1.{hook}")];
        let (ours_shape, ours_vals) = &ours[&format!("layers.1.{id}")];
        let (h, p, dh) = (ours_shape[0], ours_shape[1], ours_shape[2]);
        assert_eq!(shape, &vec![1, p, h, dh], "{hook}");
        for (pi, hi, i) in [(0, 0, 0), (3, 1, 1), (p - 1, h - 1, dh - 1)] {
            assert_eq!(
                vals[(pi * h + hi) * dh + i] as f32,
                ours_vals[(hi * p + pi) * dh + i] as f32,
                "{hook}[0, {pi}, {hi}, {i}]"
            );
        }
    }
    // Everything else: the same values behind a batch dimension of 1 (-inf scores included).
    for (hook, id) in [
        ("hook_embed", "embed.token"),
        ("blocks.0.attn.hook_attn_scores", "layers.0.attn.scores"),
        ("blocks.0.attn.hook_pattern", "layers.0.attn.weights"),
        ("blocks.1.hook_resid_post", "layers.1.add_norm2.sum"),
    ] {
        let (shape, vals) = &tl[hook];
        let (ours_shape, ours_vals) = &ours[id];
        assert_eq!(shape[1..], ours_shape[..], "{hook}");
        assert_eq!(shape[0], 1);
        assert!(vals.iter().zip(ours_vals).all(|(a, b)| *a as f32 == *b as f32), "{hook}");
    }
    assert!(tl["blocks.0.attn.hook_attn_scores"].1.contains(&f64::NEG_INFINITY));

    // diff reads it back, as npz too, and every hook agrees exactly with the normal trace.
    let npz = d.join("tl.npz");
    assert!(cmd()
        .args(ARGS)
        .args(["--names", "transformer-lens", "--save-trace"])
        .arg(&npz)
        .output()
        .unwrap()
        .status
        .success());
    for file in [d.join("tl.safetensors"), npz] {
        let out = cmd()
            .arg("diff")
            .arg(&file)
            .arg(&reference)
            .args(["--atol", "0", "--rtol", "0", "--format", "json"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
        let rep: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(rep["compared"], want.len() + 1, "every hook, and the tokens the file keeps");
        assert_eq!(rep["ignored"]["a"], serde_json::json!([]));
    }
}

#[test]
fn a_transformer_lens_cache_matches_key_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("ours.safetensors");
    let gpt2 = root().join("fixtures/decoders/gpt2");
    let cache_path = root().join("fixtures/oracle/transformer_lens/gpt2_cache.json");
    let cache: Value =
        serde_json::from_str(&std::fs::read_to_string(&cache_path).unwrap().replace("-Infinity", "\"-inf\"")).unwrap();
    let sentence = cache["__sentence"].as_str().unwrap();
    let out = cmd()
        .args(["--model", gpt2.to_str().unwrap(), sentence, "--format", "json", "--names", "transformer-lens"])
        .arg("--save-trace")
        .arg(&ours)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input"]["token_ids"], cache["__token_ids"], "the same tokens");
    let ours_t = read_safetensors(&ours);
    let keys: Vec<&String> = cache.as_object().unwrap().keys().filter(|k| !k.starts_with("__")).collect();
    assert_eq!(keys.len(), 27, "embeddings, 12 hooks × 2 layers, ln_final");
    // TransformerLens's layout: the cache's nesting is the shape.
    let want: Vec<Want> = keys
        .iter()
        .map(|key| {
            let mut shape = Vec::new();
            let mut v = &cache[key.as_str()];
            while let Value::Array(a) = v {
                shape.push(a.len());
                v = &a[0];
            }
            Want { id: key.to_string(), shape: Some(shape), values: flat(&cache[key.as_str()]) }
        })
        .collect();
    // f32 on both sides, different summation orders: the oracle tests' 1e-5 (seen: 1.8e-6).
    let mut oracle = Oracle::new("TransformerLens", (1e-5, 1e-5));
    oracle.compare("gpt2_cache.json", &want, &ours_t);
    oracle.finish("TransformerLens cache");
    // And attn-trace diff reads both files (the cache's -Infinity as Python wrote it).
    let out = cmd().arg("diff").arg(&cache_path).arg(&ours).args(["--format", "json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let rep: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["compared"], 27);
}

#[test]
fn names_needs_save_trace() {
    let out = cmd().args(["a b", "--names", "transformer-lens"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("--names") && stderr.contains("--save-trace") && stderr.lines().count() == 1, "{stderr}");
}
