//! A GGUF file's metadata read as a Hugging Face `config.json` of the same model, every value
//! by its type: a key of the wrong type is refused naming the type (not read as missing, nor
//! as 0), a non-finite or non-positive rotary base or epsilon is refused (not replaced by a
//! default), `rope.dimension_count` must be the head width (llama.cpp refuses it otherwise),
//! and `block_count` must be the number of `blk.N` blocks the file holds, checked before any
//! loop runs over the blocks (issue 27).

use super::family::{DecoderConfig, Family, GgufKind};
use crate::error::usage;
use anyhow::Result;
use candle_core::quantized::gguf_file::{Content, Value};
use std::collections::BTreeSet;

/// A GGUF file's parsed header and the name it goes by in messages.
struct Gguf<'a> {
    content: &'a Content,
    what: &'a str,
}

/// A value's GGUF type, as messages name it (`u32`, `f32`, `string`, …).
fn type_name(v: &Value) -> String {
    format!("{:?}", v.value_type()).to_lowercase()
}

fn bad(g: &Gguf<'_>, why: String) -> anyhow::Error {
    usage(g.what, why, "use an intact GGUF file")
}

/// `key` as an unsigned integer of any width; `None` if absent.
fn uint(g: &Gguf<'_>, key: &str) -> Result<Option<u64>> {
    let Some(v) = g.content.metadata.get(key) else { return Ok(None) };
    let n: i128 = match v {
        Value::U8(x) => (*x).into(),
        Value::U16(x) => (*x).into(),
        Value::U32(x) => (*x).into(),
        Value::U64(x) => (*x).into(),
        Value::I8(x) => (*x).into(),
        Value::I16(x) => (*x).into(),
        Value::I32(x) => (*x).into(),
        Value::I64(x) => (*x).into(),
        other => {
            let why = format!("GGUF metadata {key} holds a {}; expected an unsigned integer", type_name(other));
            return Err(bad(g, why));
        }
    };
    u64::try_from(n).map(Some).map_err(|_| bad(g, format!("GGUF metadata {key} is {n}; expected an unsigned integer")))
}

fn required(g: &Gguf<'_>, key: &str) -> Result<u64> {
    uint(g, key)?.ok_or_else(|| missing(g, key))
}

fn missing(g: &Gguf<'_>, key: &str) -> anyhow::Error {
    usage(g.what, format!("the GGUF metadata has no {key}"), "use a complete GGUF file")
}

/// The family's own metadata keys (`Family::gguf_keys`), each read by its type into the
/// config.json key it stands for, then what llama.cpp fixes in code (`Family::gguf_fixed`).
fn family_keys(g: &Gguf<'_>, arch: &str, family: &dyn Family, raw: &mut serde_json::Value) -> Result<()> {
    for key in family.gguf_keys() {
        let name = format!("{arch}.{}", key.key);
        let value = match key.kind {
            GgufKind::Count => uint(g, &name)?.map(serde_json::Value::from),
            GgufKind::Positive => positive(g, &name)?.map(serde_json::Value::from),
        };
        match value {
            Some(v) => raw[key.field] = v,
            None if key.required => return Err(missing(g, &name)),
            None => {}
        }
    }
    let fixed = family.gguf_fixed(raw);
    if let Some(map) = raw.as_object_mut() {
        map.extend(fixed);
    }
    Ok(())
}

/// `key` as a float (f32 or f64) that is finite and positive; `None` if absent.
fn positive(g: &Gguf<'_>, key: &str) -> Result<Option<f64>> {
    let x = match g.content.metadata.get(key) {
        None => return Ok(None),
        Some(Value::F32(x)) => f64::from(*x),
        Some(Value::F64(x)) => *x,
        Some(other) => {
            return Err(bad(g, format!("GGUF metadata {key} holds a {}; expected an f32", type_name(other))));
        }
    };
    if !x.is_finite() || x <= 0.0 {
        return Err(bad(g, format!("GGUF metadata {key} is {x}; expected a finite number above 0")));
    }
    Ok(Some(x))
}

/// `key` as a string; `None` if absent.
fn text(g: &Gguf<'_>, key: &str) -> Result<Option<String>> {
    match g.content.metadata.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(bad(g, format!("GGUF metadata {key} holds a {}; expected a string", type_name(other)))),
    }
}

/// The architecture (`general.architecture`) and the family that reads it.
fn architecture(g: &Gguf<'_>) -> Result<(String, &'static dyn Family)> {
    let arch = text(g, "general.architecture")?.unwrap_or_default();
    let Some(family) = super::family::gguf(&arch) else {
        let model = g.what.trim_start_matches("--model ");
        let whence = "the GGUF's general.architecture";
        return Err(super::unsupported_architecture(model, &arch, whence, &super::family::gguf_archs()));
    };
    Ok((arch, family))
}

/// The block numbers N of the file's `blk.N.*` tensors.
fn blocks(g: &Gguf<'_>) -> BTreeSet<u64> {
    let numbers = g.content.tensor_infos.keys().filter_map(|n| n.strip_prefix("blk.")?.split('.').next()?.parse().ok());
    numbers.collect()
}

/// `block_count` is the number of blocks the file holds, numbered from 0.
fn check_blocks(g: &Gguf<'_>, key: &str, count: u64) -> Result<()> {
    let present = blocks(g);
    let dense = present.iter().enumerate().all(|(i, &n)| i as u64 == n);
    if count != present.len() as u64 || !dense {
        let held = match (present.first(), present.last()) {
            (Some(a), Some(b)) => format!("blocks blk.{a} to blk.{b} ({} in all)", present.len()),
            _ => "no blk.N tensors".into(),
        };
        return Err(bad(g, format!("GGUF metadata {key} is {count} but the file holds {held}")));
    }
    Ok(())
}

/// The metadata as a Hugging Face `config.json` of the same model, checked as one.
pub fn config(content: &Content, what: &str) -> Result<DecoderConfig> {
    let g = &Gguf { content, what };
    let (arch, family) = architecture(g)?;
    let k = |name: &str| format!("{arch}.{name}");
    let embd = g.content.tensor_infos.get("token_embd.weight").map(|t| t.shape.dims().to_vec());
    let vocab = match embd.as_deref() {
        Some([rows, _]) => *rows,
        _ => return Err(usage(g.what, "the GGUF has no 2-D token_embd.weight", "use a complete GGUF file")),
    };
    let scaling = match text(g, &k("rope.scaling.type"))?.filter(|t| t != "none") {
        // llama.cpp divides the frequencies by the factor, as transformers' `linear` does.
        Some(t) if t == "linear" && family.gguf_rope_scaling() => {
            let factor =
                positive(g, &k("rope.scaling.factor"))?.ok_or_else(|| missing(g, &k("rope.scaling.factor")))?;
            serde_json::json!({"rope_type": "linear", "factor": factor})
        }
        Some(t) => {
            return Err(usage(g.what, format!("GGUF rope scaling {t:?} is not supported"), "use a GGUF without it"))
        }
        None => serde_json::Value::Null,
    };
    let layers = required(g, &k("block_count"))?;
    check_blocks(g, &k("block_count"), layers)?;
    let mut raw = serde_json::json!({
        "model_type": family.model_type(),
        "vocab_size": vocab,
        "hidden_size": required(g, &k("embedding_length"))?,
        "num_hidden_layers": layers,
        "num_attention_heads": required(g, &k("attention.head_count"))?,
        "num_key_value_heads": uint(g, &k("attention.head_count_kv"))?,
        "intermediate_size": required(g, &k("feed_forward_length"))?,
        "max_position_embeddings": required(g, &k("context_length"))?,
        "hidden_act": family.default_activation(),
        "rms_norm_eps": positive(g, &k("attention.layer_norm_rms_epsilon"))?.unwrap_or(1e-5),
        "rope_theta": positive(g, &k("rope.freq_base"))?.unwrap_or(10000.0),
        "tie_word_embeddings": !g.content.tensor_infos.contains_key("output.weight"),
        // For --pad-to, as config.json's.
        "pad_token_id": uint(g, "tokenizer.ggml.padding_token_id")?,
        "eos_token_id": uint(g, "tokenizer.ggml.eos_token_id")?,
    });
    if !scaling.is_null() {
        raw["rope_scaling"] = scaling;
    }
    family_keys(g, &arch, family, &mut raw)?;
    let c = DecoderConfig::read(raw, g.what)?;
    let shape = |n: &str| g.content.tensor_infos.get(n).map(|t| t.shape.dims().to_vec());
    // The family's names, as the file stores them.
    let qk = family.qk_names().map(|n| n.map(|n| super::gguf_names::gguf_name(n).unwrap_or_default()));
    let qk = qk.as_ref().map(|[q, k]| [q.as_str(), k.as_str()]);
    super::hf::dims::check(&c, "token_embd.weight", qk, shape, ("the metadata", g.what))?;
    if let Some(n) = uint(g, &k("rope.dimension_count"))?.filter(|&n| n != c.d_head() as u64) {
        let why = format!(
            "GGUF metadata {} is {n} but the heads are {} wide (embedding_length / head_count); \
             partial rotary embeddings are not supported",
            k("rope.dimension_count"),
            c.d_head()
        );
        return Err(bad(g, why));
    }
    Ok(c)
}
