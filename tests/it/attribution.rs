//! Direct logit attribution (`--attribute ANSWER [FOIL]`, `--at`) against a hand-written
//! PyTorch decomposition on transformers' own modules (fixtures/oracle/attribution, made by
//! fixtures/oracle/attribution_oracle.py): GPT-2 (LayerNorm, biases), a Llama with grouped-query
//! attention (RMSNorm), Mixtral and Qwen2-MoE (experts, a shared expert), Gemma 2 (sandwich
//! norms, the final soft-cap) and a BertForMaskedLM (post-norm, the masked-LM head). Plus the
//! sum check on every language-model fixture and SmolLM2's GGUF, the per-head split by source,
//! the outputs, and the refusals.

use crate::common::*;
use serde_json::Value;

/// Runs a command line with `--format json` (showing only the tokens' step unless `steps`)
/// and returns the document.
fn document(args: &[&str], steps: &str) -> Value {
    let out = cmd().current_dir(root()).args(args).args(["--steps", steps, "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The document's `attribution` object.
fn attribution(args: &[&str]) -> Value {
    document(args, "tokens")["attribution"].clone()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// |total − logit| ≤ 1e-5 · |logit|: the sum check.
fn sum_holds(a: &Value, what: &str) {
    let (total, logit) = (f(&a["total"]), f(&a["logit"]));
    let error = (total - logit).abs() / logit.abs().max(1e-30);
    assert!(error <= 1e-5, "{what}: terms add up to {total}, the logit is {logit} ({error:e} relative)");
    assert!((f(&a["relative_error"]) - error).abs() <= 1e-12, "{what}: relative_error");
}

#[test]
fn every_term_and_source_matches_the_pytorch_oracle() {
    let dir = root().join("fixtures/oracle/attribution");
    let mut names = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let case: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = case["case"].as_str().unwrap().to_string();
        let args: Vec<&str> = case["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        let a = attribution(&args);
        assert_eq!(a["position"], case["position"], "{name}");
        assert_eq!(a["answer"]["id"], case["answer"], "{name}");
        assert_eq!(a["foil"].get("id").cloned().unwrap_or(Value::Null), case["foil"], "{name}");
        // Every term, by id: the same set, each within 1e-5 (both sides compute the terms in
        // float64 from float32 activations; the activations themselves differ in the last bits).
        let ours: Vec<(&str, f64)> =
            a["terms"].as_array().unwrap().iter().map(|t| (t["id"].as_str().unwrap(), f(&t["value"]))).collect();
        let want: Vec<(&str, f64)> =
            case["terms"].as_array().unwrap().iter().map(|t| (t["id"].as_str().unwrap(), f(&t["value"]))).collect();
        let (mut o, mut w): (Vec<&str>, Vec<&str>) =
            (ours.iter().map(|t| t.0).collect(), want.iter().map(|t| t.0).collect());
        o.sort_unstable();
        w.sort_unstable();
        assert_eq!(o, w, "{name}: the terms");
        for (id, v) in &want {
            let got = ours.iter().find(|t| t.0 == *id).unwrap().1;
            assert!((got - v).abs() <= 1e-5, "{name} {id}: {got} vs {v}");
        }
        let (got, want) = (flat(&a["sources"]["values"]), flat(&case["sources"]));
        assert_eq!(got.len(), want.len(), "{name}: sources");
        for (i, (x, y)) in got.iter().zip(&want).enumerate() {
            assert!((x - y).abs() <= 1e-5, "{name} source {i}: {x} vs {y}");
        }
        // The model's own logit difference is transformers' (before Gemma 2's cap), and the
        // terms add up to it.
        assert!((f(&a["logit"]) - f(&case["logit"])).abs() <= 1e-5, "{name}: logit");
        sum_holds(&a, &name);
        if let Some(capped) = case.get("capped") {
            assert!((f(&a["capped"]) - f(capped)).abs() <= 1e-5, "{name}: capped");
        }
        names.push(name);
    }
    names.sort();
    let kinds = ["gemma2", "gpt2", "llama-gqa", "mixtral", "qwen2_moe", "tiny-bert-mlm"];
    for k in kinds {
        assert!(names.iter().any(|n| n == k), "no {k} fixture in {names:?}");
    }
}

/// Every language-model fixture: the terms add up to the logit difference, and each head's
/// sources to its term, also with an ablated (mean) head and a knocked-out edge.
#[test]
fn the_sum_check_holds_on_every_family_and_sources_add_up_to_their_head() {
    let families = [
        "gpt2",
        "llama-gqa",
        "llama-tied",
        "mistral",
        "qwen2",
        "qwen3",
        "qwen3_moe",
        "mixtral",
        "qwen2_moe",
        "gemma2",
        "gemma3",
        "gpt_neox",
        "gpt_neox-seq",
        "phi3",
        "phi3-partial",
    ];
    let mut runs: Vec<Vec<String>> =
        families.iter().map(|m| vec![format!("fixtures/decoders/{m}"), " big".into(), " small".into()]).collect();
    let extra = ["--ablate", "1.2", "--ablate-mode", "mean", "--knockout", "1.0:6->2"];
    runs.push(["fixtures/decoders/llama-gqa", " big", " small"].iter().chain(&extra).map(|s| s.to_string()).collect());
    for run in &runs {
        let mut args = vec!["my shoes are small, my feet are", "--model", &run[0], "--attribute", &run[1], &run[2]];
        args.extend(run[3..].iter().map(String::as_str));
        let a = attribution(&args);
        sum_holds(&a, &run.join(" "));
        let shape: Vec<usize> =
            a["sources"]["shape"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
        let sources = flat(&a["sources"]["values"]);
        for t in a["terms"].as_array().unwrap().iter().filter(|t| t["name"] == "attn.head") {
            let (l, h) = (t["layer"].as_u64().unwrap() as usize, t["index"].as_u64().unwrap() as usize);
            let start = (l * shape[1] + h) * shape[2];
            let sum: f64 = sources[start..start + shape[2]].iter().sum();
            assert!(
                (sum - f(&t["value"])).abs() <= 1e-5,
                "{run:?} layer {l} head {h}: sources {sum} vs {}",
                t["value"]
            );
        }
    }
}

/// SmolLM2-135M as GGUF (`tests/fetch-smollm2.sh`): the terms add up to " Paris" − " London"
/// after "The capital of France is", in both of its files.
#[test]
fn smollm2_gguf_sum_check() {
    let dir = root().join(".cache/models/smollm2");
    let files = ["SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.F32.gguf"];
    let present: Vec<String> =
        files.iter().map(|f| dir.join(f)).filter(|p| p.exists()).map(|p| p.display().to_string()).collect();
    if present.is_empty() {
        eprintln!("skipped: SmolLM2's GGUF is not in .cache/models/smollm2 (bash tests/fetch-smollm2.sh)");
        return;
    }
    for m in &present {
        let a = attribution(&["The capital of France is", "--model", m, "--attribute", " Paris", " London"]);
        sum_holds(&a, m);
        assert_eq!(
            a["terms"].as_array().unwrap().len(),
            1 + 30 * (9 + 1),
            "{m}: embed.token, 9 heads and an FFN a layer"
        );
        assert!(f(&a["logit"]) > 1.0, "{m}: Paris over London");
    }
}

/// The steps `attribution.heads` [layer, head] and `attribution.sources` [layer, head,
/// key_pos] carry the same numbers as the `attribution` object; the tables give the sum check
/// and the top rows; the heatmap draws the heads on a signed scale.
#[test]
fn steps_table_and_heatmap() {
    let base =
        ["my shoes are small, my feet are", "--model", "fixtures/decoders/gpt2", "--attribute", " big", " small"];
    let doc = document(&base, "attribution");
    crate::export::assert_valid("--attribute", &doc);
    let mlm = ["my [MASK] is small.", "--model", "fixtures/tiny-bert-mlm", "--attribute", "feet"];
    crate::export::assert_valid("--attribute on BERT", &document(&mlm, "all"));
    let gemma = ["my shoes are", "--model", "fixtures/decoders/gemma2", "--attribute", " big", " small"];
    crate::export::assert_valid("--attribute on Gemma 2", &document(&gemma, "tokens"));
    let steps: Vec<&Value> = doc["steps"].as_array().unwrap().iter().collect();
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert_eq!(steps[0]["id"], "attribution.heads");
    assert_eq!(steps[0]["dims"], serde_json::json!(["layer", "head"]));
    assert_eq!(steps[1]["dims"], serde_json::json!(["layer", "head", "key_pos"]));
    assert_eq!(steps[1]["shape"], doc["attribution"]["sources"]["shape"]);
    let heads = flat(&steps[0]["values"]);
    for t in doc["attribution"]["terms"].as_array().unwrap().iter().filter(|t| t["name"] == "attn.head") {
        let i = (t["layer"].as_u64().unwrap() * 4 + t["index"].as_u64().unwrap()) as usize;
        assert!((heads[i] - f(&t["value"])).abs() <= 1e-6 * (1.0 + heads[i].abs()));
    }
    let run = |extra: &[&str]| {
        let out = cmd().current_dir(root()).args(base).args(extra).args(["--color", "never"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let table = run(&["--steps", "tokens"]);
    assert!(table.contains("direct logit attribution of logit[·big] − logit[·small] at position 7 ·are"), "{table}");
    assert!(table.contains("sum of 17 terms") && table.contains("within 1e-5"), "{table}");
    assert!(table.contains("top 10 of 17 terms") && table.contains("top 10 of 64 sources"), "{table}");
    let heatmap = run(&["--format", "heatmap"]);
    assert!(heatmap.contains("direct logit attribution · layers × heads"), "{heatmap}");
    assert!(heatmap.contains("scale |value| 0"), "{heatmap}");
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("a.html");
    run(&["--steps", "tokens", "--html", page.to_str().unwrap()]);
    let page = std::fs::read_to_string(page).unwrap();
    assert!(page.contains("<h2>Direct logit attribution</h2>") && page.contains("-0.4387</td>"), "{page}");
}

/// Bad input: one line on stderr, exit 2, nothing on stdout.
#[test]
fn refusals() {
    let dec = "fixtures/decoders/gpt2";
    let cases: &[(&[&str], &str)] = &[
        (
            &["my shoes are small", "--model", dec, "--attribute", " enormousness", " small"],
            "\" enormousness\" is 10 tokens (· en or m o u s n es s), not one",
        ),
        (
            &["my shoes are small", "--model", dec, "--attribute", " small", " small"],
            "the foil \" small\" is the answer",
        ),
        (
            &["my shoes are small", "--model", dec, "--attribute", " big", "--at", "9"],
            "position 9 is past the last token",
        ),
        (&["my shoes are small", "--model", dec, "--attribute", " big", "--at", "feet"], "--at \"feet\""),
        (&["my shoes are small", "--model", dec, "--at", "1"], "--at: it is the position of --attribute"),
        (&["my shoes are small", "--model", dec, "--attribute", " big", "--format", "jsonl"], "--format jsonl"),
        (
            &["my shoes are small.", "--model", "fixtures/tiny-bert", "--attribute", "big"],
            "no language-model or masked-LM head",
        ),
        (&["my shoes are small.", "--model", "fixtures/tiny-bert-mlm", "--attribute", "big"], "the sentence has none"),
        (&["my shoes are small", "--attribute", "big"], "this encoder has no language-model or masked-LM head"),
        (&["my shoes are small", "--lm-head", "tied", "--attribute", "big"], "with a model's tokenizer (use --model)"),
        (&["my shoes are small", "--attention-only", "--attribute", "big"], "an attention module traced alone"),
    ];
    for (args, want) in cases {
        refused(args, want);
    }
}
