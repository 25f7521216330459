//! Weights handed over in memory (the Python API's `weights=` dict of arrays), named as in
//! weight files: checked and made tensors, then used exactly as a file's.

use super::file::NamedTensors;
use crate::error::usage;
use anyhow::Result;
use candle_core::{Device, Tensor};

/// Named tensors handed over in memory (the Python API's `weights=` dict); `what` names them
/// in messages.
pub fn tensors(given: &crate::settings::Given, what: &str) -> Result<NamedTensors> {
    let mut out = NamedTensors::new();
    for (name, (shape, values)) in given {
        if shape.iter().product::<usize>() != values.len() {
            return Err(usage(
                what,
                format!("tensor {name} has shape {shape:?} but {} values", values.len()),
                "pass arrays whose values fill their shape",
            ));
        }
        out.insert(name.clone(), Tensor::from_vec(values.clone(), shape.as_slice(), &Device::Cpu)?);
    }
    if out.is_empty() {
        return Err(usage(
            what,
            "no tensors were given",
            "pass a dict of named arrays, e.g. {\"embed.token.weight\": …}",
        ));
    }
    Ok(out)
}
