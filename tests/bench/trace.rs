//! In-process benchmarks (criterion): the forward pass and every renderer. Run:
//! `cargo bench --bench trace` (add a filter, e.g. `-- minilm`, for one group).
//!
//! - `seed000`: seed notebook 000's case: forward, PyTorch-compatible draws, and each format
//!   and view (table, JSON, JSON Lines, heatmap, `--focus --explain`, HTML, SVG).
//! - `d768_h12_n512`: d_model 768, 12 heads, 512 tokens: forward and JSON (207 MB).
//! - `minilm_n256`: all-MiniLM-L6-v2 at 256 tokens (needs `bash tests/fetch-model.sh`;
//!   skipped with a note otherwise): forward, JSON (298 MB) and the per-layer summary table.
//!
//! Parameters are drawn or loaded once outside the timed loop, so `forward` times only the
//! traced math (including copying each step into the trace), comparable with a PyTorch
//! forward pass; renderers get a finished trace, as in a run.

use attn_trace::params::Params;
use attn_trace::settings::plan::Plan;
use attn_trace::settings::Settings;
use attn_trace::sources::{seeded, Loaded, Source};
use attn_trace::trace::Recorder;
use attn_trace::{cli::Cli, cli::Env, model, render, trace::Trace, views};
use clap::Parser;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use std::io::sink;

/// One run's inputs, opened once: settings, the model's inputs and the plan.
struct Run {
    s: Settings,
    loaded: Loaded,
    plan: Plan,
}

fn settings(args: &[&str]) -> Run {
    let cli = Cli::try_parse_from(std::iter::once("attn-trace").chain(args.iter().copied())).unwrap();
    let s = Settings::from_cli(cli, &Env::default()).unwrap();
    let (loaded, _, plan) = attn_trace::prepare(&s).unwrap();
    Run { s, loaded, plan }
}

/// The parameters a run would use, built once.
fn params(r: &Run) -> Params {
    let (_, source, _) = attn_trace::prepare(&r.s).unwrap();
    source.params(&r.loaded).unwrap()
}

fn traced(r: &Run, p: &Params) -> Trace {
    let mut rec = Recorder::new(r.loaded.tokens.clone(), r.loaded.cfg.clone(), r.plan.record.clone());
    model::forward(&r.loaded.cfg, p, &r.loaded.input, &mut attn_trace::hook::Hooks::new(&mut rec)).unwrap();
    rec.finish().0
}

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

fn forward(group: &mut Group, s: &Run, p: &Params) {
    group.throughput(Throughput::Elements(1));
    group.bench_function("forward", |b| b.iter(|| traced(s, p)));
}

/// Times `render` on `trace`, with its output size as the throughput.
fn renderer(group: &mut Group, name: &str, trace: &Trace, render: impl Fn(&Trace, &mut dyn std::io::Write)) {
    let mut bytes = Vec::new();
    render(trace, &mut bytes);
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function(name, |b| b.iter(|| render(trace, &mut sink())));
}

/// A view's renderer, given the run's flags: the views are derived once (as a run does
/// after the forward pass), then only the drawing is timed.
fn view(
    group: &mut Group,
    name: &str,
    args: &[&str],
    draw: fn(&Trace, &views::Views, &Settings, &mut dyn std::io::Write),
) {
    let r = settings(args);
    let t = traced(&r, &params(&r));
    let (t, v) = views::derive(t, &r.plan, &r.s.output).unwrap();
    renderer(group, name, &t, |t, w| draw(t, &v, &r.s, w));
}

fn seed000(c: &mut Criterion) {
    let sentence = "my shoes are small, my feet are big.";
    let s = settings(&[sentence, "--heads", "2"]);
    let p = params(&s);
    let trace = traced(&s, &p);
    let mut group = c.benchmark_group("seed000");
    forward(&mut group, &s, &p);
    let (_, Source::Seeded(recipe), _) = attn_trace::prepare(&s.s).unwrap() else { unreachable!() };
    group.bench_function("init_torch", |b| b.iter(|| seeded::draw(&s.loaded.cfg, &recipe).unwrap()));
    renderer(&mut group, "render_table", &trace, |t, w| render::table::write(t, 4, 80, w).unwrap());
    renderer(&mut group, "render_json", &trace, |t, w| render::json::write(t, w).unwrap());
    renderer(&mut group, "render_jsonl", &trace, |t, w| render::jsonl::write(t, w).unwrap());
    let all = |t: &Trace, v: &views::Views, s: &Settings, w: &mut dyn std::io::Write| {
        render::render(t, v, &s.output, None, w).unwrap()
    };
    view(&mut group, "render_heatmap", &[sentence, "--heads", "2", "--format", "heatmap", "--color", "always"], all);
    view(&mut group, "render_focus_explain", &[sentence, "--heads", "2", "--focus", "shoes", "--explain"], all);
    let html = |t: &Trace, v: &views::Views, s: &Settings, w: &mut dyn std::io::Write| {
        render::html::write(t, v.maps.as_ref().unwrap(), v, &s.output, w).unwrap()
    };
    view(&mut group, "render_html", &[sentence, "--heads", "2", "--html", "/dev/null"], html);
    let svg = |t: &Trace, v: &views::Views, s: &Settings, w: &mut dyn std::io::Write| {
        render::svg::write(
            t,
            v.maps.as_ref().unwrap(),
            v.patch_grid.as_ref().map(|p| (p, v.patch_text())),
            &s.output,
            w,
        )
        .unwrap()
    };
    view(&mut group, "render_svg", &[sentence, "--heads", "2", "--svg", "/dev/null"], svg);
    group.finish();
}

fn d768(c: &mut Criterion) {
    let big = (0..512).map(|i| format!("w{}", i % 97)).collect::<Vec<_>>().join(" ");
    let s = settings(&[&big, "--d-model", "768", "--heads", "12", "--d-ff", "3072", "--positions", "sinusoidal"]);
    let p = params(&s);
    let trace = traced(&s, &p);
    let mut group = c.benchmark_group("d768_h12_n512");
    group.sample_size(10);
    forward(&mut group, &s, &p);
    renderer(&mut group, "render_json", &trace, |t, w| render::json::write(t, w).unwrap());
    group.finish();
}

fn minilm(c: &mut Criterion) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/.cache/models/all-MiniLM-L6-v2");
    if !std::path::Path::new(dir).join("model.safetensors").exists() {
        eprintln!("minilm_n256: skipped, no model at {dir} (run: bash tests/fetch-model.sh)");
        return;
    }
    // 256 tokens with [CLS] and [SEP], the sentence of tests/bench/bench_all.sh.
    let long = [vec!["the quick brown fox jumps over the lazy dog and runs"; 23], vec!["fast"]].concat().join(" ");
    let s = settings(&[&long, "--model", dir]);
    let p = params(&s);
    let trace = traced(&s, &p);
    let mut group = c.benchmark_group("minilm_n256");
    group.sample_size(10);
    forward(&mut group, &s, &p);
    renderer(&mut group, "render_json", &trace, |t, w| render::json::write(t, w).unwrap());
    let links = views::summary::summarize(&trace);
    renderer(&mut group, "render_summary", &trace, |t, w| render::summary::write((t, None), &links, 100, w).unwrap());
    group.finish();
}

criterion_group!(benches, seed000, d768, minilm);
criterion_main!(benches);
