//! `cargo bench --bench peak`: this machine's arithmetic peak as candle reaches it, the
//! denominator of `--timings`' share of the peak (BENCHMARKS.md, "Share of the peak").
//!
//! - f32: candle's `matmul` (the gemm crate, which computes every product of attn-trace's
//!   forward pass) on square matrices of a few sizes, on every core and on one, best of a few
//!   runs; the largest rate is the measured peak. The same function, at 1024, is what
//!   `--timings` measures after a run (`output::peak`).
//! - int8: candle's quantized matrix product (`QMatMul`) on a Q8_0 weight (and a Q4_K one):
//!   f32 activations quantized to 8 bits on every call, then integer dot products (AVX-512
//!   VNNI or AMX where candle has a kernel for the shape, its AVX2 dot products otherwise);
//!   counted as 2·m·k·n operations, like the f32 products.
//! - The CPU (/proc/cpuinfo), its cores, and the theoretical f32 peak at the listed clock,
//!   with the number of FMA units assumed and why; and the ceiling of gemm's kernels as candle
//!   builds gemm (256-bit: its AVX-512 kernels need its `x86-v4` feature, which is off).
//!
//! A plain program, not criterion: the point is the table. Run with the command's process
//! settings (`command::tune_process`). On a shared machine the figures are the share of it
//! this process got: the load average is printed before and after.

use attn_trace::output::peak::{f32_matmul, quantized_matmul, Rate};
use candle_core::quantized::GgmlDType;
use std::time::Duration;

/// Square f32 sizes, with the timed runs of each.
const F32_SIZES: &[(usize, usize)] = &[(256, 20), (512, 10), (1024, 10), (2048, 5), (4096, 3)];

/// Quantized products: weight type, [m × k]·[k × n], and what the shape is.
const QUANTIZED: &[(GgmlDType, (usize, usize, usize), &str)] = &[
    (GgmlDType::Q8_0, (512, 2048, 2048), "512 positions, 2048 → 2048"),
    (GgmlDType::Q8_0, (512, 2048, 8192), "512 positions, 2048 → 8192 (a 1 B Llama's gate)"),
    (GgmlDType::Q8_0, (512, 576, 1536), "512 positions, SmolLM2's gate (576 is not a multiple of 256)"),
    (GgmlDType::Q8_0, (1, 2048, 8192), "one position (a decode step), 2048 → 8192"),
    (GgmlDType::Q4K, (512, 2048, 2048), "512 positions, 2048 → 2048"),
];

fn cpuinfo(key: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = text.lines().find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map_or("unknown".into(), |l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
}

/// f32 operations per cycle and core that the ISA allows, and the assumption behind the count.
fn isa_flops_per_cycle(vendor: &str, flags: &str) -> (f64, String) {
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    if has("avx512f") && vendor == "GenuineIntel" {
        let why = "AVX-512: 16 f32 lanes × 2 (FMA) × 2 FMA units (Intel Xeon Scalable cores with AVX-512 FP16 \
                   and AMX, Sapphire Rapids on, all have the second 512-bit FMA unit, on port 5; some \
                   earlier Silver/Bronze parts had one, which would halve this)";
        (64.0, why.into())
    } else if has("avx512f") {
        (32.0, "AVX-512 on two 256-bit FMA pipes (AMD Zen 4): 16 lanes × 2 (FMA) × 1 unit's worth".into())
    } else if has("avx2") && has("fma") {
        (32.0, "AVX2: 8 f32 lanes × 2 (FMA) × 2 FMA units".into())
    } else {
        (8.0, "SSE: 4 lanes × 2 (multiply and add, no FMA)".into())
    }
}

/// What gemm's f32 kernels can use as candle builds it: candle-core depends on gemm without
/// its `x86-v4` feature, so gemm has no AVX-512 kernel and runs its AVX2 + FMA one.
const GEMM_FLOPS_PER_CYCLE: f64 = 32.0;

fn row(what: &str, r: &Rate, unit: &str) {
    let (m, k, n) = r.mkn;
    println!("| {what} | [{m} × {k}]·[{k} × {n}] | {} | {} | {:.1} {unit} |", r.threads, r.runs, r.giga_per_s);
}

fn main() -> anyhow::Result<()> {
    attn_trace::command::tune_process();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let model = cpuinfo("model name").unwrap_or_else(|| "unknown".into());
    let vendor = cpuinfo("vendor_id").unwrap_or_default();
    let mhz: f64 = cpuinfo("cpu MHz").and_then(|m| m.parse().ok()).unwrap_or(0.0);
    let flags = cpuinfo("flags").unwrap_or_default();
    let isa: Vec<&str> = ["avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8"]
        .into_iter()
        .filter(|f| flags.split_whitespace().any(|x| x == *f))
        .collect();
    println!("cpu: {model} ({vendor}), {cores} cores, {mhz:.0} MHz listed, {}", isa.join(" "));
    println!("load average before: {}", load());
    println!();
    println!("| product | shape | threads | timed runs | best rate |");
    println!("|---|---|---|---|---|");
    let mut peak = 0f64;
    for &(size, runs) in F32_SIZES {
        let r = f32_matmul(size, runs, Duration::from_secs(20))?;
        peak = peak.max(r.giga_per_s);
        row("f32 matmul (gemm)", &r, "GFLOP/s");
    }
    // One thread: candle asks RAYON_NUM_THREADS before every product, and gemm runs a product
    // given one thread on the calling thread. Nothing else runs now that would read it.
    let threads = std::env::var("RAYON_NUM_THREADS").ok();
    std::env::set_var("RAYON_NUM_THREADS", "1");
    let mut single = 0f64;
    for &(size, runs) in &F32_SIZES[1..4] {
        let r = f32_matmul(size, runs, Duration::from_secs(20))?;
        single = single.max(r.giga_per_s);
        row("f32 matmul (gemm), one thread", &r, "GFLOP/s");
    }
    match threads {
        Some(t) => std::env::set_var("RAYON_NUM_THREADS", t),
        None => std::env::remove_var("RAYON_NUM_THREADS"),
    }
    let mut int8 = 0f64;
    for &(dtype, mkn, what) in QUANTIZED {
        let r = quantized_matmul(dtype, mkn, 5, Duration::from_secs(20))?;
        int8 = int8.max(r.giga_per_s);
        row(&format!("{dtype:?} QMatMul, {what}"), &r, "GOP/s");
    }
    println!();
    println!("load average after: {}", load());
    println!("measured f32 peak: {peak:.1} GFLOP/s on {cores} threads ({single:.1} on one: {:.2}×)", peak / single);
    println!("measured int8 rate (candle's quantized products): {int8:.1} GOP/s, {:.2}× the f32 peak", int8 / peak);
    let ghz = mhz / 1e3;
    let (isa, why) = isa_flops_per_cycle(&vendor, &flags);
    println!(
        "theoretical f32 peak at the listed clock: {cores} cores × {ghz:.2} GHz × {isa} FLOPs/cycle = {:.1} GFLOP/s",
        cores as f64 * ghz * isa
    );
    println!("    {why}");
    println!(
        "gemm's kernels as candle builds gemm (no x86-v4 feature: AVX2 + FMA, 8 lanes × 2 × 2 units = {GEMM_FLOPS_PER_CYCLE} \
         FLOPs/cycle): {:.1} GFLOP/s at the listed clock; the best one-thread rate implies {:.2} GHz at that width",
        cores as f64 * ghz * GEMM_FLOPS_PER_CYCLE,
        single / GEMM_FLOPS_PER_CYCLE
    );
    Ok(())
}
