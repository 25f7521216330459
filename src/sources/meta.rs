//! The settings a weights file carries: `--save-weights` writes every setting that shapes the
//! numbers (dims, heads, mask, norm, activation, eps, positions, scale, decoder parts) and the
//! input (sentence, tokens, ids) into the safetensors `__metadata__`, a map of strings that
//! Python reads with `safetensors.safe_open(path, "np").metadata()`. `--weights` reads them
//! back: each becomes the default of its flag, a flag that restates it is accepted, and a flag
//! that contradicts it is an error naming both values. A `.json` weights file may carry the
//! same map under `"__metadata__"`.
//!
//! Only a map whose `format` is [`FORMAT`] is read, so the metadata of other programs'
//! safetensors files (transformers writes `{"format": "pt"}`) is ignored. Every value is a
//! string: numbers in Rust's shortest round-trip form (Python's `float()` reads them exactly),
//! booleans `true`/`false`, lists as JSON.

use crate::config::{Activation, ModelConfig, Norm, Positions};
use crate::error::{quote, usage};
use crate::settings::Shape;
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::Path;

/// The `format` value that marks attn-trace's weights metadata.
pub const FORMAT: &str = "attn-trace-weights";

/// The metadata as strings, ordered by key (so the file's bytes are the same on every run).
pub type Metadata = BTreeMap<String, String>;

/// The input a weights file was saved with.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredInput {
    pub sentence: Option<String>,
    pub tokens: Vec<String>,
    /// `None` when the run read a raw `--input` matrix (which the file does not hold).
    pub ids: Option<Vec<u32>>,
}

impl StoredInput {
    /// The token ids, for a run that gives no sentence of its own.
    pub fn ids(&self, w: &str) -> Result<Vec<u32>> {
        self.ids.clone().ok_or_else(|| {
            crate::error::usage(
                "sentence",
                format!("none was given, and {w} was saved from a raw --input matrix, which it does not hold"),
                "pass the matrix again with --input FILE, or a sentence",
            )
        })
    }
}

/// What a weights file's metadata says: the settings as if typed, and the input.
#[derive(Debug, Clone)]
pub struct FileSettings {
    pub shape: Shape,
    pub input: StoredInput,
}

/// The metadata `--save-weights` writes for a run of `cfg` on this input.
pub fn describe(cfg: &ModelConfig, sentence: Option<&str>, tokens: &[String], ids: Option<&[u32]>) -> Metadata {
    let mut m = Metadata::new();
    let mut put = |k: &str, v: String| m.insert(k.to_string(), v);
    put("format", FORMAT.into());
    put("schema_version", crate::trace::schema::SCHEMA_VERSION.to_string());
    for (k, v) in [
        ("d_model", cfg.d_model),
        ("heads", cfg.heads),
        ("kv_heads", cfg.kv_heads()),
        ("d_k", cfg.d_k),
        ("d_v", cfg.d_v),
        ("d_ff", cfg.d_ff),
        ("layers", cfg.layers),
        ("vocab_size", cfg.vocab_size),
        ("max_len", cfg.max_len),
    ] {
        put(k, v.to_string());
    }
    for (k, v) in [
        ("causal", cfg.causal),
        ("attn_bias", cfg.attn_bias),
        ("ffn_bias", cfg.ffn_bias),
        ("rms_norm", cfg.parts.rms_norm),
        ("gated_ffn", cfg.parts.gated_ffn),
        ("final_norm", cfg.parts.final_norm),
        ("raw_input", cfg.raw_input),
        ("attention_only", cfg.parts.attention_only),
        ("no_out_proj", cfg.parts.no_out_proj),
        ("separate_heads", cfg.parts.separate_heads),
    ] {
        put(k, v.to_string());
    }
    if let Some(d) = cfg.parts.d_out {
        put("d_out", d.to_string());
    }
    put("positions", cfg.positions.name().into());
    put("norm", cfg.norm.name().into());
    put("activation", cfg.activation.name().into());
    put("scale", cfg.scale.to_string());
    put("eps", cfg.eps.to_string());
    if let Some(rope) = &cfg.parts.rope {
        put("rope_theta", rope.theta.to_string());
    }
    let head = match &cfg.parts.lm_head {
        None => "none",
        Some(h) if h.tied => "tied",
        Some(_) => "own",
    };
    put("lm_head", head.into());
    if let Some(s) = sentence {
        put("sentence", s.to_string());
    }
    // Serialising a list of strings or numbers cannot fail.
    put("tokens", serde_json::to_string(tokens).unwrap_or_default());
    if let Some(ids) = ids {
        put("token_ids", serde_json::to_string(ids).unwrap_or_default());
    }
    m
}

/// Reads attn-trace's settings from a file's metadata; `None` when the map is not attn-trace's
/// (an older `--save-weights` file, or another program's).
pub fn read(meta: &Metadata, what: &str) -> Result<Option<FileSettings>> {
    if meta.get("format").map(String::as_str) != Some(FORMAT) {
        return Ok(None);
    }
    let r = Reader { meta, what };
    let shape = Shape {
        d_model: Some(r.num("d_model")?),
        heads: Some(r.num("heads")?),
        d_k: Some(r.num("d_k")?),
        d_v: Some(r.num("d_v")?),
        // An attention-only model has no FFN: d_ff 0.
        d_ff: Some(r.num("d_ff")).filter(|_| r.get("d_ff").ok() != Some("0")).transpose()?,
        layers: Some(r.num("layers")?),
        max_len: Some(r.num("max_len")?),
        positions: Some(r.choice(
            "positions",
            &[Positions::Learned, Positions::Sinusoidal, Positions::None, Positions::Rotary],
            |p| p.name(),
        )?),
        norm: Some(r.choice("norm", &[Norm::Post, Norm::Pre], |n| n.name())?),
        activation: Some(r.choice(
            "activation",
            &[Activation::Relu, Activation::Gelu, Activation::GeluTanh, Activation::Silu],
            |a| a.name(),
        )?),
        causal: r.flag("causal")?,
        scale: Some(r.float("scale")?),
        eps: Some(r.float("eps")?),
        attn_bias: r.flag("attn_bias")?,
        no_ffn_bias: !r.flag("ffn_bias")?,
        rms_norm: r.flag("rms_norm")?,
        rope_theta: r.meta.contains_key("rope_theta").then(|| r.float("rope_theta")).transpose()?,
        gated: r.flag("gated_ffn")?,
        kv_heads: Some(r.num("kv_heads")?),
        final_norm: r.flag("final_norm")?,
        // The textbook forms; the biases are the file's tensors' to say.
        attention_only: r.flag("attention_only")?,
        no_out_proj: r.flag("no_out_proj")?,
        separate_heads: r.flag("separate_heads")?,
        d_out: r.meta.contains_key("d_out").then(|| r.num("d_out")).transpose()?,
        qkv_bias: false,
        out_proj_bias: false,
        lm_head: match r.get("lm_head")? {
            "none" => None,
            "tied" => Some(true),
            "own" => Some(false),
            other => return Err(r.bad("lm_head", other, "none, tied or own")),
        },
    };
    let tokens: Vec<String> = r.json("tokens")?;
    let ids: Option<Vec<u32>> = r.meta.contains_key("token_ids").then(|| r.json("token_ids")).transpose()?;
    if ids.as_ref().is_some_and(|ids| ids.len() != tokens.len()) {
        return Err(usage(what, "its metadata has different numbers of tokens and token_ids", "save the file again"));
    }
    let input = StoredInput { sentence: meta.get("sentence").cloned(), tokens, ids };
    Ok(Some(FileSettings { shape, input }))
}

/// Reads typed values out of the metadata, naming the key and the file on failure.
struct Reader<'a> {
    meta: &'a Metadata,
    what: &'a str,
}

impl Reader<'_> {
    fn get(&self, key: &str) -> Result<&str> {
        self.meta.get(key).map(String::as_str).ok_or_else(|| {
            usage(self.what, format!("its attn-trace metadata lacks {key}"), "save the file again with --save-weights")
        })
    }

    fn bad(&self, key: &str, value: &str, want: &str) -> anyhow::Error {
        usage(
            self.what,
            format!("metadata {key} is {}, not {want}", quote(value)),
            "save the file again with --save-weights",
        )
    }

    fn num(&self, key: &str) -> Result<usize> {
        let v = self.get(key)?;
        v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| self.bad(key, v, "a positive whole number"))
    }

    fn float(&self, key: &str) -> Result<f64> {
        let v = self.get(key)?;
        v.parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(|| self.bad(key, v, "a finite number"))
    }

    fn flag(&self, key: &str) -> Result<bool> {
        match self.get(key)? {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(self.bad(key, other, "true or false")),
        }
    }

    fn choice<T: Copy>(&self, key: &str, all: &[T], name: impl Fn(T) -> &'static str) -> Result<T> {
        let v = self.get(key)?;
        all.iter()
            .copied()
            .find(|c| name(*c) == v)
            .ok_or_else(|| self.bad(key, v, &all.iter().map(|c| name(*c)).collect::<Vec<_>>().join(", ")))
    }

    fn json<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<T> {
        let v = self.get(key)?;
        serde_json::from_str(v).map_err(|_| self.bad(key, v, "a JSON list"))
    }
}

/// The flags as typed, with the file's settings filling every flag that was not given. A flag
/// that was given must say what the file says; otherwise the error names both values.
pub fn merge(flags: &Shape, file: &Shape, w: &str) -> Result<Shape> {
    let num = |flag: &str, f: Option<usize>, v: Option<usize>| -> Result<Option<usize>> {
        match (f, v) {
            (Some(f), Some(v)) => super::common::agree(flag, Some(f), v, w).map(Some),
            (f, v) => Ok(f.or(v)),
        }
    };
    Ok(Shape {
        d_model: num("--d-model", flags.d_model, file.d_model)?,
        heads: num("--heads", flags.heads, file.heads)?,
        d_k: num("--d-k", flags.d_k, file.d_k)?,
        d_v: num("--d-v", flags.d_v, file.d_v)?,
        d_ff: num("--d-ff", flags.d_ff, file.d_ff)?,
        layers: num("--layers", flags.layers, file.layers)?,
        max_len: num("--max-len", flags.max_len, file.max_len)?,
        kv_heads: num("--kv-heads", flags.kv_heads, file.kv_heads)?,
        positions: same("--positions", flags.positions, file.positions, |p| p.name().into(), w)?,
        norm: same("--norm", flags.norm, file.norm, |n| n.name().into(), w)?,
        activation: same("--activation", flags.activation, file.activation, |a| a.name().into(), w)?,
        scale: same("--scale", flags.scale, file.scale, |x| x.to_string(), w)?,
        eps: same("--eps", flags.eps, file.eps, |x| x.to_string(), w)?,
        rope_theta: same("--rope-theta", flags.rope_theta, file.rope_theta, |x| x.to_string(), w)?,
        lm_head: lm_head(flags.lm_head, file.lm_head, w)?,
        causal: switch("--causal", flags.causal, file.causal, w)?,
        rms_norm: switch("--rms-norm", flags.rms_norm, file.rms_norm, w)?,
        gated: switch("--gated", flags.gated, file.gated, w)?,
        final_norm: switch("--final-norm", flags.final_norm, file.final_norm, w)?,
        attention_only: switch("--attention-only", flags.attention_only, file.attention_only, w)?,
        no_out_proj: switch("--no-out-proj", flags.no_out_proj, file.no_out_proj, w)?,
        separate_heads: switch("--separate-heads", flags.separate_heads, file.separate_heads, w)?,
        d_out: num("--d-out", flags.d_out, file.d_out)?,
        qkv_bias: flags.qkv_bias,
        out_proj_bias: flags.out_proj_bias,
        // The file's tensors decide the biases (`toy::biases` checks the flags against them).
        attn_bias: flags.attn_bias,
        no_ffn_bias: flags.no_ffn_bias,
    })
}

/// A valued flag against the file's value.
fn same<T: PartialEq + Copy>(
    flag: &str,
    given: Option<T>,
    file: Option<T>,
    show: impl Fn(T) -> String,
    w: &str,
) -> Result<Option<T>> {
    match (given, file) {
        (Some(g), Some(f)) if g != f => Err(usage(
            flag,
            format!("{flag} {} contradicts {w}, which has {}", show(g), show(f)),
            format!("drop {flag} or pass {flag} {}", show(f)),
        )),
        (g, f) => Ok(g.or(f)),
    }
}

/// A switch (present or absent): given, the file must have it on too.
fn switch(flag: &str, given: bool, file: bool, w: &str) -> Result<bool> {
    if given && !file {
        return Err(usage(flag, format!("{flag} contradicts {w}, which was saved without it"), format!("drop {flag}")));
    }
    Ok(file)
}

fn lm_head(given: Option<bool>, file: Option<bool>, w: &str) -> Result<Option<bool>> {
    let show = |h: Option<bool>| match h {
        None => "none",
        Some(true) => "tied",
        Some(false) => "own",
    };
    match given {
        Some(_) if given != file => Err(usage(
            "--lm-head",
            format!("--lm-head {} contradicts {w}, which has {}", show(given), show(file)),
            "drop --lm-head",
        )),
        _ => Ok(file),
    }
}

/// The metadata map of a weights file's bytes: safetensors' `__metadata__`, or a JSON file's
/// `"__metadata__"` object (non-string values as their JSON text). Empty when there is none
/// or the file is unreadable (reading its tensors reports that).
pub fn extract(bytes: &[u8], is_json: bool) -> Metadata {
    if is_json {
        let Ok(serde_json::Value::Object(obj)) = crate::strict_json::parse(bytes) else { return Metadata::new() };
        let Some(serde_json::Value::Object(meta)) = obj.get("__metadata__") else { return Metadata::new() };
        return meta
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
            .collect();
    }
    match safetensors::SafeTensors::read_metadata(bytes) {
        Ok((_, m)) => m.metadata().iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect(),
        Err(_) => Metadata::new(),
    }
}

/// A weights file as read: its tensors (f32), its metadata map ([`read`] reads
/// attn-trace's settings from it) and the types its tensors were stored in when not f32.
pub struct WeightsFile {
    pub tensors: super::file::NamedTensors,
    pub metadata: Metadata,
    /// E.g. `f16`, or `bf16+f16` (sorted); `None` for f32 and for JSON files.
    pub stored_dtype: Option<String>,
}

/// Reads a weights file: JSON if its name ends in `.json`, safetensors otherwise.
pub fn open(path: &Path) -> Result<WeightsFile> {
    let what = format!("--weights {}", path.display());
    let bytes = super::input_file::read(&what, path, "pass the path of an existing, readable weights file")?;
    let is_json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let tensors = super::file::parse(&bytes, is_json, &what)?;
    let stored_dtype = if is_json { None } else { stored_dtype(&bytes) };
    Ok(WeightsFile { tensors, metadata: extract(&bytes, is_json), stored_dtype })
}

/// The safetensors file's tensor types other than f32, sorted and joined by `+`.
fn stored_dtype(bytes: &[u8]) -> Option<String> {
    let (_, header) = safetensors::SafeTensors::read_metadata(bytes).ok()?;
    let kinds: std::collections::BTreeSet<String> = header
        .tensors()
        .values()
        .map(|info| format!("{:?}", info.dtype).to_lowercase())
        .filter(|d| d != "f32")
        .collect();
    (!kinds.is_empty()).then(|| kinds.into_iter().collect::<Vec<_>>().join("+"))
}
