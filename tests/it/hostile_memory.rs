//! Hostile input, round four (issue 48), class 1: the memory estimate bounds the real peak, and a
//! run whose output would be enormous is refused up front with its size. The estimate itself is
//! measured against `/usr/bin/time` by `tests/bench/bench_memory.py` (BENCHMARKS.md); these
//! tests assert only what cannot depend on the machine's speed: exit codes, one stderr line, an
//! empty stdout, and that the refusals come before any work (a million layers would take
//! minutes to compute).

use crate::common::{cmd, refused, refused_output};

const SHOES: &str = "my shoes are small";

/// A million toy layers: every step as tables or JSON would be tens of gigabytes of text;
/// refused at once with the size and the flags that narrow it, whatever the machine's memory
/// (the output is weighed before the memory).
#[test]
fn a_million_layers_are_refused_with_their_output_size() {
    for format in ["table", "json", "jsonl", "heatmap"] {
        let args = [SHOES, "--layers", "1000000", "--format", format];
        let err = refused(&args, "this run would print about");
        assert!(err.contains(" GiB (") && err.contains("--max-output"), "{format}: {err}");
        assert!(err.contains("--steps, --layer or --head"), "{format}: names the flags that narrow it: {err}");
    }
}

/// `--max-output` holds for any run, streamed JSON Lines included (refused before its first
/// line), and for a batch as a whole.
#[test]
fn the_output_cap_holds_for_small_caps_and_streams() {
    refused(&[SHOES, "--max-output", "1KiB"], "above --max-output's 1.0 KiB");
    refused(&[SHOES, "--max-output", "1KiB", "--format", "jsonl"], "above --max-output's 1.0 KiB");
    refused(&[SHOES, "my feet are big", "more words here", "--max-output", "20KiB"], "--max-output");
    // Sizes as --max-memory takes them; `none` lifts the cap.
    refused(&[SHOES, "--max-output", "lots"], "--max-output: \"lots\" is not a size");
    let out = cmd().args([SHOES, "--max-output", "none", "--layers", "3"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = cmd().args([SHOES, "--max-output", "2MiB", "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Once the output is narrowed, the memory estimate decides: a million layers hold a million
/// layers' parameters, refused under a cap by the estimate's size (before any is drawn).
#[test]
fn a_million_layers_narrowed_are_weighed_by_memory() {
    let args = [SHOES, "--layers", "1000000", "--steps", "none", "--max-memory", "1GiB"];
    let err = refused(&args, "this run needs about");
    assert!(err.contains("GiB, above the cap of 1.0 GiB"), "{err}");
    let args = [SHOES, "--layers", "1000000", "--steps", "weights", "--layer", "0", "--max-memory", "1GiB"];
    refused(&args, "this run needs about");
}

/// `--timings` prints the estimate the run was checked against beside the measured peak, and
/// the refusal under `--max-memory` names the same figure.
#[test]
fn timings_print_the_estimate_beside_the_peak() {
    let out = cmd().args([SHOES, "--layers", "2", "--timings"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let line = err.lines().find(|l| l.contains("peak resident memory")).unwrap_or_else(|| panic!("{err}"));
    let estimate =
        line.split("(estimated ").nth(1).and_then(|r| r.split(')').next()).unwrap_or_else(|| panic!("{line}"));
    let out = cmd().args([SHOES, "--layers", "2", "--max-memory", "1KiB"]).output().unwrap();
    let refusal = refused_output(&out, "--max-memory 1KiB", "this run needs about");
    assert!(refusal.contains(&format!("about {estimate}, above")), "{estimate} in {refusal}");
}
