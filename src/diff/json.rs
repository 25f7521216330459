//! JSON inputs of a diff: attn-trace's own document (`steps` with `id`, `shape`, `values`)
//! and the minimal form a user's code writes, an object of named nested arrays,
//! `{"layers.0.attn.weights": [[[…]]], …}`, whose objects may also nest by the dots
//! (`{"layers": {"0": {"attn": {"weights": …}}}}`) and whose `__` keys are notes. Numbers
//! JSON cannot hold are read as attn-trace writes them: the strings "nan", "inf", "-inf".

use crate::error::usage;
use crate::export::Data;
use anyhow::Result;
use serde_json::Value;

/// A step as a file gave it, before its name is resolved.
pub struct Raw {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Data,
    pub dims: Option<Vec<String>>,
    pub heads: Option<Vec<usize>>,
    /// The file's dtype in numpy's words (None for JSON, whose numbers have none).
    pub dtype: Option<&'static str>,
}

/// The steps of an attn-trace JSON document (or of JSONL lines gathered into one).
pub fn doc_steps(doc: &Value, what: &str) -> Result<Vec<Raw>> {
    // Version 2 changed `config.model.tensor_types`, not the steps: both read the same.
    let current = crate::trace::schema::SCHEMA_VERSION as u64;
    if !doc["schema_version"].as_u64().is_some_and(|v| (1..=current).contains(&v)) {
        return Err(usage(
            what,
            format!("schema_version {} is not one this attn-trace reads (1 to {current})", doc["schema_version"]),
            "make both traces with the same attn-trace version",
        ));
    }
    let steps = doc["steps"].as_array().ok_or_else(|| usage(what, "\"steps\" is not an array", "fix the file"))?;
    let generated = generation_steps(doc, what)?;
    let mut out = Vec::with_capacity(steps.len() + generated.len());
    for (i, s) in steps.iter().chain(&generated).enumerate() {
        let bad = |why: &str| usage(what, format!("steps[{i}]: {why}"), "pass attn-trace's unmodified output");
        let id = s["id"].as_str().ok_or_else(|| bad("no string \"id\""))?;
        let (shape, data) = tensor(&s["values"]).map_err(|why| bad(&format!("{id}: {why}")))?;
        if let Some(declared) = s.get("shape") {
            let declared: Option<Vec<usize>> =
                declared.as_array().and_then(|a| a.iter().map(|d| d.as_u64().map(|d| d as usize)).collect());
            if declared.as_ref() != Some(&shape) {
                return Err(bad(&format!("{id}: \"shape\" {} does not match its values {shape:?}", s["shape"])));
            }
        }
        let dims = s["dims"].as_array().map(|a| a.iter().filter_map(|d| d.as_str().map(String::from)).collect());
        let heads = s["heads"].as_array().map(|a| a.iter().filter_map(|h| h.as_u64().map(|h| h as usize)).collect());
        out.push(Raw { name: id.to_string(), shape, data, dims, heads, dtype: None });
    }
    Ok(out)
}

/// A generation's steps (`--generate`): the generated token ids as the step
/// `generation.token_ids`, then every decode step's steps (ids `gen.{t}.…`), so that two
/// generations compare token by token and step by step. None without a generation.
fn generation_steps(doc: &Value, what: &str) -> Result<Vec<Value>> {
    let Some(g) = doc.get("generation") else { return Ok(Vec::new()) };
    let bad = |why: &str| usage(what, format!("generation: {why}"), "pass attn-trace's unmodified output");
    let tokens = g["tokens"].as_array().ok_or_else(|| bad("\"tokens\" is not an array"))?;
    let ids: Vec<Value> = tokens.iter().map(|t| t["id"].clone()).collect();
    let mut out = vec![serde_json::json!({"id": "generation.token_ids", "dims": ["pos"], "values": ids})];
    for d in g["steps"].as_array().ok_or_else(|| bad("\"steps\" is not an array"))? {
        out.extend(
            d["steps"].as_array().ok_or_else(|| bad("a decode step's \"steps\" is not an array"))?.iter().cloned(),
        );
    }
    Ok(out)
}

/// Every named tensor of a JSON object, flattening nested objects by joining keys with dots.
pub fn named_tensors(v: &Value, what: &str) -> Result<Vec<Raw>> {
    let mut out = Vec::new();
    walk(v, "", what, &mut out)?;
    if out.is_empty() {
        return Err(usage(what, "the JSON object holds no tensors", "write {\"layers.0.attn.weights\": [[[…]]], …}"));
    }
    Ok(out)
}

fn walk(v: &Value, prefix: &str, what: &str, out: &mut Vec<Raw>) -> Result<()> {
    let Value::Object(map) = v else {
        return Err(usage(what, "not a JSON object of named tensors", "write {\"layers.0.attn.weights\": [[[…]]], …}"));
    };
    for (k, v) in map {
        if k.starts_with("__") {
            continue;
        }
        let name = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            Value::Object(_) => walk(v, &name, what, out)?,
            _ => {
                let (shape, data) = tensor(v).map_err(|why| {
                    usage(what, format!("{name}: {why}"), "give each name a number or nested arrays of numbers")
                })?;
                out.push(Raw { name, shape, data, dims: None, heads: None, dtype: None });
            }
        }
    }
    Ok(())
}

/// A value as (shape, flat values): nested arrays must be rectangular; leaves are numbers,
/// booleans (1/0), "nan"/"inf"/"-inf", or all strings (token labels).
pub fn tensor(v: &Value) -> Result<(Vec<usize>, Data), String> {
    let mut shape = Vec::new();
    let mut probe = v;
    while let Value::Array(a) = probe {
        shape.push(a.len());
        match a.first() {
            Some(x) => probe = x,
            None => break,
        }
    }
    // The shape follows only the first element at each depth: a small ragged array can claim
    // an enormous one (found by reading the code after fuzzing), so nothing is reserved from
    // it; `collect` checks every row against it as it goes.
    let mut leaves = Vec::new();
    collect(v, &shape, 0, &mut leaves)?;
    let strings = leaves.iter().all(|l| l.is_string()) && !leaves.is_empty();
    if strings && !leaves.iter().all(|l| matches!(l.as_str(), Some("nan" | "inf" | "-inf"))) {
        return Ok((shape, Data::Str(leaves.iter().map(|l| l.as_str().unwrap_or("").to_string()).collect())));
    }
    let mut nums = Vec::with_capacity(leaves.len());
    for leaf in leaves {
        // Rounded through f32, as attn-trace computes: the shortest decimal attn-trace writes
        // then reads back as exactly the f32 it came from.
        nums.push(match leaf {
            Value::Number(n) => n.as_f64().ok_or("a number out of range")? as f32 as f64,
            Value::Bool(b) => *b as u8 as f64,
            Value::String(s) => match s.as_str() {
                "nan" | "NaN" => f64::NAN,
                "inf" | "Infinity" => f64::INFINITY,
                "-inf" | "-Infinity" => f64::NEG_INFINITY,
                other => {
                    return Err(format!(
                        "{other:?} is not a number (non-finite numbers are \"nan\", \"inf\", \"-inf\")"
                    ))
                }
            },
            other => return Err(format!("{other} is not a number")),
        });
    }
    Ok((shape, Data::Num(nums)))
}

fn collect<'a>(v: &'a Value, shape: &[usize], depth: usize, out: &mut Vec<&'a Value>) -> Result<(), String> {
    match v {
        Value::Array(a) => {
            if depth >= shape.len() || a.len() != shape[depth] {
                return Err(format!("ragged nested arrays (expected a rectangular shape {shape:?})"));
            }
            a.iter().try_for_each(|x| collect(x, shape, depth + 1, out))
        }
        _ if depth != shape.len() => Err(format!("ragged nested arrays (expected a rectangular shape {shape:?})")),
        Value::Null => Err("null is not a number (write \"nan\", \"inf\" or \"-inf\")".into()),
        Value::Object(_) => Err("an object inside a tensor".into()),
        leaf => {
            out.push(leaf);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes_non_finite_and_ragged() {
        let (shape, data) = tensor(&json!([[0.5, "-inf"], ["nan", true]])).unwrap();
        assert_eq!(shape, vec![2, 2]);
        let Data::Num(v) = data else { panic!() };
        assert_eq!(v[0], 0.5);
        assert_eq!(v[1], f64::NEG_INFINITY);
        assert!(v[2].is_nan());
        assert_eq!(v[3], 1.0);
        assert!(tensor(&json!([[1.0], [1.0, 2.0]])).is_err());
        assert!(tensor(&json!([[1.0], 2.0])).is_err());
        assert_eq!(tensor(&json!(3)).unwrap(), (vec![], Data::Num(vec![3.0])));
        assert_eq!(tensor(&json!(["a", "b"])).unwrap().1, Data::Str(vec!["a".into(), "b".into()]));
    }

    #[test]
    fn nested_objects_join_by_dots() {
        let raws =
            named_tensors(&json!({"__note": "x", "layers": {"0": {"attn": {"weights": [[1.0]]}}}}), "t").unwrap();
        assert_eq!(raws.len(), 1);
        assert_eq!(raws[0].name, "layers.0.attn.weights");
    }
}
