//! Traces as files of named tensors (`--save-trace FILE`), and the reader `attn-trace diff`
//! uses for such files, whoever wrote them.
//!
//! Every recorded step becomes one tensor named by its step id, in the step's own shape:
//! f32 tensors as float32, the boolean `attn.mask` as uint8 (1 = hidden), `token_ids` as
//! int64. The token strings are kept too: in safetensors' `__metadata__` (whose values can
//! only be strings) as a JSON array under `tokens`, and in an npz as a numpy unicode array
//! `tokens`, which `numpy.load` reads without pickle. The format follows the extension:
//! `.safetensors` ([`safetensors`]) or `.npz` ([`npz`]). Bytes are deterministic: tensors
//! are written in sorted order, with fixed zip timestamps. With `--names transformer-lens`
//! the tensors carry TransformerLens's hook names and layouts instead ([`tl`]).
//!
//! `--save-weights` files, the parameters with the run's settings, are encoded here too
//! ([`weights`]).

mod named;
pub mod npy;
mod npy_read;
pub mod npz;
pub mod safetensors;
pub mod tl;
pub mod weights;
pub use named::{encode, step_data, Data, Named};

use crate::settings::outputs::{TraceKind, TraceNames};
use crate::trace::Trace;
use anyhow::Result;

/// Every step of a trace as the bytes of a `--save-trace` file (the output stage writes them).
pub fn encode_trace(trace: &Trace, kind: TraceKind, names: TraceNames) -> Result<Vec<u8>> {
    let (renamed, with_generation);
    let steps = match names {
        // A generation's decode steps follow the prompt's, under their `gen.{t}.` ids.
        TraceNames::AttnTrace if trace.generation.is_some() => {
            let generated = trace.generation.iter().flat_map(|g| g.all_steps());
            with_generation = trace.steps.iter().chain(generated).cloned().collect::<Vec<_>>();
            &with_generation[..]
        }
        TraceNames::AttnTrace => &trace.steps[..],
        TraceNames::TransformerLens => {
            renamed = tl::steps(&trace.steps, &trace.config.parts);
            &renamed[..]
        }
    };
    match kind {
        TraceKind::Safetensors => safetensors::write(steps, &trace.tokens),
        TraceKind::Npz => npz::write(steps, &trace.tokens),
    }
}
