//! A learner's first hour (issue 18, item 5): the flags and views a newcomer reaches for
//! first, as a newcomer would type them.

use crate::cli::assert_usage_error;
use crate::common::*;
use serde_json::Value;

const S: &str = "my shoes are small, my feet are big.";

fn step<'a>(doc: &'a Value, id: &str) -> Option<&'a Value> {
    doc["steps"].as_array().unwrap().iter().find(|s| s["id"] == id)
}

#[test]
fn layer_and_head_take_lists_and_ranges() {
    let model = [S, "--d-model", "8", "--heads", "4", "--layers", "4", "--steps", "weights"];
    let all = trace_json(&model);
    let some = trace_json(&[&model[..], &["--layer", "0,3", "--head", "1-2"]].concat());
    let ids: Vec<&str> = some["steps"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["layers.0.attn.weights", "layers.3.attn.weights"]);
    for l in [0, 3] {
        let id = format!("layers.{l}.attn.weights");
        let (got, full) = (step(&some, &id).unwrap(), step(&all, &id).unwrap());
        assert_eq!(got["heads"], serde_json::json!([1, 2]));
        assert_eq!(got["shape"], serde_json::json!([2, 8, 8]));
        assert_eq!(got["values"][0], full["values"][1]);
        assert_eq!(got["values"][1], full["values"][2]);
    }
    // A range and the list it spells select the same; repeats and order do not matter.
    let range = trace_json(&[&model[..], &["--layer", "1-3"]].concat());
    let list = trace_json(&[&model[..], &["--layer", "3,1,2,2"]].concat());
    assert_eq!(range["steps"], list["steps"]);
    assert_eq!(range["steps"].as_array().unwrap().len(), 3);
}

#[test]
fn bad_layer_and_head_lists_are_refused() {
    assert_usage_error(&[S, "--layer", "1-0"], "the range 1-0 runs backwards");
    assert_usage_error(&[S, "--layer", "zero"], "\"zero\" is not a number");
    assert_usage_error(&[S, "--head", "0,"], "is not a number");
    assert_usage_error(&[S, "--layers", "2", "--layer", "0,2"], "--layer: layer 2 does not exist; the model has 2");
    assert_usage_error(&[S, "--heads", "2", "--head", "0-5"], "--head: head 2 does not exist");
    assert_usage_error(&[S, "--layers", "2", "--layer", "0,1", "--focus", "shoes"], "--focus: it shows one layer");
}
