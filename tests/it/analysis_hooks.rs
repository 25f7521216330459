//! The analyses that read the pass through the hook port (`analysis/attribute/`,
//! `analysis/lens.rs`) change nothing it computes: every step of a run with `--attribute` or
//! `--lens` is the plain run's, bit for bit and in the same order.

use crate::common::{steps, trace_json};

const S: &str = "the cat sat on the mat";

fn ids(doc: &serde_json::Value) -> Vec<String> {
    doc["steps"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_string()).collect()
}

/// The run's steps with `extra` flags against the plain run's, and the extra steps' ids.
fn same_steps_with(base: &[&str], extra: &[&str]) -> Vec<String> {
    let plain = trace_json(base);
    let args: Vec<&str> = base.iter().chain(extra).copied().collect();
    let read = trace_json(&args);
    let (plain_steps, mut read_steps) = (steps(&plain), steps(&read));
    let added: Vec<String> = read_steps.keys().filter(|id| !plain_steps.contains_key(*id)).cloned().collect();
    read_steps.retain(|id, _| plain_steps.contains_key(id));
    assert_eq!(plain_steps, read_steps, "{extra:?} changed a step");
    assert_eq!(ids(&plain), ids(&read)[..ids(&plain).len()], "{extra:?} moved a step");
    added
}

#[test]
fn attribution_and_the_lens_read_the_pass_without_changing_it() {
    let toy = [S, "--causal", "--lm-head", "own", "--heads", "2", "--steps", "all"];
    let only_its_own = |added: Vec<String>| added.iter().all(|id| id.starts_with("attribution."));
    assert!(only_its_own(same_steps_with(&toy, &["--attribute"])));
    assert!(same_steps_with(&toy, &["--lens"]).is_empty());
    let gpt2 = crate::common::root().join("fixtures/decoders/gpt2");
    let gpt2 = ["my shoes are small, my feet are", "--model", gpt2.to_str().unwrap(), "--steps", "all"];
    assert!(only_its_own(same_steps_with(&gpt2, &["--attribute", " big", " small", "--lens"])));
}
