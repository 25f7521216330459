//! Seeded parameters drawn exactly as PyTorch draws them.
//!
//! The recipe follows seed notebook 000 by default: `torch.manual_seed(seed)` before the token
//! table, again before the position table, and again before the first layer's projections.
//! Within a layer the draws are: the q, k and v projections (in `draw_order`), the output
//! projection, then the FFN's two linears; LayerNorms draw nothing (ones and zeros). Linear
//! layers draw like `nn.Linear` (Kaiming-uniform weight, then bias), or, with `Rand`, like a
//! raw `torch.rand` matrix (seeds 003 and 004), stored `[out, in]` or `[in, out]`.

use crate::config::{ModelConfig, Positions};
use crate::params::{Block, Dense, Ffn, LayerNorm, LayerParams, Layers, Linear, Params};
use crate::settings::recipe::{LinearInit, Proj, RandLayout, Recipe};
use crate::torch_rng::TorchGenerator;
use anyhow::Result;
use candle_core::{Device, Tensor};

/// Draws every parameter for `cfg` following `recipe`.
pub fn draw(cfg: &ModelConfig, recipe: &Recipe) -> Result<Params> {
    let mut g = TorchGenerator::new(recipe.seed, recipe.kernel);
    let d = cfg.d_model;
    let token = if cfg.raw_input {
        None
    } else {
        if recipe.reseed.token {
            g.manual_seed(recipe.seed);
        }
        skip(&mut g, recipe.skip.token);
        Some(tensor(g.embedding(cfg.vocab_size, d, None), &[cfg.vocab_size, d])?)
    };
    let position = if cfg.positions == Positions::Learned {
        if recipe.reseed.position {
            g.manual_seed(recipe.seed);
        }
        skip(&mut g, recipe.skip.position);
        Some(tensor(g.embedding(cfg.max_len, d, None), &[cfg.max_len, d])?)
    } else {
        None
    };
    if recipe.reseed.layers {
        g.manual_seed(recipe.seed);
    }
    skip(&mut g, recipe.skip.layers);
    let mut layers = Vec::with_capacity(cfg.layers);
    if recipe.linear == LinearInit::EncoderLayer {
        // nn.TransformerEncoder deep-copies the one layer it is given.
        let first = encoder_layer(&mut g, recipe, cfg)?;
        layers = vec![first; cfg.layers];
    }
    for _ in layers.len()..cfg.layers {
        // Separate single-head modules are constructed head by head, each drawing its own
        // q, k, v; the fused projections draw each one whole. Head h's rows are the same block
        // of the fused weight either way.
        let (q_proj, k_proj, v_proj) = if cfg.parts.separate_heads {
            let drawn = (0..cfg.heads)
                .map(|_| qkv(&mut g, recipe, cfg, (cfg.d_k, cfg.d_k, cfg.d_v)))
                .collect::<Result<Vec<_>>>()?;
            let rows = |pick: fn(&(Linear, Linear, Linear)) -> &Linear| stack(drawn.iter().map(pick));
            (rows(|h| &h.0)?, rows(|h| &h.1)?, rows(|h| &h.2)?)
        } else {
            qkv(&mut g, recipe, cfg, (cfg.qk_width(), cfg.k_width(), cfg.kv_v_width()))?
        };
        let out_proj = if cfg.parts.no_out_proj {
            None
        } else {
            Some(linear(&mut g, recipe, cfg.v_width(), cfg.out_width(), cfg.out_bias())?)
        };
        let block = if cfg.parts.attention_only { None } else { Some(block(&mut g, recipe, cfg)?) };
        layers.push(LayerParams { q_proj, k_proj, v_proj, out_proj, block, qk_norm: None, cross: None });
    }
    // The final norm draws nothing; an own LM head is nn.Linear(d_model, vocab, bias=False),
    // constructed after the blocks (a tied head reuses the token table: see model/mod.rs).
    let final_norm = if cfg.parts.final_norm { Some(norm(cfg)?) } else { None };
    let lm_head = match &cfg.parts.lm_head {
        Some(h) if !h.tied => Some(linear(&mut g, recipe, d, cfg.vocab_size, false)?),
        _ => None,
    };
    Ok(Params {
        token,
        token_rows: None,
        position,
        token_type: None,
        embed_norm: None,
        layers: Layers::Ready(layers),
        final_norm,
        lm_head,
        mlm: None,
        stored: None,
        relative_bias: None,
        decoder: None,
    })
}

/// One `nn.TransformerEncoderLayer(d_model, heads, d_ff, bias=attn_bias)` as PyTorch 2.5
/// initialises it (torch/nn/modules/activation.py, `MultiheadAttention.__init__` and
/// `_reset_parameters`): `out_proj` is constructed first (an `nn.Linear`, drawing weight and
/// bias), then `xavier_uniform_` fills the fused `in_proj_weight` `[3·d, d]` (q, k, v rows in
/// that order) and both attention biases are set to zero; then `linear1`, `linear2`.
fn encoder_layer(g: &mut TorchGenerator, recipe: &Recipe, cfg: &ModelConfig) -> Result<LayerParams> {
    let d = cfg.d_model;
    let (out_w, _) = g.linear(d, d, cfg.attn_bias);
    // xavier_uniform_: fan_in d, fan_out 3·d; bound √3 · √(2 / (fan_in + fan_out)), in binary64.
    let bound = 3f64.sqrt() * (2.0 / (d + 3 * d) as f64).sqrt();
    let in_proj = tensor(g.uniform(3 * d * d, -bound, bound), &[3 * d, d])?;
    let zeros = |n: usize| -> Result<Option<Tensor>> {
        Ok(if cfg.attn_bias { Some(Tensor::zeros(n, candle_core::DType::F32, &Device::Cpu)?) } else { None })
    };
    let third = |i: usize| -> Result<Linear> {
        Ok(Linear { weight: in_proj.narrow(0, i * d, d)?, bias: zeros(d)?, ggml: None })
    };
    let out_proj = Linear { weight: tensor(out_w, &[d, d])?, bias: zeros(d)?, ggml: None };
    Ok(LayerParams {
        q_proj: third(0)?,
        k_proj: third(1)?,
        v_proj: third(2)?,
        out_proj: Some(out_proj),
        block: Some(block(g, recipe, cfg)?),
        qk_norm: None,
        cross: None,
    })
}

/// The q, k and v projections of widths `(q, k, v)`, drawn in the recipe's order.
fn qkv(
    g: &mut TorchGenerator,
    recipe: &Recipe,
    cfg: &ModelConfig,
    (qw, kw, vw): (usize, usize, usize),
) -> Result<(Linear, Linear, Linear)> {
    let (d, bias) = (cfg.d_model, cfg.attn_bias);
    let (mut q, mut k, mut v) = (None, None, None);
    for p in recipe.draw_order {
        match p {
            Proj::Q => q = Some(linear(g, recipe, d, qw, bias)?),
            Proj::K => k = Some(linear(g, recipe, d, kw, bias)?),
            Proj::V => v = Some(linear(g, recipe, d, vw, bias)?),
        }
    }
    match (q, k, v) {
        (Some(q), Some(k), Some(v)) => Ok((q, k, v)),
        _ => anyhow::bail!("internal: draw order {:?} does not name q, k and v once each", recipe.draw_order),
    }
}

/// Single-head projections stacked into one: weights by rows, biases end to end.
fn stack<'a>(heads: impl Iterator<Item = &'a Linear>) -> Result<Linear> {
    let heads: Vec<&Linear> = heads.collect();
    let weights: Vec<&Tensor> = heads.iter().map(|h| &h.weight).collect();
    let biases: Option<Vec<&Tensor>> = heads.iter().map(|h| h.bias.as_ref()).collect();
    Ok(Linear { weight: Tensor::cat(&weights, 0)?, bias: biases.map(|b| Tensor::cat(&b, 0)).transpose()?, ggml: None })
}

/// The norms and FFN after a layer's attention projections.
fn block(g: &mut TorchGenerator, recipe: &Recipe, cfg: &ModelConfig) -> Result<Block> {
    let d = cfg.d_model;
    skip(g, recipe.skip.ffn);
    // A gated FFN constructs gate, up, down in that order (as Llama's MLP does).
    let gate = if cfg.parts.gated_ffn { Some(linear(g, recipe, d, cfg.d_ff, cfg.ffn_bias)?) } else { None };
    let linear1 = linear(g, recipe, d, cfg.d_ff, cfg.ffn_bias)?;
    let linear2 = linear(g, recipe, cfg.d_ff, d, cfg.ffn_bias)?;
    Ok(Block {
        norm1: norm(cfg)?,
        ffn: Ffn::Dense(Dense { linear1, linear2, gate }),
        norm2: norm(cfg)?,
        post_attn_norm: None,
        post_ffn_norm: None,
    })
}

fn skip(g: &mut TorchGenerator, n: u64) {
    for _ in 0..n {
        g.random();
    }
}

fn tensor(values: Vec<f32>, shape: &[usize]) -> Result<Tensor> {
    Ok(Tensor::from_vec(values, shape, &Device::Cpu)?)
}

fn linear(g: &mut TorchGenerator, recipe: &Recipe, d_in: usize, d_out: usize, bias: bool) -> Result<Linear> {
    match recipe.linear {
        // An encoder layer's FFN linears are plain nn.Linear.
        LinearInit::Kaiming | LinearInit::EncoderLayer => {
            let (w, b) = g.linear(d_in, d_out, bias);
            Ok(Linear {
                weight: tensor(w, &[d_out, d_in])?,
                bias: b.map(|b| tensor(b, &[d_out])).transpose()?,
                ggml: None,
            })
        }
        LinearInit::Rand => {
            let weight = match recipe.layout {
                RandLayout::OutIn => tensor(g.rand(d_out * d_in), &[d_out, d_in])?,
                // Stored [in, out] as the notebook draws it; kept as [out, in] like every Linear.
                RandLayout::InOut => tensor(g.rand(d_in * d_out), &[d_in, d_out])?.t()?.contiguous()?,
            };
            let bias = if bias { Some(tensor(g.rand(d_out), &[d_out])?) } else { None };
            Ok(Linear { weight, bias, ggml: None })
        }
    }
}

/// A norm's initial parameters: LayerNorm's ones and zeros, or RMSNorm's ones.
fn norm(cfg: &ModelConfig) -> Result<LayerNorm> {
    let mut n = layer_norm(cfg.d_model)?;
    if cfg.parts.rms_norm {
        n.bias = None;
    }
    Ok(n)
}

fn layer_norm(d: usize) -> Result<LayerNorm> {
    Ok(LayerNorm {
        weight: Tensor::ones(d, candle_core::DType::F32, &Device::Cpu)?,
        bias: Some(Tensor::zeros(d, candle_core::DType::F32, &Device::Cpu)?),
    })
}
