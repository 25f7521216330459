//! `--check` (issue 47, item 1): every real model either is recomputed by an independent
//! implementation (candle-transformers' own model code and loaders) and compared, or is
//! refused in one line before anything is computed; it never ends a run unchecked.

use crate::common::*;
use attn_trace::cli::{Cli, Env};
use attn_trace::settings::Settings;
use attn_trace::sources::check::{self, Ours};
use clap::Parser;
use serde_json::Value;

const S: &str = "my shoes are small";

/// Runs `--check --format json` and returns the `check` object (asserting exit 0 and the one
/// `check: ok` line).
fn checked(args: &[&str]) -> Value {
    let out = cmd().current_dir(root()).args(args).args(["--check", "--format", "json"]).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{args:?}: {stderr}");
    let line =
        stderr.lines().find(|l| l.contains("check:")).unwrap_or_else(|| panic!("{args:?}: no check line: {stderr}"));
    assert!(line.starts_with("attn-trace: check: ok: "), "{line}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::export::assert_valid(&format!("{args:?}"), &doc);
    doc["check"].clone()
}

#[test]
fn hugging_face_decoders_agree_with_candle_transformers() {
    // (folder, whether candle's implementation exposes the final hidden states too)
    let folders = [
        ("llama-gqa", false),
        ("llama-bf16", false),
        ("llama-f16", false),
        ("llama-bin", false),
        ("llama-sharded", false),
        ("llama-rope-llama3", false),
        ("mixtral", false),
        ("phi3", false),
        ("qwen2", true),
        ("qwen3", true),
        ("qwen3_moe", false),
    ];
    for (name, hidden) in folders {
        let dir = format!("fixtures/decoders/{name}");
        let c = checked(&[S, "--model", &dir, "--steps", "tokens"]);
        assert_eq!(c["ok"], true, "{name}: {c}");
        assert_eq!(c["compared"], "logits", "{name}");
        assert!(c["reference"].as_str().unwrap().starts_with("candle-transformers"), "{name}: {c}");
        // Measured 1.2e-6 to 8.1e-6: the same arithmetic summed in another order.
        let d = c["max_abs_diff"].as_f64().unwrap();
        assert!(d < 5e-5, "{name}: {d}");
        assert_eq!(c["tolerance"], 1e-3, "{name}: a language model's default");
        assert_eq!(c["shape"], serde_json::json!([416]), "{name}: the last position's logits");
        if hidden {
            assert_eq!(c["also"][0]["compared"], "output", "{name}: {c}");
            assert!(c["also"][0]["max_abs_diff"].as_f64().unwrap() < 5e-5, "{name}: {c}");
        } else {
            assert!(c.get("also").is_none(), "{name}: {c}");
        }
    }
}

#[test]
fn gguf_files_agree_with_candle_transformers_quantized_models() {
    for (file, module) in [
        ("fixtures/gguf/tiny-qwen2-f32.gguf", "quantized_qwen2"),
        (".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "quantized_llama"),
        (".cache/models/smollm2/SmolLM2-135M-Instruct.F32.gguf", "quantized_llama"),
    ] {
        assert!(root().join(file).is_file(), "{file}: run tests/fetch-smollm2.sh");
        let c = checked(&["The capital of France is", "--model", file, "--steps", "tokens"]);
        assert!(c["reference"].as_str().unwrap().ends_with(module), "{file}: {c}");
        // Measured: SmolLM2 3.2e-5 (Q4_1 and F32: both sides dequantize the same blocks).
        let d = c["max_abs_diff"].as_f64().unwrap();
        assert!(d < 2e-4, "{file}: {d}");
        assert!(c["reference_arithmetic"].as_str().unwrap().contains("dequantized"), "{c}");
    }
}

#[test]
fn a_difference_above_the_tolerance_fails_after_the_output() {
    for model in ["fixtures/decoders/qwen3", "fixtures/gguf/tiny-qwen2-f32.gguf"] {
        let out =
            cmd().current_dir(root()).args([S, "--model", model, "--check", "--check-tol", "0"]).output().unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{model}: {stderr}");
        let last = stderr.lines().last().unwrap();
        assert!(last.starts_with("attn-trace: check: failed: max |attn-trace − candle-transformers"), "{stderr}");
        assert!(stderr.lines().all(|l| l == last || l.starts_with("attn-trace: note: ")), "{stderr}");
        assert!(!out.stdout.is_empty(), "the trace is still written");
    }
}

/// A deliberately broken weight on attn-trace's side (the final norm's, scaled by 1.01)
/// is caught: the reference reads the checkpoint itself.
#[test]
fn a_broken_weight_fails_the_check() {
    for model in ["fixtures/decoders/qwen3", "fixtures/decoders/llama-gqa"] {
        let args = ["attn-trace", S, "--model", model, "--steps", "tokens"];
        let cli = Cli::try_parse_from(args.iter().map(|a| a.to_string())).unwrap();
        let settings = Settings::from_cli(cli, &Env::default()).unwrap();
        let (loaded, source, plan) = attn_trace::prepare(&settings).unwrap();
        let mut params = source.params(&loaded).unwrap();
        let run = |params: &attn_trace::params::Params| {
            let mut rec =
                attn_trace::trace::Recorder::new(loaded.tokens.clone(), loaded.cfg.clone(), plan.record.clone());
            let output = attn_trace::model::forward(
                &loaded.cfg,
                params,
                &loaded.input,
                &mut attn_trace::hook::Hooks::new(&mut rec),
            )
            .unwrap();
            let head = attn_trace::model::head::Unembed::of(&loaded.cfg, params).unwrap();
            let n = output.dim(0).unwrap();
            let logits = attn_trace::model::unembed::logits(
                &loaded.cfg,
                params,
                Some(&head),
                &output.narrow(0, n - 1, 1).unwrap(),
            )
            .unwrap()
            .unwrap()
            .flatten_all()
            .unwrap();
            let reference = check::reference(&loaded.cfg, false, loaded.tokens.len()).unwrap();
            let ours = Ours { output: &output, logits: Some(&logits) };
            check::run(reference, &loaded.cfg, None, &loaded.input, &ours, 1e-3).unwrap()
        };
        assert!(run(&params).ok(), "{model}: the intact weights pass");
        let norm = params.final_norm.as_mut().unwrap();
        norm.weight = (&norm.weight * 1.01).unwrap();
        let broken = run(&params);
        assert!(!broken.ok(), "{model}: {}", broken.line());
        assert!(broken.diffs[0].max_abs > 1e-2, "{model}: {}", broken.line());
    }
}

#[test]
fn models_without_an_independent_implementation_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (&[S], "--check: it recomputes a real model"),
        (&[S, "--model", "fixtures/decoders/gpt2"], "no model for model_type \"gpt2\""),
        (&[S, "--model", "fixtures/decoders/gpt_neox"], "no model for model_type \"gpt_neox\""),
        (&[S, "--model", "fixtures/gguf/tiny-gemma2-f32.gguf"], "GGUF architecture \"gemma2\""),
        (&[S, "--model", "fixtures/gguf/tiny-qwen2moe-f32.gguf"], "GGUF architecture \"qwen2moe\""),
        // Where candle's model is known to compute otherwise than transformers.
        (&[S, "--model", "fixtures/decoders/mistral"], "sliding window"),
        (&[S, "--model", "fixtures/decoders/gemma2"], "sliding window"),
        (&[S, "--model", "fixtures/decoders/gemma3"], "query_pre_attn_scalar"),
        (&[S, "--model", "fixtures/decoders/llama-tied"], "attention_bias"),
        (&[S, "--model", "fixtures/decoders/phi3-partial"], "partial_rotary_factor"),
        (&[S, "--model", "fixtures/decoders/phi3-longrope"], "rope_scaling"),
        (&[S, "--model", "fixtures/decoders/qwen2_moe"], "lm_head.weight"),
        (&[S, "--model", "fixtures/decoders/llama-rope-linear"], "linear"),
        (&[S, "--model", "fixtures/seq2seq/t5"], "--check"),
        // Runs that are not the checkpoint's own forward pass.
        (&[S, "--model", "fixtures/gguf/tiny-qwen2-f32.gguf", "--arithmetic", "ggml"], "--arithmetic ggml"),
        (&[S, "--model", "fixtures/decoders/qwen3", "--generate", "2"], "--generate"),
        (&[S, "--model", "fixtures/decoders/qwen3", "--ablate", "0.1"], "intervention"),
        (&[S, "--model", "fixtures/decoders/qwen3", "--knockout", "0:2->1"], "intervention"),
    ];
    for (args, want) in cases {
        let args: Vec<&str> = args.iter().copied().chain(["--check"]).collect();
        refused(&args, want);
    }
}
