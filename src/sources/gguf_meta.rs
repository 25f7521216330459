//! A GGUF file's metadata read as a Hugging Face `config.json` of the same model, every value
//! by its type: a key of the wrong type is refused naming the type (not read as missing, nor
//! as 0), a non-finite or non-positive rotary base or epsilon is refused (not replaced by a
//! default), `rope.dimension_count` must be the head width unless the family turns part of
//! each head (GPT-NeoX, Phi-3: then it is the rotary width, even and within the head), and
//! `block_count` must be the number of `blk.N` blocks the file holds, checked before any
//! loop runs over the blocks (issue 27). Phi-3's LongRoPE factors are tensors
//! (`rope_factors_long.weight`, `rope_factors_short.weight`), read as config.json's
//! `rope_scaling`; llama.cpp's `rope.scaling.attn_factor` is not read, since transformers'
//! rule recomputes it from the two context lengths.

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

/// `key` as a boolean; `None` if absent.
fn flag(g: &Gguf<'_>, key: &str) -> Result<Option<bool>> {
    match g.content.metadata.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(bad(g, format!("GGUF metadata {key} holds a {}; expected a bool", type_name(other)))),
    }
}

/// `key` as a string; `None` if absent.
fn text(g: &Gguf<'_>, key: &str) -> Result<Option<String>> {
    match g.content.metadata.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(bad(g, format!("GGUF metadata {key} holds a {}; expected a string", type_name(other)))),
    }
}

/// The architecture (`general.architecture`) and the family that reads it (with experts when
/// `{arch}.expert_count` is above 0).
fn architecture(g: &Gguf<'_>) -> Result<(String, &'static dyn Family)> {
    let arch = text(g, "general.architecture")?.unwrap_or_default();
    let experts = uint(g, &format!("{arch}.expert_count"))?.is_some_and(|n| n > 0);
    let Some(family) = super::family::gguf(&arch, experts) else {
        let model = g.what.trim_start_matches("--model ");
        let whence = "the GGUF's general.architecture";
        return Err(super::common::unsupported_architecture(model, &arch, whence, &super::family::gguf_archs()));
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

/// A mixture of experts' counts (`expert_count` above 0), checked by their GGUF keys before
/// they are read as a config.json's: experts per token from 1 to the count, and the count
/// the routers' rows (`blk.0.ffn_gate_inp`).
fn check_experts(g: &Gguf<'_>, arch: &str) -> Result<()> {
    let k = |name: &str| format!("{arch}.{name}");
    let Some(count) = uint(g, &k("expert_count"))?.filter(|&n| n > 0) else { return Ok(()) };
    let used = required(g, &k("expert_used_count"))?;
    if used == 0 || used > count {
        let why = format!(
            "GGUF metadata {} is {used}; expected 1 to {} ({count})",
            k("expert_used_count"),
            k("expert_count")
        );
        return Err(bad(g, why));
    }
    let router = "blk.0.ffn_gate_inp.weight";
    let rows = g.content.tensor_infos.get(router).and_then(|t| t.shape.dims().first().copied());
    if let Some(rows) = rows.filter(|&r| r as u64 != count) {
        return Err(bad(
            g,
            format!("GGUF metadata {} is {count} but tensor {router} holds {rows} experts", k("expert_count")),
        ));
    }
    Ok(())
}

/// The metadata as a Hugging Face `config.json` of the same model, checked as one. `vector`
/// reads a small 1-D tensor (LongRoPE's factors) as f32.
pub fn config(content: &Content, what: &str, vector: &dyn Fn(&str) -> Result<Vec<f32>>) -> Result<DecoderConfig> {
    let g = &Gguf { content, what };
    let (arch, family) = architecture(g)?;
    let k = |name: &str| format!("{arch}.{name}");
    let embd = g.content.tensor_infos.get("token_embd.weight").map(|t| t.shape.dims().to_vec());
    let vocab = match embd.as_deref() {
        Some([rows, _]) => *rows,
        _ => return Err(usage(g.what, "the GGUF has no 2-D token_embd.weight", "use a complete GGUF file")),
    };
    let scaling = rope_scaling(g, &arch, family)?;
    let layers = required(g, &k("block_count"))?;
    check_blocks(g, &k("block_count"), layers)?;
    let (embd, heads) = (required(g, &k("embedding_length"))?, required(g, &k("attention.head_count"))?);
    // The rotary width of a family that turns part of each head (no heads: `read` refuses).
    let dh = embd.checked_div(heads);
    let rope_dims = match dh {
        Some(dh) if family.partial_rotary() => Some(partial_rope_dims(g, &k("rope.dimension_count"), dh)?),
        _ => None,
    };
    let theta = positive(g, &k("rope.freq_base"))?.unwrap_or(10000.0);
    check_experts(g, &arch)?;
    let mut raw = serde_json::json!({
        "model_type": family.model_type(),
        "vocab_size": vocab,
        "hidden_size": embd,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": uint(g, &k("attention.head_count_kv"))?,
        "intermediate_size": required(g, &k("feed_forward_length"))?,
        "max_position_embeddings": required(g, &k("context_length"))?,
        "hidden_act": family.default_activation(),
        "rms_norm_eps": positive(g, &k("attention.layer_norm_rms_epsilon"))?.unwrap_or(1e-5),
        "layer_norm_eps": positive(g, &k("attention.layer_norm_epsilon"))?,
        "rope_theta": theta,
        "rotary_emb_base": theta,
        "use_parallel_residual": flag(g, &k("use_parallel_residual"))?,
        // Phi-3's converter writes 0 for no window.
        "sliding_window": uint(g, &k("attention.sliding_window"))?.filter(|&w| w > 0),
        "original_max_position_embeddings": uint(g, &k("rope.scaling.original_context_length"))?,
        "rope_scaling": longrope(g, vector, rope_dims.or(dh).unwrap_or(0) / 2)?,
        "tie_word_embeddings": !g.content.tensor_infos.contains_key("output.weight"),
        // For --pad-to, as config.json's.
        "pad_token_id": uint(g, "tokenizer.ggml.padding_token_id")?,
        "eos_token_id": uint(g, "tokenizer.ggml.eos_token_id")?,
        // A mixture of experts: Mixtral's count key, Qwen's, and the experts' widths.
        "num_local_experts": uint(g, &k("expert_count"))?,
        "num_experts": uint(g, &k("expert_count"))?,
        "num_experts_per_tok": uint(g, &k("expert_used_count"))?,
        "moe_intermediate_size": uint(g, &k("expert_feed_forward_length"))?,
        "shared_expert_intermediate_size": uint(g, &k("expert_shared_feed_forward_length"))?,
    });
    if !scaling.is_null() {
        raw["rope_scaling"] = scaling;
    }
    family_keys(g, &arch, family, &mut raw)?;
    let c = DecoderConfig::read_with(raw, g.what, rope_dims.map(|n| n as usize))?;
    check_shapes(g, &arch, family, &c, rope_dims.is_some())?;
    Ok(c)
}

/// The sizes the config says against the stored shapes (`hf/dims.rs`), and a rotary width
/// other than the head's refused unless the family turns part of each head (`partial`).
fn check_shapes(g: &Gguf<'_>, arch: &str, family: &dyn Family, c: &DecoderConfig, partial: bool) -> Result<()> {
    let k = |name: &str| format!("{arch}.{name}");
    let shape = |n: &str| g.content.tensor_infos.get(n).map(|t| t.shape.dims().to_vec());
    // The family's names, as the file stores them.
    let qk = family.qk_names().map(|n| n.map(|n| super::gguf_names::gguf_name(n).unwrap_or_default()));
    let qk = qk.as_ref().map(|[q, k]| [q.as_str(), k.as_str()]);
    super::hf::dims::check(c, "token_embd.weight", qk, shape, ("the metadata", g.what))?;
    if let Some(n) = uint(g, &k("rope.dimension_count"))?.filter(|&n| n != c.d_head() as u64 && !partial) {
        let why = format!(
            "GGUF metadata {} is {n} but the heads are {} wide (embedding_length / head_count); \
             partial rotary embeddings are not supported",
            k("rope.dimension_count"),
            c.d_head()
        );
        return Err(bad(g, why));
    }
    Ok(())
}

/// llama.cpp's rope scaling as config.json's `rope_scaling` (null without one): `linear`
/// where the family reads it (llama.cpp divides the frequencies by the factor, as
/// transformers' `linear` does); any other type is refused.
fn rope_scaling(g: &Gguf<'_>, arch: &str, family: &dyn Family) -> Result<serde_json::Value> {
    let k = |name: &str| format!("{arch}.{name}");
    Ok(match text(g, &k("rope.scaling.type"))?.filter(|t| t != "none") {
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
    })
}

/// The rotary width `key` states for a family that turns part of each head: an even number
/// from 2 to the head width `dh` (llama.cpp's default when absent: the head width).
fn partial_rope_dims(g: &Gguf<'_>, key: &str, dh: u64) -> Result<u64> {
    let n = uint(g, key)?.unwrap_or(dh);
    if n < 2 || !n.is_multiple_of(2) || n > dh {
        let why = format!("GGUF metadata {key} is {n}; expected an even rotary width from 2 to the heads' {dh}");
        return Err(bad(g, why));
    }
    Ok(n)
}

/// Phi-3's LongRoPE factors, which llama.cpp stores as the tensors `rope_factors_long.weight`
/// and `rope_factors_short.weight` (one factor per rotary pair, `pairs` of them), as the
/// `rope_scaling` of config.json; null when the file has neither.
fn longrope(g: &Gguf<'_>, vector: &dyn Fn(&str) -> Result<Vec<f32>>, pairs: u64) -> Result<serde_json::Value> {
    let names = ["rope_factors_long.weight", "rope_factors_short.weight"];
    let held = names.map(|n| g.content.tensor_infos.get(n));
    let [Some(long), Some(short)] = held else {
        return match held.iter().position(Option::is_some) {
            None => Ok(serde_json::Value::Null),
            Some(i) => Err(bad(g, format!("the GGUF has {} but not {}", names[i], names[1 - i]))),
        };
    };
    for (name, info) in names.iter().zip([long, short]) {
        let dims = info.shape.dims();
        if dims != [pairs as usize] {
            let why = format!("GGUF tensor {name} has shape {dims:?}; expected [{pairs}], one factor per rotary pair");
            return Err(bad(g, why));
        }
    }
    let factors = |name: &str| -> Result<Vec<f64>> { Ok(vector(name)?.into_iter().map(f64::from).collect()) };
    Ok(serde_json::json!({"type": "longrope", "long_factor": factors(names[0])?, "short_factor": factors(names[1])?}))
}
