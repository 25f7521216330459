//! `--ablate STEP`: any step zeroed or replaced by its mean over positions. No transformers
//! oracle case (yet): checked by algebra on the trace's own numbers instead.

use crate::common::*;

/// Zeroing the toy's (post-norm) FFN output leaves the second residual sum equal to the first
/// sublayer's output, to the bit: x + 0 is x.
#[test]
fn a_zeroed_ffn_out_leaves_the_residual_sum_its_input() {
    let doc = trace_json(&["the cat sat", "--ablate", "layers.0.ffn.out"]);
    let s = steps(&doc);
    assert!(s["layers.0.ffn.out"].1.iter().all(|&v| v == 0.0));
    assert_eq!(s["layers.0.add_norm2.sum"], s["layers.0.add_norm1.out"]);
    let iv = &doc["config"]["interventions"];
    assert_eq!(iv["ablate_steps"], serde_json::json!(["layers.0.ffn.out"]));
    assert_eq!(iv["ablate_mode"], "zero");
}

/// Mean ablation: every position holds the step's mean over positions, from the same inputs.
#[test]
fn a_mean_ablated_step_holds_its_mean_over_positions() {
    let base = steps(&trace_json(&["the cat sat", "--steps", "layers.0.ffn.out"]));
    let mean = steps(&trace_json(&[
        "the cat sat",
        "--steps",
        "layers.0.ffn.out",
        "--ablate",
        "layers.0.ffn.out",
        "--ablate-mode",
        "mean",
    ]));
    let (shape, b) = &base["layers.0.ffn.out"];
    let (n, d) = (shape[0], shape[1]);
    let m = &mean["layers.0.ffn.out"].1;
    for j in 0..d {
        let avg = (0..n).map(|p| b[p * d + j]).sum::<f64>() / n as f64;
        (0..n).for_each(|p| assert!((m[p * d + j] - avg).abs() < 1e-6, "mean at {p},{j}"));
    }
}

#[test]
fn ablating_a_step_the_model_lacks_is_refused() {
    refused(&["the cat sat", "--ablate", "layers.3.ffn.out"], "no such step");
    refused(&["the cat sat", "--ablate", "layers.0.attn.q_rot"], "no such step");
}
