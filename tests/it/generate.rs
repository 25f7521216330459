//! Generation through a key/value cache computes what a full forward pass over the whole
//! generated sequence computes: every step of every decode step (q, k, v, their rotation,
//! scores, weights, context, the output projection, norms, FFN, experts, the last hidden
//! state) equals the same position's row of one pass over prompt + generated tokens, within
//! the families' oracle tolerances (weights 1e-5, other steps 1e-4), for the toy decoder and every decoder family fixture. transformers' own per-step
//! numbers are checked in `generate_oracle.rs`.

use attn_trace::cli::{Cli, Env};
use attn_trace::config::{Generate, Strategy};
use attn_trace::model::generate::generate;
use attn_trace::params::Input;
use attn_trace::settings::Settings;
use attn_trace::trace::{Recorder, Selection, Step, Trace, Values};
use clap::Parser;

/// The positions a step's rows stand for: the first `pos`-like dimension.
fn pos_dim(step: &Step) -> Option<usize> {
    step.dims.iter().position(|d| matches!(*d, "pos" | "query_pos"))
}

/// Generates `new` tokens greedily from `args`' model and prompt, then runs one full pass
/// over the prompt and every generated token but the last, and compares each decode step's
/// steps with that pass's row at the step's position.
fn cache_equals_full_pass(args: &[&str], new: usize) -> Gap {
    let cli = Cli::try_parse_from(std::iter::once("attn-trace").chain(args.iter().copied())).unwrap();
    let settings = Settings::from_cli(cli, &Env::default()).unwrap();
    let (loaded, source, _) = attn_trace::prepare(&settings).unwrap();
    let params = source.params(&loaded).unwrap();
    let cfg = &loaded.cfg;
    let how = Generate { max_new: new, stop_ids: Vec::new(), strategy: Strategy::Greedy };
    let all = Selection::default();
    let mut rec = Recorder::new(loaded.tokens.clone(), cfg.clone(), all.clone());
    let mut step_rec = |_: usize, _: u32| Recorder::new(vec!["x".into()], cfg.clone(), all.clone());
    let done = generate(
        cfg,
        &params,
        (&loaded.input, &how),
        (&mut attn_trace::hook::Hooks::new(&mut rec), &mut step_rec),
        &[],
    )
    .unwrap();
    assert_eq!(done.chosen.len(), new, "{args:?}: stopped early ({:?})", done.stop);
    let Input::Ids { ids, .. } = &loaded.input else { panic!("ids") };
    let n = ids.len();
    let mut full_ids = ids.clone();
    full_ids.extend(done.chosen[..new - 1].iter().map(|c| c.id));
    let full_input = Input::Ids { ids: full_ids.clone(), type_ids: None };
    let mut full_rec = Recorder::new(vec!["x".into(); full_ids.len()], cfg.clone(), all);
    attn_trace::model::forward(cfg, &params, &full_input, &mut attn_trace::hook::Hooks::new(&mut full_rec)).unwrap();
    let (full, _) = full_rec.finish();
    let mut gap = Gap::default();
    for (i, step_trace) in done.steps.iter().enumerate() {
        compare_step(args, step_trace, &full, n + i, &mut gap);
    }
    gap
}

/// The largest differences found: attention weights (absolute), every other step (relative
/// to 1 + |value|), and how many values were compared.
#[derive(Default, Debug)]
struct Gap {
    weights: f32,
    other: f32,
    compared: usize,
}

/// Compares decode step `trace` (one position, `at`) with `full`'s row `at` of every step:
/// attention weights within 1e-5, every other step within 1e-4 relative to 1 + |value| (the
/// families' oracle tolerances: a one-row matrix product sums in another order than a
/// many-row one, here as in PyTorch, and the difference grows through the layers).
fn compare_step(args: &[&str], trace: &Trace, full: &Trace, at: usize, gap: &mut Gap) {
    for s in &trace.steps {
        let (Values::F32(got), Some(d)) = (&s.values, pos_dim(s)) else { continue };
        let f = full.get(&s.id).unwrap_or_else(|| panic!("{args:?}: the full pass has no {}", s.id));
        let Values::F32(want) = &f.values else { panic!("{}", s.id) };
        // Row `at` of dimension d; a key dimension compares the keys the step has.
        let outer: usize = s.shape[..d].iter().product();
        let inner: usize = s.shape[d + 1..].iter().product();
        let full_inner: usize = f.shape[d + 1..].iter().product();
        let weights = s.name == "attn.weights";
        for o in 0..outer {
            for k in 0..inner {
                let g = got[o * inner + k];
                let w = want[(o * f.shape[d] + at) * full_inner + k];
                if g.is_infinite() && g == w {
                    continue;
                }
                let diff = if weights { (g - w).abs() } else { (g - w).abs() / (1.0 + w.abs()) };
                let (max, tol) = if weights { (&mut gap.weights, 1e-5) } else { (&mut gap.other, 1e-4) };
                *max = max.max(diff);
                assert!(diff <= tol, "{args:?}: {} at position {at}: cached {g} vs full pass {w}", s.id);
                gap.compared += 1;
            }
        }
    }
}

#[test]
fn the_toy_decoder_with_a_cache_equals_a_full_pass() {
    let args =
        ["my shoes are small, my feet are big.", "--causal", "--lm-head", "tied", "--heads", "2", "--max-len", "16"];
    let gap = cache_equals_full_pass(&args, 6);
    assert!(gap.compared > 500, "{gap:?}");
}

#[test]
fn every_decoder_family_with_a_cache_equals_a_full_pass() {
    let dir = common_root().join("fixtures/decoders");
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert!(names.len() >= 20, "{names:?}");
    for name in names {
        let model = dir.join(&name);
        let model = model.to_str().unwrap();
        // LongRoPE switches to its long factors for every position once the input is longer
        // than the original context (8 in both LongRoPE fixtures): a full pass then differs from the cached keys of
        // the shorter prompt, in transformers too, so its generation stays within 8 tokens.
        let (prompt, new) = if matches!(name.as_str(), "phi3-longrope" | "phi3-partial") {
            ("The capital", 3)
        } else {
            ("The capital of France is", 5)
        };
        let gap = cache_equals_full_pass(&[prompt, "--model", model], new);
        eprintln!("{name}: {gap:?}");
        assert!(gap.compared > 100, "{name}: {gap:?}");
    }
}

fn common_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
