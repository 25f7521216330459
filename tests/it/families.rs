//! The families of issue 30 against transformers (fixtures/oracle/families, made by
//! fixtures/oracle/family_oracle.py from the tiny random checkpoints in fixtures/decoders,
//! under transformers 4.46.3 or 4.51.0 as each fixture's made_by says): every step of every
//! layer, the tokens, and the top-1 next token at every position, for each family attn-trace
//! reads. A family it does not read yet must be refused in one line (exit 2), and is listed in
//! [`PENDING`]: adding a family makes that refusal fail until the family leaves the list, so
//! its fixtures are compared from then on.
//!
//! Tolerances as tests/it/decoders.rs: attention weights within 1e-5 absolute, every other
//! step within 1e-4 absolute plus 1e-4 relative.

use crate::common::*;
use serde_json::Value;

/// Families whose fixtures exist but which attn-trace does not read yet (issue 30).
pub const PENDING: &[&str] = &[];

/// Steps of the fixtures that are inputs of a step rather than steps (transformers' rotary
/// tables).
fn not_a_step(id: &str) -> bool {
    id.starts_with("rope.") || id.starts_with("rope_local.")
}

fn json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// attention weights within 1e-5 absolute; the chosen experts exactly (integers); every other
/// step 1e-4 plus 1e-4 relative.
fn tolerance(id: &str) -> (f64, f64) {
    if id.ends_with("attn.weights") {
        (1e-5, 0.0)
    } else if id.ends_with("ffn.router.chosen") {
        (0.0, 0.0)
    } else {
        (1e-4, 1e-4)
    }
}

/// Compares every step the fixture holds with attn-trace's trace of the same input.
fn check(oracle: &mut Oracle, name: &str, case: &Value, dir: &str) {
    let doc = trace_json(&[case["sentence"].as_str().unwrap(), "--model", dir, "--steps", "all"]);
    crate::export::assert_valid(name, &doc);
    assert_eq!(doc["input"]["tokens"], case["tokens"], "{name}: tokens");
    assert_eq!(doc["input"]["token_ids"], case["input_ids"], "{name}: ids");
    assert_eq!(doc["config"]["model"]["bos_added"], case["bos_added"], "{name}: BOS");
    rope_matches(name, &doc["config"], &case["config"]);
    let ours = steps(&doc);
    let mut want = Want::steps(&case["steps"]);
    want.retain(|w| !not_a_step(&w.id));
    let compared = oracle.compare(name, &want, &ours);
    assert!(compared.steps >= 20, "{name}: only {} steps compared", compared.steps);
    // Every layer's hidden state is a step of the fixture, so each was compared above.
    for id in case["hidden_states_steps"].as_array().unwrap() {
        assert!(ours.contains_key(id.as_str().unwrap()), "{name}: hidden state {id} not traced");
    }
    let top = doc["predictions"].as_array().unwrap_or_else(|| panic!("{name}: no predictions"));
    for (pos, want) in case["top_k"].as_array().unwrap().iter().enumerate() {
        let got = &top[pos]["top"];
        assert_eq!(got[0]["id"], want[0]["id"], "{name}: top-1 at position {pos}");
        for (g, w) in got.as_array().unwrap().iter().zip(want.as_array().unwrap()) {
            let (a, b) = (g["prob"].as_f64().unwrap(), w["prob"].as_f64().unwrap());
            assert!(close(a, b, 1e-5, 1e-4), "{name}: probability at {pos}: {a} vs {b}");
        }
    }
}

/// The rotary frequencies the trace says it used are transformers' for this input (LongRoPE's
/// short or long ones, as the fixture says), with the same scaling of cos and sin.
fn rope_matches(name: &str, ours: &Value, theirs: &Value) {
    let rope = &ours["rope"];
    let got: Vec<f64> = rope["inv_freq"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let want: Vec<f64> = theirs["rope_inv_freq"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(got.len(), want.len(), "{name}: config.rope.inv_freq");
    assert!(got.iter().zip(&want).all(|(a, b)| close(*a, *b, 0.0, 1e-6)), "{name}: {got:?} vs {want:?}");
    let scaling = rope["attention_scaling"].as_f64().unwrap_or(1.0);
    assert_eq!(scaling, theirs["rope_attention_scaling"].as_f64().unwrap(), "{name}: attention scaling");
    assert_eq!(rope["longrope"]["factors"], theirs["longrope"]["factor_used"], "{name}: LongRoPE's factors");
    let dims = rope["dims"].as_u64().unwrap_or(ours["d_k"].as_u64().unwrap());
    assert_eq!(Some(dims), theirs["rotary_dim"].as_u64(), "{name}: rotary width");
    assert_eq!(ours["parallel"].as_bool().unwrap_or(false), theirs["parallel_residual"] == true, "{name}: parallel");
}

#[test]
fn every_family_fixture_matches_transformers_or_is_refused_as_pending() {
    let folder = root().join("fixtures/oracle/families");
    let manifest = json(&folder.join("MANIFEST.json"));
    let listed = manifest["fixtures"].as_array().unwrap();
    let files = std::fs::read_dir(&folder).unwrap().filter(|e| {
        let f = e.as_ref().unwrap().file_name();
        f.to_string_lossy().ends_with(".json") && f != "MANIFEST.json"
    });
    assert_eq!(files.count(), listed.len(), "MANIFEST.json lists every fixture, and only those");
    let (mut checked, mut oracle) = (0, Oracle::new("transformers", tolerance("")).per_step(tolerance));
    for entry in listed {
        let name = entry["file"].as_str().unwrap();
        let case = json(&folder.join(name));
        let dir = root().join(case["model_dir"].as_str().unwrap());
        let model_type = json(&dir.join("config.json"))["model_type"].as_str().unwrap().to_string();
        if PENDING.contains(&model_type.as_str()) {
            // A family not read yet is refused in one line that names it and lists the supported ones.
            let err =
                refused(&["my shoes", "--model", dir.to_str().unwrap()], &format!("architecture \"{model_type}\""));
            assert!(err.contains("qwen3"), "{name}: {err}");
        } else {
            check(&mut oracle, name, &case, dir.to_str().unwrap());
            checked += 1;
        }
    }
    oracle.finish(&format!("{checked} family fixtures"));
    assert!(checked >= 2, "only {checked} family fixtures compared");
}
