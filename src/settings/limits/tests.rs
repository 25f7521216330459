//! The memory estimate's rules (`settings/limits.rs`).

use super::estimate::layer_copies;
use super::*;
use crate::config::RunConfig;
use crate::trace::steps;

#[test]
fn layer_copies_count_what_the_selection_wants() {
    let ids = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
    let cases = [
        (Selection::default(), 6),
        (Selection { layer: Some(vec![1, 3, 3, 9]), ..Default::default() }, 2),
        (Selection { steps: ids(&["attn.weights"]), ..Default::default() }, 6),
        (Selection { steps: ids(&["attn.q"]), ..Default::default() }, 0),
        (
            Selection {
                steps: ids(&["layers.2.attn.weights", "layers.7.attn.weights", "layers.3.attn.q"]),
                ..Default::default()
            },
            1,
        ),
        (
            Selection {
                steps: ids(&["layers.2.attn.weights", "layers.4.attn.weights"]),
                layer: Some(vec![4]),
                head: None,
            },
            1,
        ),
    ];
    for (sel, want) in cases {
        let asked = (0..6).filter(|&l| sel.wants(&steps::layer_id(l, "attn.weights"), Some(l), "attn.weights")).count();
        assert_eq!((layer_copies(6, &sel, "attn.weights"), asked), (want, want), "{sel:?}");
    }
    assert_eq!(layer_copies(4_000_000_000, &Selection::default(), "attn.weights"), 4_000_000_000);
}

#[test]
fn auto_is_three_quarters_of_what_is_available() {
    assert_eq!(max_memory("auto", Some(8 << 30)).unwrap(), 6 << 30);
    assert_eq!(max_memory(" AUTO ", None).unwrap(), 2 << 30);
    assert_eq!(max_memory("512MiB", Some(8 << 30)).unwrap(), 512 << 20);
    assert!(max_memory("lots", None).is_err());
}

#[test]
fn sizes() {
    assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
    assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
    assert_eq!(parse_size("100").unwrap(), 100);
    assert!(parse_size("lots").is_err());
    assert_eq!(human(1536), "1.5 KiB");
}

/// A Mixtral 8x7B layer's eight experts are 5.6 GB in f32: the estimate holds two layers'
/// (the next is read while one runs), where a dense FFN of the expert width would be a
/// tenth of it.
#[test]
fn an_moe_layer_counts_every_expert() {
    let mut cfg =
        ModelConfig { d_model: 4096, heads: 32, d_k: 128, d_v: 128, d_ff: 14336, layers: 32, ..ModelConfig::toy() };
    let run = RunConfig { layer_at_a_time: true, ..Default::default() };
    let dense = estimate((&cfg, &run), 8, &Selection::default(), true);
    let x = crate::config::Experts { count: 8, top_k: 2, norm_topk_prob: true, d_ff: 14336, shared_d_ff: None };
    cfg.parts.experts = Some(x);
    let moe = estimate((&cfg, &run), 8, &Selection::default(), true);
    let experts = 2.0 * 8.0 * 3.0 * 4096.0 * 14336.0 * 4.0;
    assert!(moe - dense > experts * 0.9 && moe - dense < experts * 1.1, "{dense} {moe}");
}

/// A 7B's FFN over 8,192 positions: recording `ffn.act` counts every position's
/// `[pos, d_ff]` intermediates (twice over, 1.4 GB), recording the attention alone counts
/// one tile's (`config::tiles`), as `model/ffn.rs` then computes it.
#[test]
fn an_unrecorded_ffn_counts_one_tile() {
    let cfg =
        ModelConfig { d_model: 4096, heads: 32, d_k: 128, d_v: 128, d_ff: 11008, layers: 32, ..ModelConfig::toy() };
    let ids = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
    let n = 8192;
    let attn = estimate(
        (&cfg, &RunConfig::default()),
        n,
        &Selection { steps: ids(&["attn.context"]), ..Default::default() },
        true,
    );
    let both = estimate(
        (&cfg, &RunConfig::default()),
        n,
        &Selection { steps: ids(&["attn.context", "ffn.act"]), ..Default::default() },
        true,
    );
    let rows = cfg.ffn_rows(n) as f64;
    assert!(rows < n as f64 / 4.0, "{rows}");
    // Streamed, the largest recorded step is held: [pos, d_ff] instead of [head, pos, d_v];
    // and the whole FFN's working copies instead of one tile's.
    let step = 4.0 * (n as f64) * (11008.0 - 32.0 * 128.0);
    let working = 4.0 * 2.0 * 2.0 * (n as f64 - rows) * 11008.0;
    assert!((both - attn - step - working).abs() < 1.0, "{attn} {both} {step} {working}");
}

/// The toy model of `layers` layers of the default width, as `attn-trace "my shoes are small,
/// my feet are big." --layers L` runs it (8 tokens).
fn toy(layers: usize) -> ModelConfig {
    ModelConfig { layers, ..ModelConfig::toy() }
}

/// More layers, more positions or more recorded steps never make the estimate smaller.
#[test]
fn the_estimate_grows_with_the_run() {
    let every = Selection::default();
    let none = Selection { steps: Some(Default::default()), ..Default::default() };
    let mut last = 0.0;
    for layers in [1, 2, 10, 1000, 1_000_000] {
        let e = estimate((&toy(layers), &RunConfig::default()), 8, &every, false);
        assert!(e > last, "{layers} layers: {e} after {last}");
        assert!(
            e >= estimate((&toy(layers), &RunConfig::default()), 8, &none, false)
                && e >= estimate((&toy(layers), &RunConfig::default()), 8, &every, true)
        );
        last = e;
    }
    let cfg = ModelConfig { max_len: 4096, ..toy(2) };
    let sizes: Vec<f64> =
        [1, 10, 100, 1000, 4000].iter().map(|&n| estimate((&cfg, &RunConfig::default()), n, &every, false)).collect();
    assert!(sizes.windows(2).all(|w| w[0] < w[1]), "{sizes:?}");
}

/// Never below a peak measured by tests/bench/bench_memory.py (BENCHMARKS.md, "The memory
/// estimate against the measured peak"): the toy model's default run peaks at 10.8 MiB, most
/// of it the program itself, and 20,000 layers of it at 280 MiB, most of it their 340,005
/// steps' bookkeeping. Figures, not timings: the same binary gives the same peak within a few
/// hundred KiB.
#[test]
fn the_estimate_is_not_below_recorded_peaks() {
    let mib = |layers: usize| {
        (estimate::BASELINE + estimate((&toy(layers), &RunConfig::default()), 8, &Selection::default(), false))
            / 1048576.0
    };
    assert!(mib(1) >= 10.8, "{}", mib(1));
    assert!((280.0..=1.25 * 280.0).contains(&mib(20_000)), "{}", mib(20_000));
}
