//! `cargo bench --bench matmul`: the two ways `model::kernels::linear` can compute `x·Wᵀ` with candle
//! (`x·Wᵀ`, and `(W·xᵀ)ᵀ` made contiguous), in GFLOP/s, on the decoder benchmarks' shapes
//! and a few others; which one `model::kernels::linear::weight_first` picks; and whether they agree bit for
//! bit. Best of five runs each, on both cores, with the command's process settings
//! (`command::tune_process`).
//! Then whether a product's bits depend on how gemm blocks its inner dimension, which gemm
//! derives from the CPU's L1 data cache (`gemm-common`'s `kernel_params`): the same product
//! whole, and summed from blocks of 768 and of 512 (what a 48 KiB 12-way and a 32 KiB 8-way
//! L1 give an inner dimension of 1,536 with gemm's AVX2 kernel).
//! A plain program, not criterion: the point is the side-by-side table.

use attn_trace::model::kernels::linear::weight_first;
use candle_core::{Device, Tensor};
use std::time::Instant;

/// (positions, in, out), with the model each comes from.
const SHAPES: &[(usize, usize, usize, &str)] = &[
    (128, 2048, 2048, "Llama 1 B q/o, 128 tokens"),
    (128, 2048, 512, "Llama 1 B k/v"),
    (128, 2048, 8192, "Llama 1 B gate/up"),
    (128, 8192, 2048, "Llama 1 B down"),
    (128, 2048, 32000, "Llama 1 B LM head"),
    (128, 768, 2304, "GPT-2 c_attn (as [out, in])"),
    (128, 3072, 768, "GPT-2 c_proj of the MLP"),
    (128, 768, 50257, "GPT-2 LM head"),
    (128, 576, 1536, "SmolLM2 gate/up"),
    (32, 576, 576, "SmolLM2 q/o, 32 tokens (the server's benchmark)"),
    (32, 576, 192, "SmolLM2 k/v, 32 tokens"),
    (32, 576, 1536, "SmolLM2 gate/up, 32 tokens"),
    (32, 1536, 576, "SmolLM2 down, 32 tokens"),
    (32, 576, 49152, "SmolLM2 LM head, 32 tokens"),
    (512, 2048, 8192, "Llama 1 B gate/up, 512 tokens"),
    (32, 4096, 4096, "Llama 7 B q, 32 tokens"),
    (16, 8192, 2048, "Llama 1 B down, 16 tokens"),
];

fn best_of_five(f: impl Fn() -> Tensor) -> (f64, Tensor) {
    let mut best = f64::MAX;
    let mut out = f();
    for _ in 0..5 {
        let t = Instant::now();
        out = f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    (best, out)
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.flatten_all().unwrap().to_vec1::<f32>().unwrap().iter().map(|v| v.to_bits()).collect()
}

fn main() {
    attn_trace::command::tune_process();
    let cpu = Device::Cpu;
    println!("| shape [pos × in]·[in × out] | x·Wᵀ GFLOP/s | (W·xᵀ)ᵀ GFLOP/s | picked | same bits |");
    println!("|---|---|---|---|---|");
    for &(n, k, m, what) in SHAPES {
        let x = Tensor::randn(0f32, 1., (n, k), &cpu).unwrap();
        let w = Tensor::randn(0f32, 1., (m, k), &cpu).unwrap();
        let flops = 2.0 * (n * k * m) as f64 / 1e9;
        let (a, ya) = best_of_five(|| x.matmul(&w.t().unwrap()).unwrap());
        let (b, yb) = best_of_five(|| w.matmul(&x.t().unwrap()).unwrap().t().unwrap().contiguous().unwrap());
        let picked = if weight_first(&x, &w) { "(W·xᵀ)ᵀ" } else { "x·Wᵀ" };
        let same = if bits(&ya) == bits(&yb) { "yes" } else { "NO" };
        println!("| [{n} × {k}]·[{k} × {m}] ({what}) | {:.0} | {:.0} | {picked} | {same} |", flops / a, flops / b);
    }
    blocking(&cpu);
}

/// `x·Wᵀ` for an inner dimension of 1,536 (SmolLM2's down projection), whole and as
/// Σ x[:, block]·W[:, block]ᵀ over consecutive blocks added in order, as gemm adds its own
/// blocks into the output.
fn blocking(cpu: &Device) {
    let (n, k, m) = (32, 1536, 576);
    let x = Tensor::randn(0f32, 1., (n, k), cpu).unwrap();
    let w = Tensor::randn(0f32, 1., (m, k), cpu).unwrap();
    let whole = bits(&x.matmul(&w.t().unwrap()).unwrap());
    println!();
    println!("| [{n} × {k}]·[{k} × {m}] summed from blocks of | same bits as the whole product here |");
    println!("|---|---|");
    for block in [768, 512] {
        let mut sum: Option<Tensor> = None;
        for start in (0..k).step_by(block) {
            let part =
                x.narrow(1, start, block).unwrap().matmul(&w.narrow(1, start, block).unwrap().t().unwrap()).unwrap();
            sum = Some(match sum {
                None => part,
                Some(s) => (s + part).unwrap(),
            });
        }
        let same = if bits(&sum.unwrap()) == whole { "yes" } else { "NO" };
        println!("| {block} | {same} |");
    }
}
