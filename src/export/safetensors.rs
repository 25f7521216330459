//! safetensors traces, written by hand and read with the `safetensors` crate.
//!
//! The writer is a few lines of the format itself (an 8-byte little-endian header length, a
//! JSON header, the data) rather than `safetensors::serialize`, because that takes metadata
//! as a `HashMap`, whose order would make the bytes differ from run to run. Tensors are laid
//! out widest dtype first (int64, float32, uint8), each group by name, so every tensor starts
//! at an offset aligned to its element size, as numpy's `frombuffer` prefers.

use super::{encode, Data, Named};
use crate::error::usage;
use crate::trace::Step;
#[cfg(test)]
use crate::trace::Values;
use anyhow::Result;
use safetensors::{Dtype, SafeTensors};
use serde_json::{json, Map, Value};

/// The file's bytes for these steps; token strings go into `__metadata__`.
pub fn write(steps: &[Step], tokens: &[String]) -> Result<Vec<u8>> {
    let mut tensors: Vec<(&Step, &'static str, Vec<u8>)> =
        steps.iter().filter_map(|s| encode(s).map(|(dt, _, bytes)| (s, dt, bytes))).collect();
    let width = |dt: &str| match dt {
        "I64" => 0,
        "F32" => 1,
        _ => 2,
    };
    tensors.sort_by(|a, b| (width(a.1), &a.0.id).cmp(&(width(b.1), &b.0.id)));
    let mut header = Map::new();
    header.insert(
        "__metadata__".into(),
        json!({
            "format": "attn-trace",
            "schema_version": crate::trace::schema::SCHEMA_VERSION.to_string(),
            "tokens": serde_json::to_string(tokens)?,
        }),
    );
    let mut offset = 0usize;
    for (step, dtype, bytes) in &tensors {
        header.insert(
            step.id.clone(),
            json!({"dtype": dtype, "shape": step.shape, "data_offsets": [offset, offset + bytes.len()]}),
        );
        offset += bytes.len();
    }
    // serde_json's Map is sorted by key, so the header text is the same on every run.
    let mut head = serde_json::to_vec(&Value::Object(header))?;
    while head.len() % 8 != 0 {
        head.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + head.len() + offset);
    out.extend_from_slice(&(head.len() as u64).to_le_bytes());
    out.extend_from_slice(&head);
    for (_, _, bytes) in &tensors {
        out.extend_from_slice(bytes);
    }
    Ok(out)
}

/// Reads every tensor of a safetensors file (and `tokens` from attn-trace's metadata).
/// `what` names the file in error messages.
///
/// The `safetensors` crate checks the header's length against the file, each tensor's shape
/// against its byte range (with overflow checked), and that the ranges tile the data without
/// gap or overlap, before a value is read; its JSON header is read strictly here as well,
/// since serde would keep the last of a tensor named twice.
pub fn read(bytes: &[u8], what: &str) -> Result<Vec<Named>> {
    let bad = |why: String| {
        usage(
            what,
            format!("not a readable safetensors file ({why})"),
            "pass a file written by safetensors or --save-trace",
        )
    };
    let st = SafeTensors::deserialize(bytes).map_err(|e| bad(e.to_string()))?;
    crate::strict_json::safetensors_header(bytes).map_err(bad)?;
    let mut out = Vec::new();
    let (_, meta) = SafeTensors::read_metadata(bytes).map_err(|e| bad(e.to_string()))?;
    if let Some(text) = meta.metadata().as_ref().and_then(|m| m.get("tokens")) {
        if let Ok(tokens) = serde_json::from_str::<Vec<String>>(text) {
            let shape = vec![tokens.len()];
            out.push(Named { name: "tokens".into(), shape, data: Data::Str(tokens), dtype: "str" });
        }
    }
    let mut names: Vec<String> = st.names().into_iter().map(|s| s.to_string()).collect();
    names.sort();
    for name in names {
        let view = st.tensor(&name).map_err(|e| bad(e.to_string()))?;
        let (values, dtype) = numbers(view.dtype(), view.data()).ok_or_else(|| {
            usage(
                what,
                format!("tensor {name} has dtype {:?}, which attn-trace does not read", view.dtype()),
                "save float32, float64, float16, bfloat16, int64, int32, uint8 or bool tensors",
            )
        })?;
        out.push(Named { name, shape: view.shape().to_vec(), data: Data::Num(values), dtype });
    }
    Ok(out)
}

/// Little-endian elements of a supported dtype as f64, rounded through f32 as attn-trace
/// computes (so that a value read from JSON and from a binary file compare equal), with the
/// dtype's numpy name.
fn numbers(dtype: Dtype, data: &[u8]) -> Option<(Vec<f64>, &'static str)> {
    fn le<const N: usize>(data: &[u8], f: impl Fn([u8; N]) -> f64) -> Vec<f64> {
        data.chunks_exact(N).map(|c| f(c.try_into().unwrap_or([0; N]))).collect()
    }
    Some(match dtype {
        Dtype::F32 => (le::<4>(data, |b| f32::from_le_bytes(b) as f64), "float32"),
        Dtype::F64 => (le::<8>(data, |b| f64::from_le_bytes(b) as f32 as f64), "float64"),
        Dtype::F16 => (le::<2>(data, |b| half::f16::from_le_bytes(b).to_f64()), "float16"),
        Dtype::BF16 => (le::<2>(data, |b| half::bf16::from_le_bytes(b).to_f64()), "bfloat16"),
        Dtype::I64 => (le::<8>(data, |b| i64::from_le_bytes(b) as f64), "int64"),
        Dtype::I32 => (le::<4>(data, |b| i32::from_le_bytes(b) as f64), "int32"),
        Dtype::U8 => (data.iter().map(|&b| b as f64).collect(), "uint8"),
        Dtype::BOOL => (data.iter().map(|&b| b as f64).collect(), "bool"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_mixed_dtypes() {
        let step = |id: &str, values: Values, shape: Vec<usize>| Step {
            id: id.into(),
            layer: None,
            name: id.into(),
            dims: vec!["pos"; shape.len()],
            shape,
            heads: None,
            values,
        };
        let steps = vec![
            step("layers.0.attn.mask", Values::Bool(vec![false, true, false]), vec![3]),
            step("embed.sum", Values::F32(vec![0.1, f32::NEG_INFINITY]), vec![2, 1]),
            step("token_ids", Values::Int(vec![7, 9]), vec![2]),
        ];
        let bytes = write(&steps, &["a".into(), "b".into()]).unwrap();
        assert_eq!(bytes, write(&steps, &["a".into(), "b".into()]).unwrap(), "deterministic");
        let back = read(&bytes, "t").unwrap();
        let get = |n: &str| back.iter().find(|t| t.name == n).unwrap().clone();
        assert_eq!(get("tokens").data, Data::Str(vec!["a".into(), "b".into()]));
        assert_eq!(get("embed.sum").data, Data::Num(vec![0.1f32 as f64, f64::NEG_INFINITY]));
        assert_eq!(get("embed.sum").shape, vec![2, 1]);
        assert_eq!(get("layers.0.attn.mask").data, Data::Num(vec![0.0, 1.0, 0.0]));
        assert_eq!(get("token_ids").data, Data::Num(vec![7.0, 9.0]));
    }
}
