//! Attribution patching (`--patch-method attribution`) against PyTorch autograd on
//! transformers' own modules (fixtures/oracle/attrpatch, made by
//! fixtures/oracle/attrpatch_oracle.py): GPT-2 and a Llama with grouped-query attention,
//! heads and residual stream. Plus what must hold against the exact sweep, and the refusals.

use crate::common::*;
use crate::patching::{assert_sweep_matches, oracle_cases, patching, rows};

#[test]
fn attribution_matches_pytorch_autograd() {
    let mut n = 0;
    for (name, case, p) in oracle_cases("attrpatch") {
        assert_eq!(p["method"], "attribution", "{name}");
        // Both sides compute in float32 and sum each product in float64. Metrics (logit
        // differences of about 0.1–2) are compared to 1e-4 absolute, as every oracle fixture
        // is; effects are those divided by clean − corrupted (0.10 and 0.26 here), so 1e-4 on
        // an effect is 1e-5 or less on the metric's scale. Measured: 1.4e-6 and 5.8e-6.
        assert_sweep_matches(&name, &p, &case);
        n += 1;
    }
    assert_eq!(n, 4, "attribution patching fixtures");
}

/// What is true of both methods: the same baselines, and cells whose activation cannot differ
/// between the runs (positions before the first changed token, under a causal mask) or cannot
/// reach the metric (the last layer's output at any position but the metric's) are exactly 0.
#[test]
fn attribution_agrees_with_the_exact_sweep_where_it_must() {
    for model in ["fixtures/decoders/gpt2", "fixtures/decoders/llama-gqa"] {
        let base = [
            "my shoes are small, my feet are",
            "--model",
            model,
            "--patch",
            "my shoes are big, my feet are",
            "--metric",
            " big",
            " small",
            "--patch-what",
            "resid",
        ];
        let exact = patching(&base);
        let approx = patching(&[&base[..], &["--patch-method", "attribution"]].concat());
        assert_eq!(exact["method"], "exact");
        assert_eq!(approx["method"], "attribution");
        for key in ["clean_metric", "corrupted_metric", "corrupted_tokens", "layer_runs_without_reuse"] {
            assert_eq!(exact[key], approx[key], "{model} {key}");
        }
        let (e, a) = (rows(&exact), rows(&approx));
        let last_layer = e.iter().map(|r| r.layer).max().unwrap();
        let (n, changed) = (e.iter().filter(|r| r.layer == 0).count() as u64, 3); // " small" → " big"
        for (x, y) in e.iter().zip(&a) {
            if x.index < changed || (x.layer == last_layer && x.index != n - 1) {
                assert_eq!((x.effect, y.effect), (0.0, 0.0), "{model}: {x:?} {y:?}");
            }
        }
        // The attribution's estimates are not all 0: it measured something.
        assert!(a.iter().any(|r| r.effect.abs() > 0.01), "{model}: {a:?}");
    }
}

#[test]
fn the_table_names_the_method() {
    let out = cmd()
        .current_dir(root())
        .args(["my shoes are small, my feet are", "--model", "fixtures/decoders/gpt2"])
        .args(["--patch", "my shoes are big, my feet are", "--metric", " big", " small"])
        .args(["--patch-method", "attribution", "--steps", "tokens", "--width", "200"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("attribution patching (gradient approximation): each head's context"), "{text}");
    assert!(text.contains("one backward pass"), "{text}");
    // The heatmap, the page and the picture carry the same title.
    let tmp = tempfile::tempdir().unwrap();
    let (html, svg) = (tmp.path().join("p.html"), tmp.path().join("p.svg"));
    let out = cmd()
        .current_dir(root())
        .args(["my shoes are small, my feet are", "--model", "fixtures/decoders/gpt2"])
        .args(["--patch", "my shoes are big, my feet are", "--metric", " big", " small"])
        .args(["--patch-method", "attribution", "--format", "heatmap", "--color", "never"])
        .args(["--html", html.to_str().unwrap(), "--svg", svg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("attribution patching (gradient approximation) · layers × heads"), "{text}");
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("<h2>Attribution patching (gradient approximation)</h2>"));
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("attribution patching (gradient approximation), layers × heads"));
}

#[test]
fn attribution_without_a_gradient_path_is_refused() {
    let clean = "my shoes are small, my feet are";
    let sweep = ["--patch", "my shoes are big, my feet are", "--metric", " big", " small"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![clean, "--model", "fixtures/decoders/gpt2", "--patch-method", "attribution"],
            "attn-trace: --patch-method: it is how --patch computes its grid",
        ),
        (
            vec![clean, "--model", "fixtures/decoders/gpt2", "--patch-method", "exact"],
            "attn-trace: --patch-method: it is how --patch computes its grid",
        ),
        (
            [
                &[clean, "--model", "fixtures/decoders/gpt2", "--patch-method", "attribution", "--knockout", "0:1->0"]
                    [..],
                &sweep,
            ]
            .concat(),
            "attn-trace: --patch-method attribution: --knockout",
        ),
        (
            [
                &[clean, "--model", "fixtures/decoders/gpt2", "--patch-method", "attribution", "--arithmetic", "ggml"]
                    [..],
                &sweep,
            ]
            .concat(),
            "attn-trace: --patch-method attribution: --arithmetic ggml",
        ),
        (
            [&[clean, "--model", "fixtures/decoders/mixtral", "--patch-method", "attribution"][..], &sweep].concat(),
            "attn-trace: --patch-method attribution: a mixture of experts",
        ),
        (
            [&[clean, "--model", "fixtures/decoders/gpt2", "--patch-method", "gradient"][..], &sweep].concat(),
            "attn-trace: invalid value 'gradient' for '--patch-method",
        ),
    ];
    for (args, want) in cases {
        let err = refused(&args, want);
        assert!(err.starts_with(want), "{args:?}: {err}");
    }
}
