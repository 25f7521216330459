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

pub mod npy;
mod npy_read;
pub mod npz;
pub mod safetensors;
pub mod tl;
pub mod weights;

use crate::settings::outputs::{TraceKind, TraceNames};
use crate::trace::{Step, Trace, Values};
use anyhow::Result;

/// A tensor read back from a file: numbers as f64 (for comparing), or strings.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    Num(Vec<f64>),
    Str(Vec<String>),
}

impl Data {
    pub fn len(&self) -> usize {
        match self {
            Data::Num(v) => v.len(),
            Data::Str(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One named tensor as stored in a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Named {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Data,
    /// What the file stored it as, in numpy's words (`float32`, `bfloat16`, `int64`, `bool`,
    /// `str`): a steering vector must be floats, a trace's mask and ids are not.
    pub dtype: &'static str,
}

/// A step's values as the bytes and dtype a file stores: (safetensors dtype, numpy descr,
/// little-endian bytes). Strings have no fixed-size numeric form and return `None`.
pub fn encode(step: &Step) -> Option<(&'static str, &'static str, Vec<u8>)> {
    match &step.values {
        Values::F32(v) => Some(("F32", "<f4", v.iter().flat_map(|x| x.to_le_bytes()).collect())),
        Values::Bool(v) => Some(("U8", "|u1", v.iter().map(|&b| b as u8).collect())),
        Values::Int(v) => Some(("I64", "<i8", v.iter().flat_map(|x| x.to_le_bytes()).collect())),
        Values::Str(_) => None,
    }
}

/// A step's values as f64 for comparing, rounded the same way as files are read.
pub fn step_data(values: &Values) -> Data {
    match values {
        Values::F32(v) => Data::Num(v.iter().map(|&x| x as f64).collect()),
        Values::Bool(v) => Data::Num(v.iter().map(|&b| b as u8 as f64).collect()),
        Values::Int(v) => Data::Num(v.iter().map(|&x| x as f64).collect()),
        Values::Str(v) => Data::Str(v.clone()),
    }
}

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
