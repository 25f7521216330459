//! Why this generated token (`--generate N --attribute [ANSWER [FOIL]] --at gen:K|last`): the
//! attribution at the position where a generated token was chosen, computed by a teacher-forced
//! pass over the prompt and the tokens generated before it, and `--attribute` without an answer
//! (the token the model chose against its runner-up), on SmolLM2's GGUF.

use crate::common::*;
use serde_json::Value;

const MODEL: &str = ".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
const PROMPT: &str = "The capital of France is";

/// The JSON document of `PROMPT` on SmolLM2 with `args`, showing only the tokens.
fn document(args: &[&str]) -> Value {
    let base = [PROMPT, "--model", MODEL, "--steps", "tokens", "--format", "json", "--top-k", "3"];
    let out = cmd().current_dir(root()).args(base).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn id(v: &Value) -> u64 {
    v["id"].as_u64().unwrap_or_else(|| panic!("no id: {v}"))
}

/// The terms sum to the model's own logit difference.
fn sum_holds(a: &Value, what: &str) {
    let (total, logit) = (f(&a["total"]), f(&a["logit"]));
    assert!((total - logit).abs() <= 1e-5 * logit.abs().max(1e-30), "{what}: terms {total}, logit {logit}");
}

/// Every term of `a` equals `b`'s, in the same order, within 1e-4.
fn same_terms(a: &Value, b: &Value, what: &str) {
    let (ta, tb) = (a["terms"].as_array().unwrap(), b["terms"].as_array().unwrap());
    assert_eq!(ta.len(), tb.len(), "{what}: term count");
    for (x, y) in ta.iter().zip(tb) {
        assert_eq!(x["id"], y["id"], "{what}");
        assert!(
            (f(&x["value"]) - f(&y["value"])).abs() <= 1e-4,
            "{what}: {} {} vs {}",
            x["id"],
            x["value"],
            y["value"]
        );
    }
}

#[test]
fn a_generated_token_is_attributed_against_its_runner_up_where_it_was_chosen() {
    let generation = document(&["--generate", "3"])["generation"].clone();
    let tokens = generation["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 3);
    for (k, at) in [(0, "gen:0"), (1, "gen:1"), (2, "gen:2"), (2, "last")] {
        let a = document(&["--generate", "3", "--attribute", "--at", at])["attribution"].clone();
        let what = format!("--at {at}");
        // Greedy: the chosen token is the step's most probable, the runner-up its second.
        let (chosen, runner_up) = (&tokens[k], &tokens[k]["candidates"][1]);
        assert_eq!(id(&a["answer"]), id(chosen), "{what}: the answer is the generated token");
        assert_eq!(id(&a["foil"]), id(runner_up), "{what}: the foil is the runner-up");
        assert_eq!(a["answer"]["text"], chosen["text"], "{what}: the answer is named");
        // Token k was chosen at the position before it (the prompt's last for k = 0), having
        // read the prompt and the k tokens generated before it.
        assert_eq!(a["position"], 4 + k, "{what}: position");
        assert_eq!(a["sources"]["shape"][2], 5 + k, "{what}: keys");
        sum_holds(&a, &what);
        // The teacher-forced pass's logit difference is the generation's own: the KV-cache
        // step's probabilities give log(p_chosen / p_runner_up).
        let from_generation = (f(&chosen["prob"]) / f(&runner_up["prob"])).ln();
        assert!((f(&a["logit"]) - from_generation).abs() <= 1e-3, "{what}: {} vs {from_generation}", a["logit"]);
        // Naming the same tokens gives the same terms.
        let (answer, foil) = (chosen["text"].as_str().unwrap(), runner_up["text"].as_str().unwrap());
        let named = document(&["--generate", "3", "--attribute", answer, foil, "--at", at])["attribution"].clone();
        same_terms(&a, &named, &format!("{what} named"));
    }
}

#[test]
fn the_first_generated_token_is_the_prompts_last_position() {
    let first = document(&["--generate", "3", "--attribute", "--at", "gen:0"])["attribution"].clone();
    let text = |x: &Value| x["text"].as_str().unwrap().to_string();
    let (answer, foil) = (text(&first["answer"]), text(&first["foil"]));
    assert_eq!(answer, " Paris");
    let plain = document(&["--attribute", &answer, &foil])["attribution"].clone();
    assert_eq!(plain["position"], 4);
    same_terms(&first, &plain, "gen:0 against a plain run");
    // With --generate and no --at, the answer-less attribution is the first written token's.
    let default = document(&["--generate", "3", "--attribute"])["attribution"].clone();
    assert_eq!(default["answer"], first["answer"]);
    assert_eq!(default["foil"], first["foil"]);
    same_terms(&first, &default, "gen:0 against --generate's default");
}

#[test]
fn a_toy_models_choice_is_named_by_its_own_words() {
    let doc =
        trace_json(&["the cat sat on the mat", "--causal", "--lm-head", "own", "--attribute", "--steps", "tokens"]);
    let (a, top) = (&doc["attribution"], &doc["predictions"][5]["top"]);
    assert_eq!(a["position"], 5);
    assert_eq!(id(&a["answer"]), id(&top[0]));
    assert_eq!(a["answer"]["token"], top[0]["token"], "the answer is named as the prediction is");
    assert!(a["answer"]["token"].is_string(), "{a}");
    sum_holds(a, "toy");
}

#[test]
fn attribute_alone_takes_the_top_prediction_against_the_runner_up() {
    for at in [None, Some("last"), Some("2")] {
        let mut args = vec!["--attribute"];
        args.extend(at.iter().flat_map(|a| ["--at", a]));
        let doc = document(&args);
        let a = &doc["attribution"];
        let position = at.map_or(4, |a| if a == "last" { 4 } else { 2 });
        assert_eq!(a["position"], position, "{at:?}");
        let top = &doc["predictions"][position]["top"];
        assert_eq!(id(&a["answer"]), id(&top[0]), "{at:?}: the answer is the top prediction");
        assert_eq!(id(&a["foil"]), id(&top[1]), "{at:?}: the foil is the runner-up");
        sum_holds(a, &format!("{at:?}"));
        let from_predictions = (f(&top[0]["prob"]) / f(&top[1]["prob"])).ln();
        assert!((f(&a["logit"]) - from_predictions).abs() <= 1e-3, "{at:?}: {} vs {from_predictions}", a["logit"]);
    }
}

#[test]
fn the_tables_label_generated_sources_from_the_generated_tokens() {
    let args =
        [PROMPT, "--model", MODEL, "--steps", "none", "--width", "200", "--generate", "3", "--attribute", "--at"];
    let out = cmd().current_dir(root()).args(args).arg("last").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    // The generated tokens are " Paris", ".", "\n": the last is chosen at position 6 ("."),
    // reading itself (a generated token) among its largest sources.
    assert!(text.contains("at position 6 ."), "{text}");
    assert!(text.contains("┆ 6 .  "), "{text}");
}

#[test]
fn a_generated_position_past_the_generation_is_refused() {
    let base = [PROMPT, "--model", MODEL, "--attribute", "--at"];
    let with = |at: &'static str, more: &[&'static str]| -> Vec<&'static str> {
        base.iter().copied().chain([at]).chain(more.iter().copied()).collect()
    };
    refused(&with("gen:9", &["--generate", "3"]), "--generate 3 writes at most 3 tokens");
    refused(&with("gen:0", &[]), "add --generate N");
    refused(&with("gen:x", &["--generate", "3"]), "K is not a number");
    // Known only once generated: the chat's answer ends at its end-of-sequence token.
    let chat = ["What is the capital of France?", "--model", MODEL, "--chat", "--generate", "30", "--quiet"];
    let line = refused(&[&chat[..], &["--attribute", "--at", "gen:29"]].concat(), "--at gen:29: the generation wrote ");
    assert!(line.contains("(it stopped: eos)"), "{line}");
}
