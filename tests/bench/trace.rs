//! In-process benchmarks (criterion): the forward pass and each renderer, for seed notebook
//! 000's case and for d_model 768, 12 heads, 512 tokens. Run: `cargo bench --bench trace`.
//! Parameters are drawn once outside the timed loop, so `forward` times only the traced math
//! (including copying each step into the trace), comparable with a PyTorch forward pass.

use attn_trace::{cli::Cli, init, model, render, settings::Settings, settings::Source, trace::Trace};
use clap::Parser;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn settings(args: &[&str]) -> Settings {
    let cli = Cli::try_parse_from(std::iter::once("attn-trace").chain(args.iter().copied())).unwrap();
    Settings::from_cli(cli).unwrap()
}

fn big_sentence() -> String {
    (0..512).map(|i| format!("w{}", i % 97)).collect::<Vec<_>>().join(" ")
}

fn bench(c: &mut Criterion) {
    let big = big_sentence();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("seed000", vec!["my shoes are small, my feet are big.", "--heads", "2"]),
        (
            "d768_h12_n512",
            vec![big.as_str(), "--d-model", "768", "--heads", "12", "--d-ff", "3072", "--positions", "sinusoidal"],
        ),
    ];
    for (name, args) in cases {
        let s = settings(&args);
        let Source::Seeded(recipe) = &s.source else { unreachable!("seeded cases only") };
        let params = init::seeded::draw(&s.cfg, recipe).unwrap();
        let mut group = c.benchmark_group(name);
        group.sample_size(if name == "seed000" { 100 } else { 10 });
        group.bench_function("forward", |b| {
            b.iter(|| {
                let mut t = Trace::new(s.tokens.clone(), s.selection.clone());
                model::forward(&s.cfg, &params, &s.input, &mut t).unwrap();
                t
            })
        });
        let mut trace = Trace::new(s.tokens.clone(), s.selection.clone());
        trace.config = serde_json::to_value(&s.cfg).unwrap();
        model::forward(&s.cfg, &params, &s.input, &mut trace).unwrap();
        let mut bytes = Vec::new();
        render::json::write(&trace, &mut bytes).unwrap();
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function("render_json", |b| b.iter(|| render::json::write(&trace, &mut std::io::sink()).unwrap()));
        group.throughput(Throughput::Elements(1));
        if name == "seed000" {
            group.bench_function("render_table", |b| {
                b.iter(|| render::table::write(&trace, 4, 80, &mut std::io::sink()).unwrap())
            });
            group.bench_function("init_torch", |b| b.iter(|| init::seeded::draw(&s.cfg, recipe).unwrap()));
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
