//! A named tensor as a file stores it, and a step's values as the bytes and numbers such a
//! file holds: what every format of [`super`] shares.

use crate::trace::{Step, Values};

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
