//! Traces compared with the PyTorch oracle (fixtures/oracle): for every case, PyTorch 2.5.1
//! drew the weights with torch.manual_seed and standard modules and ran the forward pass with
//! nn.Linear, nn.LayerNorm and F.softmax; attn-trace, run with the case's arguments, must agree
//! on every step within the tolerance below. This checks the torch-compatible initialisation
//! and the forward pass together, against PyTorch itself.

use crate::common::*;
use serde_json::Value;

/// f32 throughout; candle and PyTorch sum in different orders.
const ATOL: f64 = 1e-5;
const RTOL: f64 = 1e-5;

#[test]
fn oracle_cases_match_pytorch() {
    let dir = root().join("fixtures/oracle/cases");
    let mut cases: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    cases.sort();
    assert!(cases.len() >= 20, "expected the oracle's case matrix in {}", dir.display());
    let mut oracle = Oracle::new("PyTorch", (ATOL, RTOL));
    for path in &cases {
        let case: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let name = case["name"].as_str().unwrap().to_string();
        let args: Vec<&str> = case["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        let doc = trace_json(&args);
        assert_eq!(doc["input"]["token_ids"], case["token_ids"], "{name}: token ids");
        oracle.compare(&name, &Want::steps(&case["steps"]), &steps(&doc));
    }
    oracle.finish(&format!("{} oracle cases", cases.len()));
}
