//! Steering vectors (`--steer`, `--steer-from`; issue 33 item 4, activation addition): the
//! residual stream after layer L is the unsteered one plus alpha × vector exactly, at the
//! positions from FROM on, and nothing before layer L changes; greedy generation equals
//! transformers' with a forward hook on the layer adding the same vector (fixtures/oracle/steer,
//! made by fixtures/oracle/steer_oracle.py under transformers 4.46.3): the same tokens, every
//! step's logits within 1e-4; `--steer-from` builds the oracle's vector; bad input is one line.

use crate::common::*;
use serde_json::Value;
use std::path::PathBuf;

const S: &str = "my shoes are small, my feet are big.";
/// Logits: 1e-4 absolute (the bound).
const LOGITS: f64 = 1e-4;

fn model(name: &str) -> String {
    root().join("fixtures/decoders").join(name).to_string_lossy().into_owned()
}

fn oracle(case: &str) -> (Value, PathBuf) {
    let dir = root().join("fixtures/oracle/steer");
    let doc = serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{case}.json"))).unwrap()).unwrap();
    (doc, dir.join(format!("{case}.npy")))
}

fn nums(v: &Value) -> Vec<f64> {
    flat(v)
}

#[test]
fn the_residual_after_layer_l_gains_alpha_times_the_vector_exactly() {
    let m = model("llama-gqa");
    let (_, npy) = oracle("llama-gqa");
    let vector: Vec<f32> = nums(&oracle("llama-gqa").0["vector"]).iter().map(|&x| x as f32).collect();
    let plain = steps(&trace_json(&[S, "--model", &m]));
    for (alpha, from) in [(1.0f32, 0usize), (-2.5, 3)] {
        let spec = format!("1:{}@{alpha}@{from}", npy.display());
        let doc = trace_json(&[S, "--model", &m, "--steer", &spec]);
        crate::export::assert_valid("a steered trace", &doc);
        let steered = steps(&doc);
        let (shape, before) = &plain["layers.1.add_norm2.sum"];
        let after = &steered["layers.1.add_norm2.sum"].1;
        let d = shape[1];
        for (i, (&b, &a)) in before.iter().zip(after).enumerate() {
            let (pos, j) = (i / d, i % d);
            let want = if pos >= from { b as f32 + alpha * vector[j] } else { b as f32 };
            assert_eq!(a as f32, want, "alpha {alpha} from {from}: position {pos} dim {j}");
        }
        // Every step before layer 1's output is unchanged, and the final norm reads the steered one.
        for (id, (_, v)) in &plain {
            if id.starts_with("layers.0.") || id.starts_with("embed.") || id == "token_ids" {
                assert_eq!(v, &steered[id].1, "{id} changed");
            }
            if id.starts_with("layers.1.") && id != "layers.1.add_norm2.sum" {
                assert_eq!(v, &steered[id].1, "{id}: layer 1 itself is as before, only its output gains the vector");
            }
        }
        assert_ne!(plain["final_norm.out"].1, steered["final_norm.out"].1);
        let s = &doc["config"]["interventions"]["steer"][0];
        assert_eq!((s["layer"].as_u64(), s["from"].as_u64()), (Some(1), Some(from as u64)));
        assert_eq!(s["alpha"].as_f64().unwrap() as f32, alpha);
        assert_eq!(nums(&s["vector"]).len(), d);
    }
    let table = cmd().args([S, "--model", &m, "--steer", &format!("1:{}@2", npy.display())]).output().unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    let head: Vec<&str> = text.split("\n\n").next().unwrap().split_whitespace().collect();
    assert!(head.join(" ").contains("steered after layer 1 by 2 ×"), "{text}");
}

/// A step of a saved trace is a steering vector too: `TRACE.json#STEP[ROW]` and
/// `TRACE.safetensors#STEP[ROW]` (`--save-trace`).
#[test]
fn a_row_of_a_saved_trace_steers() {
    let m = model("gpt2");
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("t.json");
    let st = dir.path().join("t.safetensors");
    let source = ["The capital of France is", "--model", &m, "--save-trace", st.to_str().unwrap()];
    let doc = trace_json(&source);
    std::fs::write(&saved, serde_json::to_string(&doc).unwrap()).unwrap();
    let row = &steps(&doc)["layers.0.add_norm2.sum"];
    let d = row.0[1];
    let plain = steps(&trace_json(&[S, "--model", &m]));
    for file in [&saved, &st] {
        let spec = format!("0:{}#layers.0.add_norm2.sum[2]@0.5", file.display());
        let steered = steps(&trace_json(&[S, "--model", &m, "--steer", &spec]));
        let (before, after) = (&plain["layers.0.add_norm2.sum"].1, &steered["layers.0.add_norm2.sum"].1);
        for i in 0..before.len() {
            assert_eq!(after[i] as f32, before[i] as f32 + 0.5 * row.1[2 * d + i % d] as f32, "{spec}: element {i}");
        }
    }
    for (spec, fragment) in [
        ("layers.0.add_norm2.sum[9]", "has 5 rows, no row 9"),
        ("layers.0.add_norm2.sum", "has 5 rows: name one"),
        ("layers.0.attn.q[0]", "a steering vector is [d_model] or one row of [pos, d_model]"),
        ("layers.7.add_norm2.sum[0]", "has no tensor \"layers.7.add_norm2.sum\""),
    ] {
        for file in [&saved, &st] {
            let arg = format!("0:{}#{spec}", file.display());
            refused(&[S, "--model", &m, "--steer", &arg], fragment);
        }
    }
}

/// `--steer L:FILE@ALPHA@FROM --generate N` against transformers' greedy generation with a
/// forward hook on layer L (every position, and from a position inside the prompt or past it,
/// where only decode steps are steered).
#[test]
fn steered_generation_matches_transformers() {
    for case in ["llama-gqa", "llama-gqa-from", "gpt2", "gpt2-from"] {
        let (o, npy) = oracle(case);
        let m = root().join(o["model"].as_str().unwrap()).to_string_lossy().into_owned();
        let n = o["generated_ids"].as_array().unwrap().len().to_string();
        let spec = format!("{}:{}@{}@{}", o["layer"], npy.display(), o["alpha"], o["from"]);
        let prompt = o["prompt"].as_str().unwrap();
        let args = [prompt, "--model", &m, "--steer", &spec, "--generate", &n, "--ignore-eos", "--steps", "logits"];
        let doc = trace_json(&args);
        crate::export::assert_valid(case, &doc);
        let ids: Vec<u64> = doc["input"]["token_ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        let want_prompt: Vec<u64> = o["prompt_ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        assert_eq!(ids, want_prompt, "{case}: prompt ids");
        let g = &doc["generation"];
        let got: Vec<u64> = g["tokens"].as_array().unwrap().iter().map(|t| t["id"].as_u64().unwrap()).collect();
        let want: Vec<u64> = o["generated_ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        assert_eq!(got, want, "{case}: generated ids");
        assert_ne!(got, o["unsteered_ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect::<Vec<_>>());
        // Step 0's logits are the prompt pass's at its last position; step t's are gen.t.logits.
        let prompt_logits = &steps(&doc)["logits"];
        let vocab = prompt_logits.0[1];
        let mut rows = vec![prompt_logits.1[prompt_logits.1.len() - vocab..].to_vec()];
        for s in g["steps"].as_array().unwrap() {
            let t = s["step"].as_u64().unwrap();
            let step = s["steps"].as_array().unwrap().iter().find(|x| x["id"] == format!("gen.{t}.logits")).unwrap();
            rows.push(flat(&step["values"]));
        }
        let want_rows = o["logits"].as_array().unwrap();
        let mut worst = 0f64;
        for (i, w) in want_rows.iter().enumerate() {
            for (a, b) in rows[i].iter().zip(flat(w)) {
                worst = worst.max((a - b).abs());
            }
        }
        assert!(worst <= LOGITS, "{case}: logits differ by {worst}");
        eprintln!("{case}: {} tokens equal, logits within {worst:.2e}", got.len());
    }
}

/// `--steer-from A B --at-layer L --alpha A` builds the oracle's vector (layer L's output at
/// A's last position minus B's) and generates what the oracle's hook generated.
#[test]
fn steer_from_two_prompts_builds_the_oracles_vector() {
    for case in ["llama-gqa", "gpt2"] {
        let (o, _) = oracle(case);
        let m = root().join(o["model"].as_str().unwrap()).to_string_lossy().into_owned();
        let (a, b) = (o["steer_from"][0].as_str().unwrap(), o["steer_from"][1].as_str().unwrap());
        let (layer, alpha) = (o["layer"].to_string(), o["alpha"].to_string());
        let n = o["generated_ids"].as_array().unwrap().len().to_string();
        let args = [o["prompt"].as_str().unwrap(), "--model", &m, "--steer-from", a, b, "--at-layer", &layer];
        let doc = trace_json(&[&args[..], &["--alpha", &alpha, "--generate", &n, "--ignore-eos"]].concat());
        let got = nums(&doc["config"]["interventions"]["steer"][0]["vector"]);
        let worst = got.iter().zip(nums(&o["vector"])).map(|(x, y)| (x - y).abs()).fold(0f64, f64::max);
        assert!(worst <= 1e-5, "{case}: the vector differs by {worst}");
        let ids: Vec<u64> =
            doc["generation"]["tokens"].as_array().unwrap().iter().map(|t| t["id"].as_u64().unwrap()).collect();
        let want: Vec<u64> = o["generated_ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        assert_eq!(ids, want, "{case}");
    }
}

#[test]
fn bad_steering_is_one_line() {
    let m = model("llama-gqa");
    let dir = tempfile::tempdir().unwrap();
    let npy = |name: &str, values: &[f32]| -> String {
        let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}", values.len());
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        values.iter().for_each(|v| bytes.extend_from_slice(&v.to_le_bytes()));
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_string_lossy().into_owned()
    };
    let narrow = npy("narrow.npy", &[1.0; 31]);
    let mut nan = vec![0.0f32; 32];
    nan[7] = f32::NAN;
    let nan = npy("nan.npy", &nan);
    let good = npy("good.npy", &[0.5; 32]);
    let garbage = dir.path().join("garbage.npy");
    std::fs::write(&garbage, b"not numpy").unwrap();
    let folder = dir.path().to_string_lossy().into_owned();
    let t5 = root().join("fixtures/seq2seq/t5").to_string_lossy().into_owned();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![format!("0:{narrow}")], "has 31 values, and the residual stream has 32"),
        (vec![format!("0:{nan}")], "holds NaN at index 7"),
        (vec![format!("2:{good}")], "layer 2 does not exist; the model has layers 0 to 1"),
        (vec!["0:/nonexistent/v.npy".into()], "No such file or directory"),
        (vec![format!("0:{}", garbage.display())], "not a .npy array"),
        (vec![format!("0:{folder}")], "is a folder"),
        (vec![format!("0:{good}@x@1")], "has a bad ALPHA"),
        (vec![format!("x:{good}")], "does not start with a layer number"),
        (vec![format!("0:{good}@inf")], "is not a finite number"),
        (
            vec!["--steer-from".into(), "".into(), "Hate".into(), "--at-layer".into(), "0".into()],
            "the first prompt is empty",
        ),
        (
            vec!["--steer-from".into(), "Love".into(), "Hate".into(), "--at-layer".into(), "5".into()],
            "layer 5 does not exist",
        ),
    ];
    for (extra, fragment) in cases {
        let mut args: Vec<String> = vec![S.into(), "--model".into(), m.clone()];
        if extra[0].starts_with("--") {
            args.extend(extra.clone());
        } else {
            args.extend(["--steer".to_string(), extra[0].clone()]);
        }
        refused(&args.iter().map(String::as_str).collect::<Vec<_>>(), fragment);
    }
    let tiny = root().join("fixtures/tiny-bert").to_string_lossy().into_owned();
    for (args, fragment) in [
        (vec![S, "--model", &tiny, "--steer-from", "a", "b", "--at-layer", "0", "--check"], "--check recomputes"),
        (vec![S, "--model", &m, "--steer", &format!("0:{good}"), "--attribute", " big"], "--attribute does not count"),
    ] {
        refused(&args, fragment);
    }
    refused(&["a b", "--model", &t5, "--steer", &format!("0:{good}")], "encoder–decoder");
}

/// A post-norm encoder (BERT): the layer's output is `add_norm2.out`, which gains the vector;
/// `--steer-from` reads the two prompts with the whole word table.
#[test]
fn a_post_norm_layer_output_gains_the_vector() {
    let tiny = root().join("fixtures/tiny-bert").to_string_lossy().into_owned();
    let args = ["my shoes are small", "--model", &tiny];
    let plain = steps(&trace_json(&args));
    let doc = trace_json(&[&args[..], &["--steer-from", "big", "small", "--at-layer", "0", "--alpha", "2"]].concat());
    let s = &doc["config"]["interventions"]["steer"][0];
    let vector: Vec<f32> = nums(&s["vector"]).iter().map(|&x| x as f32).collect();
    assert!(vector.iter().any(|&x| x != 0.0));
    let steered = steps(&doc);
    let (shape, before) = &plain["layers.0.add_norm2.out"];
    for (i, (&b, &a)) in before.iter().zip(&steered["layers.0.add_norm2.out"].1).enumerate() {
        assert_eq!(a as f32, b as f32 + 2.0 * vector[i % shape[1]], "element {i}");
    }
    assert_eq!(plain["layers.0.add_norm2.sum"].1, steered["layers.0.add_norm2.sum"].1);
}
