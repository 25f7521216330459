//! The forward pass, recorded step by step into a [`Trace`](crate::trace::Trace): embed
//! (`embed.rs`) → stack (`stack.rs`: the layers) → unembed (`unembed.rs`: final norm, head).
//!
//! Each function reads top to bottom as a column of named `let`s, one per traced step, with
//! the tensor's shape in a comment. Model code records; it never prints.

pub mod attention;
pub mod attribute;
pub mod attrpatch;
pub mod cancel;
pub mod cross;
pub mod embed;
pub mod ffn;
pub mod generate;
pub mod ggml;
pub mod grad_linear;
pub mod head;
pub mod intervene;
pub mod layer;
pub mod lockstep;
pub mod mask;
pub mod norm;
pub mod pass;
pub mod patch;
pub mod pathpatch;
pub mod pool;
pub mod product;
pub mod relative;
pub mod rope;
pub mod sample;
pub mod seq2seq;
pub mod softmax;
pub mod stack;
pub mod steer;
pub mod tiled;
pub mod unembed;

use crate::config::ModelConfig;
use crate::hook::Hooks;
use crate::params::Input;
use crate::params::{Linear, Params};
use anyhow::Result;
use candle_core::Tensor;

/// Runs the whole model in three parts, embed → stack → unembed, recording every step into
/// `rec`; returns the last hidden state.
pub fn forward(cfg: &ModelConfig, params: &Params, input: &Input, hooks: &mut Hooks) -> Result<Tensor> {
    if cfg.parts.seq2seq.is_some() {
        return seq2seq::forward(cfg, params, input, hooks);
    }
    let head = head::Unembed::of(cfg, params);
    let done = forward_pass(cfg, params, head.as_ref(), (input, &mut pass::Pass::default()), hooks, false)?;
    Ok(done.0)
}

/// [`forward`] with `head` (the model's, possibly made dense once for many passes) and
/// `pass` (a generation's cache: `input`'s tokens stand at the positions after the cached
/// ones); returns the last hidden state and, when `logits` is set or the recorder wants
/// them, the logits.
pub fn forward_pass(
    cfg: &ModelConfig,
    params: &Params,
    head: Option<&head::Unembed>,
    (input, pass): (&Input, &mut pass::Pass),
    hooks: &mut Hooks,
    logits: bool,
) -> Result<(Tensor, Option<Tensor>)> {
    attribute::readout::open(cfg, params, head, hooks)?;
    let x = embed::embed_at(cfg, params, input, pass.offset(), hooks)?; // [pos, d_model]
    pass.bias = relative::position_bias(cfg, params, (pass.offset(), x.dim(0)?), hooks)?; // [head, pos, key_pos]
    let x = stack::stack(cfg, &params.layers, (0, pass), x, hooks, |_, _, out, hooks| {
        if let (true, Some(head)) = (hooks.rec.lens(), head) {
            // The logit lens: this layer's residual stream read out as if it were the last.
            let normed = unembed::final_norm(cfg, params, out)?; // [pos, d_model]
            let logits = unembed::capped(cfg, head.logits(&normed)?)?; // [pos, vocab]
            let top = head::top_k(&logits, hooks.rec.top_k().max(1))?;
            hooks.rec.push_lens(top);
            if !hooks.rec.lens_track().is_empty() {
                // `--lens-track`: the chosen tokens' exact ranks, from the same logits.
                let ranks = head::ranks(&logits, &hooks.rec.lens_track())?; // [pos][tracked]
                hooks.rec.push_lens_ranks(ranks);
            }
        }
        Ok(())
    })?; // [pos, d_model]
    unembed::unembed_with_logits(cfg, params, head, x, hooks, logits)
}

/// `x·Wᵀ + b` for `x` of shape [pos, in], PyTorch's `nn.Linear`.
/// Under `--arithmetic ggml` (`lin.ggml`), `x` is first rounded as llama.cpp quantizes it
/// for the weight's type (`ggml.rs`). An `x` that tracks gradients (attribution patching's
/// corrupted run, never under `--arithmetic ggml`) goes through `grad_linear`, whose backward
/// pass computes no weight's gradient.
pub fn linear(x: &Tensor, lin: &Linear) -> Result<Tensor> {
    if x.track_op() && lin.ggml.is_none() {
        return grad_linear::tracked(x, lin, untracked_linear);
    }
    untracked_linear(x, lin)
}

fn untracked_linear(x: &Tensor, lin: &Linear) -> Result<Tensor> {
    let exact = match lin.ggml.as_deref() {
        Some(crate::params::GgmlInput { blocks: Some(blocks), .. }) => Some(ggml::blocks::matmul(x, blocks)?),
        Some(crate::params::GgmlInput { kblocks: Some(k), .. }) => ggml::kquants::matmul(x, k)?,
        _ => None,
    };
    if let Some(y) = exact {
        // [pos, out]: llama.cpp's own kernel
        return Ok(match &lin.bias {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        });
    }
    let (rounded, correction) = match &lin.ggml {
        Some(g) => {
            let (r, c) = ggml::rounded_input(x, g)?; // [pos, in], [pos, blocks]
            (Some(r), c)
        }
        None => (None, None),
    };
    let x = rounded.as_ref().unwrap_or(x);
    let y = if weight_first(x, &lin.weight) {
        product::matmul(&lin.weight, &x.t()?)?.t()?.contiguous()? // [pos, out]
    } else {
        product::matmul(x, &lin.weight.t()?)? // [pos, out]
    };
    let y = match &lin.ggml {
        Some(g) => ggml::corrected(y, correction, g)?, // [pos, out]
        None => y,
    };
    Ok(match &lin.bias {
        Some(b) => y.broadcast_add(b)?,
        None => y,
    })
}

/// Soft-capping (Gemma 2's attention scores and logits): `cap · tanh(x / cap)` in f32,
/// dividing by cap as transformers does rather than multiplying by its reciprocal.
pub fn softcap(x: &Tensor, cap: f64) -> Result<Tensor> {
    let cap = Tensor::new(cap as f32, &candle_core::Device::Cpu)?;
    Ok(x.broadcast_div(&cap)?.tanh()?.broadcast_mul(&cap)?)
}

/// Whether `(W·xᵀ)ᵀ` is the faster way to `x·Wᵀ`: candle's matrix product (the gemm crate)
/// packs a row-major [out, in] weight when it is the right-hand operand, and for few
/// positions against a wide input that packing is a large part of the work. Measured on this
/// project's 2-core machine (`BENCHMARKS.md`): 10–27% faster for a 1 B Llama's projections at
/// 128 positions, 2–3× at 16 or 32, slower at 512 positions, at d_model ≤ 1536 and for
/// vocabulary-wide heads. Both forms sum in the same order and give the same bits
/// (`tests::both_orders_of_the_product_agree_bit_for_bit`). `cargo bench --bench matmul`
/// measures both on the shapes the rule is drawn from.
pub fn weight_first(x: &Tensor, w: &Tensor) -> bool {
    let (Ok((n, k)), Ok((m, _))) = (x.dims2(), w.dims2()) else { return false };
    w.is_contiguous() && m <= 16_384 && (n <= 64 || (n <= 256 && k >= 2048))
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    #[test]
    fn both_orders_of_the_product_agree_bit_for_bit() {
        for (n, k, m) in [(16, 2048, 512), (128, 2048, 2048), (128, 4096, 1024), (40, 300, 70)] {
            let x = Tensor::randn(0f32, 1., (n, k), &Device::Cpu).unwrap();
            let w = Tensor::randn(0f32, 1., (m, k), &Device::Cpu).unwrap();
            let a = x.matmul(&w.t().unwrap()).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let b = w.matmul(&x.t().unwrap()).unwrap().t().unwrap().contiguous().unwrap();
            let b = b.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            assert!(a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()), "[{n}×{k}]·[{k}×{m}]");
        }
    }
}
