//! The forward pass, recorded step by step into a [`Trace`](crate::trace::Trace): embed
//! (`embed.rs`) → stack (`stack.rs`: the layers) → unembed (`unembed.rs`: final norm, head).
//!
//! Each function reads top to bottom as a column of named `let`s, one per traced step, with
//! the tensor's shape in a comment. Model code records; it never prints.

pub mod attention;
pub mod cancel;
pub mod cross;
pub mod embed;
pub mod ffn;
pub mod forward;
pub mod generate;
pub mod head;
pub mod kernels;
pub mod layer;
pub mod lockstep;
pub mod mask;
pub mod norm;
pub mod pass;
pub mod relative;
pub mod rope;
pub mod sample;
pub mod seq2seq;
pub mod stack;
pub mod steer;
pub mod tiled;
pub mod unembed;

use crate::config::ModelConfig;
use crate::hook::Hooks;
use crate::params::Input;
use crate::params::Params;
use anyhow::Result;
use candle_core::Tensor;

/// Runs the whole model in three parts, embed → stack → unembed, handing every step to
/// `hooks` (which records it and runs the hooks registered at it); returns the last hidden
/// state.
pub fn forward(cfg: &ModelConfig, params: &Params, input: &Input, hooks: &mut Hooks) -> Result<Tensor> {
    if cfg.parts.seq2seq.is_some() {
        return seq2seq::forward(cfg, params, input, hooks);
    }
    let head = head::Unembed::of(cfg, params);
    let done = forward::forward_pass(cfg, params, head.as_ref(), (input, &mut pass::Pass::default()), hooks, false)?;
    Ok(done.0)
}
