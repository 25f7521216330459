//! The model-shape flags (`--d-model` … `--lm-head`, and the textbook forms) as typed, with
//! the checks that need no model: flags an attention-only model cannot have.

use super::nonzero;
use crate::cli::{self, Cli};
use crate::config::{Activation, Norm, Positions};
use crate::error::usage;
use anyhow::Result;

/// The shape flags as typed (each `None` when not given): for the toy model they choose, for a
/// real model they may only restate what the checkpoint says.
#[derive(Debug, Clone, Default)]
pub struct Shape {
    pub d_model: Option<usize>,
    pub heads: Option<usize>,
    pub d_k: Option<usize>,
    pub d_v: Option<usize>,
    pub d_ff: Option<usize>,
    pub layers: Option<usize>,
    pub max_len: Option<usize>,
    pub positions: Option<Positions>,
    pub norm: Option<Norm>,
    pub activation: Option<Activation>,
    pub causal: bool,
    pub scale: Option<f64>,
    pub eps: Option<f64>,
    pub attn_bias: bool,
    pub no_ffn_bias: bool,
    /// The toy decoder's parts (`--rms-norm`, `--rope-theta`, `--gated`, `--kv-heads`,
    /// `--final-norm`, `--lm-head`).
    pub rms_norm: bool,
    pub rope_theta: Option<f64>,
    pub gated: bool,
    pub kv_heads: Option<usize>,
    pub final_norm: bool,
    /// `Some(tied)` for an LM head.
    pub lm_head: Option<bool>,
    /// The textbook forms (`--qkv-bias`, `--out-proj-bias`, `--attention-only`, `--d-out`,
    /// `--no-out-proj`, `--separate-heads`).
    pub qkv_bias: bool,
    pub out_proj_bias: bool,
    pub attention_only: bool,
    pub d_out: Option<usize>,
    pub no_out_proj: bool,
    pub separate_heads: bool,
}

/// The shape flags of `cli`, checked for zeros and for what an attention-only model lacks.
pub fn shape(cli: &Cli) -> Result<Shape> {
    let shape = Shape {
        d_model: nonzero("--d-model", cli.d_model)?,
        heads: nonzero("--heads", cli.heads)?,
        d_k: nonzero("--d-k", cli.d_k)?,
        d_v: nonzero("--d-v", cli.d_v)?,
        d_ff: nonzero("--d-ff", cli.d_ff)?,
        layers: nonzero("--layers", cli.layers)?,
        max_len: nonzero("--max-len", cli.max_len)?,
        positions: cli.positions.map(Into::into),
        norm: cli.norm.map(Into::into),
        activation: cli.activation.map(Into::into),
        causal: cli.causal,
        scale: cli.scale,
        eps: cli.eps,
        attn_bias: cli.attn_bias,
        no_ffn_bias: cli.no_ffn_bias,
        rms_norm: cli.rms_norm,
        rope_theta: cli.rope_theta,
        gated: cli.gated,
        kv_heads: nonzero("--kv-heads", cli.kv_heads)?,
        final_norm: cli.final_norm,
        lm_head: cli.lm_head.map(|h| h == cli::LmHeadArg::Tied),
        qkv_bias: cli.qkv_bias,
        out_proj_bias: cli.out_proj_bias,
        attention_only: cli.attention_only,
        d_out: nonzero("--d-out", cli.d_out)?,
        no_out_proj: cli.no_out_proj,
        separate_heads: cli.separate_heads,
    };
    check_attention_only(cli)?;
    Ok(shape)
}

/// The flags of an attention-only model: the parts it lacks may not be asked for, and
/// `--d-out` and `--no-out-proj` need it (a layer with a residual sum keeps d_model).
fn check_attention_only(cli: &Cli) -> Result<()> {
    if !cli.attention_only {
        for (flag, given) in [("--d-out", cli.d_out.is_some()), ("--no-out-proj", cli.no_out_proj)] {
            if given {
                return Err(usage(
                    flag,
                    "it shapes a self-attention module traced alone",
                    format!("add --attention-only, or drop {flag}"),
                ));
            }
        }
        return Ok(());
    }
    for (flag, given) in [
        ("--d-ff", cli.d_ff.is_some()),
        ("--norm", cli.norm.is_some()),
        ("--activation", cli.activation.is_some()),
        ("--no-ffn-bias", cli.no_ffn_bias),
        ("--eps", cli.eps.is_some()),
        ("--rms-norm", cli.rms_norm),
        ("--gated", cli.gated),
        ("--final-norm", cli.final_norm),
        ("--lm-head", cli.lm_head.is_some()),
    ] {
        if given {
            return Err(usage(
                flag,
                "--attention-only traces self-attention alone, with no norm, FFN or head",
                format!("drop {flag} or --attention-only"),
            ));
        }
    }
    if cli.no_out_proj && cli.out_proj_bias {
        return Err(usage("--out-proj-bias", "there is no output projection", "drop --out-proj-bias or --no-out-proj"));
    }
    Ok(())
}

impl From<cli::PositionsArg> for Positions {
    fn from(p: cli::PositionsArg) -> Self {
        match p {
            cli::PositionsArg::Learned => Positions::Learned,
            cli::PositionsArg::Sinusoidal => Positions::Sinusoidal,
            cli::PositionsArg::None => Positions::None,
            cli::PositionsArg::Rope => Positions::Rotary,
        }
    }
}

impl From<cli::NormArg> for Norm {
    fn from(n: cli::NormArg) -> Self {
        match n {
            cli::NormArg::Post => Norm::Post,
            cli::NormArg::Pre => Norm::Pre,
        }
    }
}

impl From<cli::ActivationArg> for Activation {
    fn from(a: cli::ActivationArg) -> Self {
        match a {
            cli::ActivationArg::Relu => Activation::Relu,
            cli::ActivationArg::Gelu => Activation::Gelu,
            cli::ActivationArg::Silu => Activation::Silu,
        }
    }
}
