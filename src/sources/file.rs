//! Weight files in and out: safetensors (what `--save-weights` writes) and a hand-typeable
//! JSON form, `{"embed.token.weight": [[…], …], …}`, whose objects may also nest
//! (`{"embed": {"token": {"weight": …}}}`). Keys starting with `__` are notes and are skipped.
//! Names and layouts are those of [`super::Params`].

use crate::config::{ModelConfig, Positions};
use crate::error::usage;
use crate::params::{Block, Dense, Ffn, LayerNorm, LayerParams, Layers, Linear, Params};
use crate::trace::steps;
use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use std::collections::BTreeMap;

/// Named tensors as read from a file, f32 on the CPU.
pub type NamedTensors = BTreeMap<String, Tensor>;

/// Parses a weights file's bytes (JSON or safetensors); the fuzz targets call this directly.
pub fn parse(bytes: &[u8], is_json: bool, what: &str) -> Result<NamedTensors> {
    let named = if is_json { parse_json(bytes, what)? } else { parse_safetensors(bytes, what)? };
    if named.is_empty() {
        return Err(usage(what, "the file holds no tensors", "save weights with --save-weights, or list them by name"));
    }
    Ok(named)
}

/// Names of tensors holding NaN or an infinity: allowed (the trace shows what they do), but
/// worth a note, since they are rarely meant.
pub fn non_finite(named: &NamedTensors) -> Vec<String> {
    named
        .iter()
        .filter(|(_, t)| {
            t.flatten_all().and_then(|f| f.to_vec1::<f32>()).map(|v| v.iter().any(|x| !x.is_finite())).unwrap_or(false)
        })
        .map(|(n, _)| n.clone())
        .collect()
}

fn parse_safetensors(bytes: &[u8], what: &str) -> Result<NamedTensors> {
    let bad = |why: String| {
        usage(
            what,
            format!("not a readable safetensors file ({why})"),
            "pass a file written by --save-weights, or a .json weights file",
        )
    };
    let map = candle_core::safetensors::load_buffer(bytes, &Device::Cpu).map_err(|e| bad(one_line(&e.to_string())))?;
    crate::strict_json::safetensors_header(bytes).map_err(bad)?;
    let mut out = NamedTensors::new();
    for (name, t) in map {
        let t = match t.dtype() {
            DType::F32 => t,
            DType::F16 | DType::BF16 | DType::F64 => t.to_dtype(DType::F32)?,
            other => {
                return Err(usage(
                    what,
                    format!("tensor {name} has dtype {other:?}"),
                    "store weights as float32 (f16, bf16 and f64 are converted)",
                ))
            }
        };
        out.insert(name, t);
    }
    Ok(out)
}

fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

fn parse_json(bytes: &[u8], what: &str) -> Result<NamedTensors> {
    let value: serde_json::Value = crate::strict_json::parse(bytes).map_err(|e| {
        usage(
            what,
            format!("not valid JSON: {e}"),
            "write an object of named nested arrays, e.g. {\"embed.token.weight\": [[0.1, 0.2]]}",
        )
    })?;
    let serde_json::Value::Object(obj) = value else {
        return Err(usage(what, "the top level is not an object", "write an object of named nested arrays"));
    };
    let mut out = NamedTensors::new();
    flatten(&obj, "", &mut out, what)?;
    Ok(out)
}

fn flatten(
    obj: &serde_json::Map<String, serde_json::Value>,
    prefix: &str,
    out: &mut NamedTensors,
    what: &str,
) -> Result<()> {
    for (k, v) in obj {
        // "__about__" and friends are notes for people, like safetensors' "__metadata__".
        if k.starts_with("__") {
            continue;
        }
        let name = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        // One tensor spelled both flat ("a.b") and nested ({"a": {"b": …}}) is one too many.
        if out.contains_key(&name) {
            return Err(usage(what, format!("tensor {name} is given twice"), "give each tensor once"));
        }
        match v {
            serde_json::Value::Object(inner) => flatten(inner, &name, out, what)?,
            serde_json::Value::Array(_) => {
                let (shape, values) = array(v, &name, what)?;
                out.insert(name, Tensor::from_vec(values, shape, &Device::Cpu)?);
            }
            _ => {
                return Err(usage(
                    what,
                    format!("{name} is not an array of numbers"),
                    "give every tensor as a (nested) array",
                ))
            }
        }
    }
    Ok(())
}

/// A rectangular nested array of numbers → (shape, row-major values). Non-finite numbers
/// may be written as the strings "nan", "inf" and "-inf", as attn-trace writes them.
pub fn array(v: &serde_json::Value, name: &str, what: &str) -> Result<(Vec<usize>, Vec<f32>)> {
    let mut shape = Vec::new();
    let mut probe = v;
    while let serde_json::Value::Array(items) = probe {
        shape.push(items.len());
        match items.first() {
            Some(first) => probe = first,
            None => break,
        }
    }
    let mut values = Vec::new();
    collect(v, 0, &shape, &mut values)
        .map_err(|why| usage(what, format!("{name}: {why}"), "give every tensor as a rectangular array of numbers"))?;
    Ok((shape, values))
}

fn collect(
    v: &serde_json::Value,
    depth: usize,
    shape: &[usize],
    out: &mut Vec<f32>,
) -> std::result::Result<(), String> {
    match v {
        serde_json::Value::Array(items) => {
            if depth >= shape.len() || items.len() != shape[depth] {
                return Err(format!("rows of different lengths at depth {depth}"));
            }
            items.iter().try_for_each(|i| collect(i, depth + 1, shape, out))
        }
        _ if depth != shape.len() => Err(format!("a number where an array was expected at depth {depth}")),
        serde_json::Value::Number(n) => {
            out.push(n.as_f64().ok_or("a number that is not representable")? as f32);
            Ok(())
        }
        serde_json::Value::String(s) => {
            out.push(match s.as_str() {
                "nan" | "NaN" => f32::NAN,
                "inf" | "Infinity" => f32::INFINITY,
                "-inf" | "-Infinity" => f32::NEG_INFINITY,
                _ => return Err(format!("the string {s:?} is not a number")),
            });
            Ok(())
        }
        other => Err(format!("{other} is not a number")),
    }
}

/// What a weights file fixes about the model, read from the tensors' shapes.
#[derive(Debug, Clone, PartialEq)]
pub struct FileDims {
    pub d_model: usize,
    pub vocab_size: Option<usize>,
    pub max_len: Option<usize>,
    pub layers: usize,
    pub qk_width: usize,
    pub v_width: usize,
    /// Rows of the key projection (fewer than `qk_width` with grouped-query attention).
    pub k_width: usize,
    /// Decoder parts the file holds: a gated FFN, a final norm, its own LM head.
    pub gated: bool,
    /// A final norm, named `final_norm.*` or, as `nn.TransformerEncoder(norm=…)` names it,
    /// `norm.*`.
    pub final_norm: bool,
    pub lm_head: bool,
    /// `None`: no FFN (`layers.0.ffn.linear1.weight`), so the layers are attention alone.
    pub d_ff: Option<usize>,
    /// Rows of the output projection; `None` when there is none.
    pub out_width: Option<usize>,
    pub attn_bias: bool,
    pub out_bias: bool,
    pub ffn_bias: bool,
}

/// The two names a final norm's tensors may have: attn-trace's, and `nn.TransformerEncoder`'s.
const FINAL_NORM_NAMES: [&str; 2] = ["final_norm", "norm"];

fn dims_of(named: &NamedTensors, name: &str, what: &str) -> Result<Vec<usize>> {
    named.get(name).map(|t| t.dims().to_vec()).ok_or_else(|| {
        usage(
            what,
            format!("tensor {name} is missing"),
            "see the weight-file names in docs/TOY.md; save a complete file with --save-weights",
        )
    })
}

/// Reads the model's dimensions from the file's shapes (checked in full by [`params`]).
pub fn infer(named: &NamedTensors, what: &str) -> Result<FileDims> {
    let layers = (0usize..).take_while(|&i| named.keys().any(|k| k.starts_with(&steps::layer_id(i, "")))).count();
    if layers == 0 {
        return Err(usage(what, "no layers.0.* tensors", "name layer tensors layers.0.attn.q_proj.weight and so on"));
    }
    let q = dims_of(named, "layers.0.attn.q_proj.weight", what)?;
    let v = dims_of(named, "layers.0.attn.v_proj.weight", what)?;
    // An attention-only file has no FFN; its other tensors are checked by `params`.
    let l1 = named.get("layers.0.ffn.linear1.weight").map(|t| t.dims().to_vec()).unwrap_or(vec![1, 1]);
    if q.len() != 2 || v.len() != 2 || l1.len() != 2 {
        return Err(usage(what, "projection weights must be 2-D [out, in]", "store each Linear weight as [out, in]"));
    }
    if q.contains(&0) || v.contains(&0) || l1.contains(&0) {
        return Err(usage(
            what,
            format!("a projection has no rows or columns (q {q:?}, v {v:?}, linear1 {l1:?})"),
            "give every Linear weight at least one row and one column",
        ));
    }
    // A table must be 2-D [rows, d_model]; a 0-D one once panicked here (fuzzing seed added).
    let table = |name: &str| -> Result<Option<usize>> {
        match named.get(name).map(|t| t.dims().to_vec()) {
            Some(d) if d.len() != 2 => Err(usage(
                what,
                format!("tensor {name} has shape {d:?}, not [rows, d_model]"),
                "store embedding tables as 2-D arrays",
            )),
            d => Ok(d.map(|d| d[0])),
        }
    };
    Ok(FileDims {
        d_model: q[1],
        vocab_size: table("embed.token.weight")?,
        max_len: table("embed.position.weight")?,
        layers,
        qk_width: q[0],
        v_width: v[0],
        // A missing k_proj is reported by `params`, with every other missing tensor.
        k_width: named.get("layers.0.attn.k_proj.weight").and_then(|t| t.dims().first().copied()).unwrap_or(q[0]),
        gated: named.contains_key("layers.0.ffn.gate.weight"),
        final_norm: FINAL_NORM_NAMES
            .iter()
            .any(|p| named.contains_key(&format!("{p}.weight")) || named.contains_key(&format!("{p}.bias"))),
        lm_head: named.contains_key("lm_head.weight"),
        d_ff: named.contains_key("layers.0.ffn.linear1.weight").then_some(l1[0]),
        out_width: named.get("layers.0.attn.out_proj.weight").and_then(|t| t.dims().first().copied()),
        attn_bias: named.contains_key("layers.0.attn.q_proj.bias"),
        out_bias: named.contains_key("layers.0.attn.out_proj.bias"),
        ffn_bias: named.contains_key("layers.0.ffn.linear1.bias"),
    })
}

/// Builds [`Params`] from the file, checking every tensor's presence and shape against `cfg`.
/// LayerNorm parameters may be left out (PyTorch's init: weight 1, bias 0); anything else
/// missing, any unknown name and any wrong shape is an error naming the tensor.
pub fn params(mut named: NamedTensors, cfg: &ModelConfig, what: &str) -> Result<Params> {
    let d = cfg.d_model;
    let n = &mut named;
    let token = if cfg.raw_input { None } else { Some(take(n, "embed.token.weight", &[cfg.vocab_size, d], what)?) };
    let position = if cfg.positions == Positions::Learned {
        Some(take(n, "embed.position.weight", &[cfg.max_len, d], what)?)
    } else {
        None
    };
    let mut layers = Vec::new();
    for i in 0..cfg.layers {
        let p = steps::layer_id(i, "");
        let p = p.trim_end_matches('.');
        let mut lin = |name: &str, d_in: usize, d_out: usize, bias: bool| -> Result<Linear> {
            Ok(Linear {
                weight: take(n, &format!("{p}.{name}.weight"), &[d_out, d_in], what)?,
                bias: if bias { Some(take(n, &format!("{p}.{name}.bias"), &[d_out], what)?) } else { None },
                ggml: None,
            })
        };
        let q_proj = lin("attn.q_proj", d, cfg.qk_width(), cfg.attn_bias)?;
        let k_proj = lin("attn.k_proj", d, cfg.k_width(), cfg.attn_bias)?;
        let v_proj = lin("attn.v_proj", d, cfg.kv_v_width(), cfg.attn_bias)?;
        let out_proj = if cfg.parts.no_out_proj {
            None
        } else {
            Some(lin("attn.out_proj", cfg.v_width(), cfg.out_width(), cfg.out_bias())?)
        };
        let block = if cfg.parts.attention_only {
            None
        } else {
            let gate = if cfg.parts.gated_ffn { Some(lin("ffn.gate", d, cfg.d_ff, cfg.ffn_bias)?) } else { None };
            let linear1 = lin("ffn.linear1", d, cfg.d_ff, cfg.ffn_bias)?;
            let linear2 = lin("ffn.linear2", cfg.d_ff, d, cfg.ffn_bias)?;
            let norm1 = norm(n, &format!("{p}.norm1"), cfg, what)?;
            let norm2 = norm(n, &format!("{p}.norm2"), cfg, what)?;
            Some(Block {
                norm1,
                ffn: Ffn::Dense(Dense { linear1, linear2, gate }),
                norm2,
                post_attn_norm: None,
                post_ffn_norm: None,
            })
        };
        layers.push(LayerParams { q_proj, k_proj, v_proj, out_proj, block, qk_norm: None, cross: None });
    }
    let final_norm = if cfg.parts.final_norm { Some(final_norm(n, cfg, what)?) } else { None };
    let lm_head = match &cfg.parts.lm_head {
        Some(h) if !h.tied => {
            Some(Linear { weight: take(n, "lm_head.weight", &[cfg.vocab_size, d], what)?, bias: None, ggml: None })
        }
        _ => None,
    };
    if let Some(extra) = named.keys().next() {
        let more = named.len() - 1;
        let tail = if more > 0 { format!(" and {more} more") } else { String::new() };
        return Err(usage(
            what,
            format!("unexpected tensor {extra}{tail}"),
            "check the name against the weight-file names in docs/TOY.md, or the flags (--layers, --positions, --attn-bias) that say which tensors exist",
        ));
    }
    Ok(Params {
        token,
        token_rows: None,
        position,
        token_type: None,
        embed_norm: None,
        layers: Layers::Ready(layers),
        final_norm,
        lm_head,
        mlm: None,
        stored: None,
        relative_bias: None,
        decoder: None,
    })
}

fn take(named: &mut NamedTensors, name: &str, shape: &[usize], what: &str) -> Result<Tensor> {
    let t = named.remove(name).ok_or_else(|| {
        usage(
            what,
            format!("tensor {name} {shape:?} is missing"),
            "see the weight-file names in docs/TOY.md; save a complete file with --save-weights",
        )
    })?;
    if t.dims() != shape {
        return Err(usage(
            what,
            format!("tensor {name} has shape {:?} but the model needs {shape:?}", t.dims()),
            "make the file's shapes agree with the flags, or drop the contradicting flag",
        ));
    }
    Ok(t)
}

/// The final norm, under attn-trace's name or `nn.TransformerEncoder`'s (`norm.*`), not both.
fn final_norm(named: &mut NamedTensors, cfg: &ModelConfig, what: &str) -> Result<LayerNorm> {
    let has =
        |named: &NamedTensors, p: &str| ["weight", "bias"].iter().any(|t| named.contains_key(&format!("{p}.{t}")));
    let [ours, torch] = FINAL_NORM_NAMES;
    if has(named, ours) && has(named, torch) {
        return Err(usage(
            what,
            format!("the final norm is given twice, as {ours}.* and as {torch}.*"),
            "keep one of the two names",
        ));
    }
    norm(named, if has(named, torch) { torch } else { ours }, cfg, what)
}

/// A LayerNorm's parameters, defaulting to PyTorch's initial ones and zeros when absent.
fn norm(named: &mut NamedTensors, prefix: &str, cfg: &ModelConfig, what: &str) -> Result<LayerNorm> {
    let d = cfg.d_model;
    let (w, b) = (format!("{prefix}.weight"), format!("{prefix}.bias"));
    if cfg.parts.rms_norm {
        let weight = if named.contains_key(&w) {
            take(named, &w, &[d], what)?
        } else {
            Tensor::ones(d, DType::F32, &Device::Cpu)?
        };
        return Ok(LayerNorm { weight, bias: None });
    }
    let weight =
        if named.contains_key(&w) { take(named, &w, &[d], what)? } else { Tensor::ones(d, DType::F32, &Device::Cpu)? };
    let bias =
        if named.contains_key(&b) { take(named, &b, &[d], what)? } else { Tensor::zeros(d, DType::F32, &Device::Cpu)? };
    Ok(LayerNorm { weight, bias: Some(bias) })
}
