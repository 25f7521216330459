//! `--set STEP=FILE`: a step replaced by a saved tensor (a step of a saved trace, or a .npy),
//! and its refusals, each one line and exit 2.

use crate::common::*;
use std::path::Path;

/// A version-1 `.npy` of f32 values.
fn write_npy(path: &Path, shape: &[usize], values: &[f32]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    values.iter().for_each(|v| bytes.extend(v.to_le_bytes()));
    std::fs::write(path, bytes).unwrap();
}

/// The context saved from a run of another sentence makes this run's attn.out that run's, to
/// the bit: attn.out is the same linear map of the same context.
#[test]
fn a_set_context_gives_the_other_runs_attn_out() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("other.npz");
    let other = trace_json(&["x x y", "--save-trace", saved.to_str().unwrap()]);
    let set = format!("layers.0.attn.context={}", saved.to_str().unwrap());
    let this = trace_json(&["the cat sat", "--set", &set]);
    let plain = trace_json(&["the cat sat"]);
    let (so, st, sp) = (steps(&other), steps(&this), steps(&plain));
    assert_eq!(st["layers.0.attn.context"], so["layers.0.attn.context"]);
    assert_eq!(st["layers.0.attn.out"], so["layers.0.attn.out"]);
    // Before the set step nothing changes; it changes what comes after.
    assert_eq!(st["layers.0.attn.weights"], sp["layers.0.attn.weights"]);
    assert_ne!(st["layers.0.attn.out"], sp["layers.0.attn.out"]);
    let iv = &this["config"]["interventions"];
    assert_eq!(iv["set"][0]["step"], "layers.0.attn.context");
    assert_eq!(iv["set"][0]["file"], saved.to_str().unwrap());
    assert!(plain["config"].get("interventions").is_none(), "an unchanged run has no interventions");
    // The same values from a .npy.
    let (shape, values) = &so["layers.0.attn.context"];
    let npy = dir.path().join("context.npy");
    write_npy(&npy, shape, &values.iter().map(|&v| v as f32).collect::<Vec<_>>());
    let this = trace_json(&["the cat sat", "--set", &format!("layers.0.attn.context={}", npy.to_str().unwrap())]);
    assert_eq!(steps(&this)["layers.0.attn.out"], so["layers.0.attn.out"]);
}

#[test]
fn set_refuses_a_wrong_shape_an_unknown_step_and_nan() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("other.npz");
    trace_json(&["x x y", "--save-trace", saved.to_str().unwrap()]);
    let f = saved.to_str().unwrap();
    let e = refused(&["one two three four", "--set", &format!("layers.0.attn.context={f}")], "[1, 3, 4]");
    assert!(e.contains("[1, 4, 4]"), "{e}");
    let e = refused(&["the cat sat", "--set", &format!("layers.0.attn.nope={f}")], "no such step");
    assert!(e.contains("jq"), "names how to list the steps: {e}");
    // A step of the catalogue that the toy does not compute, or one recorded beside the port.
    refused(&["the cat sat", "--set", &format!("layers.0.attn.q_rot={f}")], "no such step");
    refused(&["the cat sat", "--set", &format!("layers.0.attn.mask={f}")], "no such step");
    refused(&["the cat sat", "--set", &format!("layers.3.attn.out={f}")], "no such step");
    refused(&["the cat sat", "--set", "layers.0.attn.out"], "not STEP=FILE");
    let nan = dir.path().join("nan.npy");
    write_npy(&nan, &[3, 4], &[f32::NAN; 12]);
    refused(&["the cat sat", "--set", &format!("layers.0.attn.out={}", nan.to_str().unwrap())], "NaN");
}
