//! Notes and refusals every loader of [`super`] shares.

use crate::error::usage;
use anyhow::Result;

/// The note for weights stored in another type than f32: the trace is f32 arithmetic on the
/// converted values, so it cannot match a framework computing in the stored type.
pub(crate) fn stored_note(dtype: &str) -> String {
    if dtype.contains("f64") {
        format!("the weights are stored as {dtype} and rounded to f32; the arithmetic is f32")
    } else {
        format!("the weights are stored as {dtype}; the arithmetic is f32 on the stored values")
    }
}

/// The one refusal of a model whose architecture attn-trace does not map, whether a folder's
/// config.json or a GGUF file's metadata names it: `--model PATH: architecture "falcon"
/// (config.json's model_type) is not supported (use a model of a supported architecture: …)`.
pub(crate) fn unsupported_architecture(model: &str, arch: &str, whence: &str, supported: &[&str]) -> anyhow::Error {
    usage(
        format!("--model {model}"),
        format!("architecture {} ({whence}) is not supported", crate::error::quote(arch)),
        format!("use a model of a supported architecture: {}", supported.join(", ")),
    )
}

/// Takes the file's value, or the flag's if it agrees; a contradiction names both values.
pub(crate) fn agree(flag: &str, given: Option<usize>, from_file: usize, weights: &str) -> Result<usize> {
    match given {
        Some(g) if g != from_file => Err(usage(
            flag,
            format!("{flag} {g} contradicts {weights}, which has {from_file}"),
            format!("drop {flag} or pass {flag} {from_file}"),
        )),
        _ => Ok(from_file),
    }
}
