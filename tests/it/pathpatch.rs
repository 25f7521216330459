//! Path patching (`--patch-path`) against hand-written PyTorch path patching with hooks on
//! transformers' own modules (fixtures/oracle/pathpatch, made by
//! fixtures/oracle/pathpatch_oracle.py): GPT-2 and a Llama with grouped-query attention,
//! receivers `logits` and heads' q, k and v (a grouped key or value for one query head of its
//! group). Plus the refusals.

use crate::common::*;
use crate::patching::{assert_sweep_matches, oracle_cases, rows};

const CLEAN: &str = "my shoes are small, my feet are";
const SWEEP: [&str; 5] = ["--patch", "my shoes are big, my feet are", "--metric", " big", " small"];

#[test]
fn path_patching_matches_pytorch_hooks() {
    let (mut n, mut worst) = (0, 0f64);
    for (name, case, p) in oracle_cases("pathpatch") {
        assert_eq!(p["method"], "path", "{name}");
        assert_eq!(p["receivers"], case["receivers"], "{name}");
        // Path patching's senders are heads.
        assert!(rows(&case).iter().all(|r| r.unit == "head"), "{name}: a row without a head");
        // Both sides compute in float32; metrics (logit differences of 0.2–2) and effects
        // (their changes over clean − corrupted, 0.10 and 0.26 here) to 1e-4 absolute.
        worst = worst.max(assert_sweep_matches(&name, &p, &case));
        n += 1;
    }
    assert_eq!(n, 7, "path patching fixtures");
    eprintln!("path patching: largest difference from the oracle {worst:e}");
}

#[test]
fn the_table_and_heatmap_name_the_receivers() {
    let out = cmd()
        .current_dir(root())
        .args([CLEAN, "--model", "fixtures/decoders/gpt2"])
        .args(SWEEP)
        .args(["--patch-path", "1.1:q", "--steps", "tokens", "--width", "200"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("path patching → 1.1:q: each earlier head's output"), "{text}");
    let out = cmd()
        .current_dir(root())
        .args([CLEAN, "--model", "fixtures/decoders/gpt2"])
        .args(SWEEP)
        .args(["--patch-path", "logits", "--format", "heatmap", "--color", "never"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("path patching → logits"), "{text}");
}

#[test]
fn what_path_patching_cannot_do_is_refused() {
    let gpt2 = [CLEAN, "--model", "fixtures/decoders/gpt2"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { [&gpt2[..], &SWEEP, extra].concat() };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![CLEAN, "--model", "fixtures/decoders/gpt2", "--patch-path", "logits"],
            "attn-trace: --patch-path: it is how --patch",
        ),
        (with(&["--patch-path", "5.0:q"]), "attn-trace: --patch-path: the model has no head 5.0"),
        (with(&["--patch-path", "1.4:q"]), "attn-trace: --patch-path: the model has no head 1.4"),
        (with(&["--patch-path", "0.1:q"]), "attn-trace: --patch-path: a receiver in layer 0"),
        (with(&["--patch-path", "1.1:x"]), "attn-trace: --patch-path: \"1.1:x\": the input after ':' is q, k or v"),
        (with(&["--patch-path", "1.1"]), "attn-trace: --patch-path: \"1.1\" is not resid, logits"),
        (
            with(&["--patch-path", "logits", "--patch-method", "attribution"]),
            "attn-trace: --patch-path: path patching runs exactly",
        ),
        (
            with(&["--patch-path", "logits", "--patch-what", "resid"]),
            "attn-trace: --patch-path: path patching's senders are heads",
        ),
        (
            with(&["--patch-path", "logits", "--arithmetic", "ggml"]),
            "attn-trace: --patch-path: it takes a head's output",
        ),
        (
            vec![
                "my shoes are small, my feet are big.",
                "--model",
                "fixtures/tiny-bert",
                "--patch",
                "my shoes are big, my feet are small.",
                "--patch-path",
                "logits",
            ],
            "attn-trace: --patch-path: a post-norm block",
        ),
    ];
    for (args, want) in cases {
        let err = refused(&args, want);
        assert!(err.starts_with(want), "{args:?}: {err}");
    }
}
