//! `--patch STEP` of any step (`--patch-step`): the clean run's step copied into the corrupted
//! run per layer × position, and per head where the step has heads. Against PyTorch forward
//! hooks on transformers' own modules (fixtures/oracle/patch_step, made by
//! fixtures/oracle/patch_step_oracle.py: GPT-2's `attn.q` per head, the grouped-query Llama's
//! `attn.v` per key/value head, GPT-2's `ffn.out` per position), and to identities that hold
//! to the bit:
//! - A pre-norm layer's last step, `add_norm2.sum`, is its output: `--patch-step add_norm2.sum`
//!   gives `--patch-what resid`'s sweep, metric for metric.
//! - One token: a head's context at its one position is the head's whole context, so
//!   `--patch-step attn.context` gives `--patch-what heads`'s sweep.
//! - Causality: in the last layer, a query or an FFN output at a position before the last
//!   never reaches the last position's logits, so those cells give the corrupted metric
//!   exactly (effect 0).

use crate::common::*;
use crate::patching::{oracle_cases, patching};
use serde_json::Value;

const GPT2: [&str; 8] = [
    "my shoes are small, my feet are",
    "--model",
    "fixtures/decoders/gpt2",
    "--patch",
    "my shoes are big, my feet are",
    "--metric",
    " big",
    " small",
];

/// The `(layer, head, position, metric)` of every row of a `patching` object.
fn cells(p: &Value) -> Vec<(u64, Option<u64>, Option<u64>, f64)> {
    let n = |r: &Value, k: &str| r.get(k).and_then(Value::as_u64);
    let rows = p["rows"].as_array().unwrap();
    rows.iter()
        .map(|r| (n(r, "layer").unwrap(), n(r, "head"), n(r, "position"), r["metric"].as_f64().unwrap()))
        .collect()
}

fn with(base: &[&str], more: &[&str]) -> Value {
    patching(&[base, more].concat())
}

#[test]
fn patching_a_step_matches_pytorch_hooks() {
    let mut n = 0;
    for (name, case, p) in oracle_cases("patch_step") {
        assert_eq!(p["corrupted_tokens"], case["corrupted_tokens"], "{name}");
        for key in ["clean_metric", "corrupted_metric"] {
            let (x, y) = (p[key].as_f64().unwrap(), case[key].as_f64().unwrap());
            assert!((x - y).abs() <= 1e-4, "{name} {key}: {x} vs {y}");
        }
        let (ours, want) = (cells(&p), cells(&case));
        assert_eq!(ours.len(), want.len(), "{name}: row count");
        let effects =
            |v: &Value| v["rows"].as_array().unwrap().iter().map(|r| r["effect"].as_f64().unwrap()).collect::<Vec<_>>();
        for ((a, b), (ea, eb)) in ours.iter().zip(&want).zip(effects(&p).into_iter().zip(effects(&case))) {
            assert_eq!((a.0, a.1, a.2), (b.0, b.1, b.2), "{name}");
            assert!((a.3 - b.3).abs() <= 1e-4 && (ea - eb).abs() <= 1e-4, "{name} {a:?} vs {b:?}");
        }
        n += 1;
    }
    assert!(n >= 3, "only {n} step-patching fixtures");
}

#[test]
fn the_layers_last_step_is_the_residual_patch() {
    let step = with(&GPT2, &["--patch-step", "add_norm2.sum"]);
    let resid = with(&GPT2, &["--patch-what", "resid"]);
    assert_eq!(step["what"], "add_norm2.sum");
    assert_eq!(cells(&step), cells(&resid));
    assert_eq!(step["clean_metric"], resid["clean_metric"]);
    assert_eq!(step["layer_runs"], resid["layer_runs"]);
}

#[test]
fn one_tokens_head_context_is_the_head_patch() {
    let base = ["my", "--model", "fixtures/decoders/gpt2", "--patch", "a", "--metric", " big", " small"];
    let step = with(&base, &["--patch-step", "attn.context"]);
    let heads = with(&base, &[]);
    let step: Vec<_> = cells(&step).into_iter().map(|(l, h, p, m)| (l, h.unwrap(), p.unwrap(), m)).collect();
    let heads: Vec<_> = cells(&heads).into_iter().map(|(l, h, _, m)| (l, h.unwrap(), 0, m)).collect();
    assert_eq!(step, heads);
}

#[test]
fn the_last_layer_reads_earlier_positions_only_through_keys_and_values() {
    for (model, step, heads) in [
        ("fixtures/decoders/gpt2", "attn.q", 4),
        ("fixtures/decoders/llama-gqa", "attn.q_rot", 4),
        ("fixtures/decoders/gpt2", "ffn.out", 0),
    ] {
        let mut base = GPT2;
        base[2] = model;
        let p = with(&base, &["--patch-step", step]);
        let corrupted = p["corrupted_metric"].as_f64().unwrap();
        let rows = cells(&p);
        let layers = rows.iter().map(|r| r.0).max().unwrap() + 1;
        let n = rows.iter().filter_map(|r| r.2).max().unwrap() + 1;
        assert_eq!(rows.len() as u64, layers * n * heads.max(1), "{model} {step}");
        let last: Vec<_> = rows.iter().filter(|r| r.0 == layers - 1).collect();
        for &&(_, head, position, metric) in &last {
            assert_eq!(head.is_some(), heads > 0);
            if position.unwrap() + 1 < n {
                assert_eq!(metric, corrupted, "{model} {step} head {head:?} position {position:?}");
            }
        }
        assert!(last.iter().any(|r| r.3 != corrupted), "{model} {step}: the last position's patch changes nothing");
    }
}

#[test]
fn grouped_keys_are_patched_per_key_value_head() {
    let mut base = GPT2;
    base[2] = "fixtures/decoders/llama-gqa";
    let p = with(&base, &["--patch-step", "attn.k"]);
    let heads: std::collections::BTreeSet<_> = cells(&p).iter().filter_map(|r| r.1).collect();
    assert_eq!(heads.into_iter().collect::<Vec<_>>(), [0, 1], "llama-gqa has 2 key/value heads");
}

#[test]
fn the_table_and_heatmap_name_the_step() {
    let out =
        cmd().current_dir(root()).args(GPT2).args(["--patch-step", "attn.v", "--steps", "none"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("each head's attn.v at each position of each layer"), "{text}");
    assert!(text.contains("layer 1 head 3"), "{text}");
}

#[test]
fn a_step_that_cannot_be_patched_is_refused() {
    for (more, said) in [
        (&["--patch-step", "embed.out"][..], "not an in-layer step"),
        (&["--patch-step", "attn.mask"][..], "no position axis"),
        (&["--patch-step", "attn.q", "--patch-what", "resid"][..], "--patch-what"),
        (&["--patch-step", "attn.q", "--patch-method", "attribution"][..], "attribution"),
        (&["--patch-step", "attn.q_rot"][..], "computes attn.q_rot in 0 of its 2 layers"),
    ] {
        let out = cmd().current_dir(root()).args(GPT2).args(more).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{more:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(said), "{more:?}: {err}");
    }
    let out = cmd().current_dir(root()).args(["hi", "--patch-step", "attn.q"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
