//! GGUF files (llama.cpp, Ollama, LM Studio), read directly with candle's GGUF support:
//! the configuration from the metadata, the tokenizer from `tokenizer.ggml.*`, and each
//! tensor dequantized to f32 (every type candle can dequantize). Architectures `llama` and
//! `qwen2` map onto the same decoder options as their Hugging Face folders, so the forward
//! pass and the step names are the same.
//!
//! llama.cpp's converter permutes the rows of each `llama` Q and K weight for its rotary
//! kernel (pairs (2i, 2i+1) instead of Hugging Face's (i, i + d/2)); the permutation is undone
//! here, as transformers' GGUF loader does (`reverse_permute_weights`), so the trace shows
//! Hugging Face's layout.

use super::hf::decoder::DecoderConfig;
use super::params::{Block, LayerNorm, LayerParams, Layers, Linear, Params};
use crate::error::usage;
use anyhow::Result;
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::{Device, Tensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Architectures this reader maps.
pub const ARCHITECTURES: &[&str] = &["llama", "qwen2"];

/// An opened GGUF file: its parsed header and where to read tensors from.
pub struct Gguf {
    pub path: PathBuf,
    pub content: Content,
    pub what: String,
}

impl std::fmt::Debug for Gguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gguf({})", self.path.display())
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// `ollama:NAME[:TAG]`: the model blob of a local Ollama store (`$OLLAMA_MODELS`, else
/// `~/.ollama/models`), found through its manifest. Nothing is downloaded.
pub fn ollama(spec: &str) -> Result<PathBuf> {
    let what = format!("--model {spec}");
    let name = spec.trim_start_matches("ollama:");
    let (name, tag) = name.rsplit_once(':').filter(|(_, t)| !t.contains('/')).unwrap_or((name, "latest"));
    let store = std::env::var_os("OLLAMA_MODELS")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".ollama/models")))
        .ok_or_else(|| usage(&what, "no Ollama store: neither OLLAMA_MODELS nor HOME is set", "set OLLAMA_MODELS"))?;
    // "llama3" is "library/llama3" on the default registry; "user/model" keeps its namespace.
    let path = if name.contains('/') { name.to_string() } else { format!("library/{name}") };
    if name.is_empty() || path.split('/').any(|p| p.is_empty() || p == ".." || p == ".") {
        return Err(usage(&what, "not a model name", "write ollama:NAME or ollama:NAME:TAG"));
    }
    let manifest = store.join("manifests/registry.ollama.ai").join(&path).join(tag);
    let text = std::fs::read(&manifest).map_err(|_| {
        usage(
            &what,
            format!("no Ollama manifest at {}", manifest.display()),
            "pull the model with ollama first, or set OLLAMA_MODELS",
        )
    })?;
    let v = crate::strict_json::parse(&text)
        .map_err(|e| usage(&what, format!("the manifest is not JSON ({e})"), "re-pull the model"))?;
    let digest = v["layers"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["mediaType"] == "application/vnd.ollama.image.model"))
        .and_then(|l| l["digest"].as_str())
        .ok_or_else(|| usage(&what, "the manifest names no model layer", "re-pull the model"))?;
    let hex = digest.strip_prefix("sha256:").filter(|h| h.chars().all(|c| c.is_ascii_hexdigit()));
    let blob = store.join("blobs").join(format!(
        "sha256-{}",
        hex.ok_or_else(|| usage(&what, "the manifest's digest is not sha256", "re-pull the model"))?
    ));
    if !blob.is_file() {
        return Err(usage(&what, format!("the model blob {} is missing", blob.display()), "re-pull the model"));
    }
    Ok(blob)
}

/// `spec` names a GGUF file, or a folder holding exactly one (and no config.json).
pub fn find(spec: &str) -> Option<PathBuf> {
    let p = Path::new(spec);
    if p.is_file() && p.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")) {
        return Some(p.to_path_buf());
    }
    if p.is_dir() && !p.join("config.json").is_file() {
        let ggufs: Vec<PathBuf> = std::fs::read_dir(p)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| f.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")))
            .collect();
        if ggufs.len() == 1 {
            return Some(ggufs[0].clone());
        }
    }
    None
}

impl Gguf {
    /// Reads the header (metadata and tensor table); tensors are read when needed.
    pub fn open(path: &Path, what: &str) -> Result<Gguf> {
        let mut f = std::fs::File::open(path).map_err(|e| usage(what, e, "pass a readable .gguf file"))?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let content = header(&mut f, len, what)?;
        Ok(Gguf { path: path.to_path_buf(), content, what: what.to_string() })
    }

    /// Checks a GGUF file's bytes as `open` would (header, tensor table, metadata as a
    /// config, tokenizer): the fuzz target's entry point.
    pub fn check_bytes(bytes: &[u8]) -> Result<()> {
        let mut r = std::io::Cursor::new(bytes);
        let content = header(&mut r, bytes.len() as u64, "fuzz")?;
        let g = Gguf { path: PathBuf::new(), content, what: "fuzz".into() };
        let c = g.config()?;
        super::gguf_tokenizer::build(&g.content.metadata, "fuzz")?;
        let _ = (c.d_head(), g.tensor_types());
        Ok(())
    }

    fn meta(&self, key: &str) -> Option<&Value> {
        self.content.metadata.get(key)
    }

    fn meta_u64(&self, key: &str) -> Result<u64> {
        let v = self
            .meta(key)
            .ok_or_else(|| usage(&self.what, format!("the GGUF metadata has no {key}"), "use a complete GGUF file"))?;
        v.to_u64().or_else(|_| v.to_u32().map(u64::from)).or_else(|_| v.to_i32().map(|x| x.max(0) as u64)).map_err(
            |_| usage(&self.what, format!("GGUF metadata {key} is not an integer"), "use a complete GGUF file"),
        )
    }

    fn meta_f64(&self, key: &str) -> Option<f64> {
        self.meta(key).and_then(|v| v.to_f32().map(f64::from).or_else(|_| v.to_f64()).ok())
    }

    /// The architecture (`general.architecture`), checked against the supported ones.
    pub fn architecture(&self) -> Result<String> {
        let arch = self.meta("general.architecture").and_then(|v| v.to_string().ok()).cloned().unwrap_or_default();
        if !ARCHITECTURES.contains(&arch.as_str()) {
            return Err(usage(
                &self.what,
                format!("GGUF architecture {arch:?} is not supported"),
                format!("use a GGUF of a supported architecture: {}", ARCHITECTURES.join(", ")),
            ));
        }
        Ok(arch)
    }

    /// The metadata as a Hugging Face `config.json` of the same model, checked as one.
    pub fn config(&self) -> Result<DecoderConfig> {
        let arch = self.architecture()?;
        let k = |name: &str| format!("{arch}.{name}");
        let embd = self.content.tensor_infos.get("token_embd.weight").map(|t| t.shape.dims().to_vec());
        let vocab = match embd.as_deref() {
            Some([rows, _]) => *rows,
            _ => return Err(usage(&self.what, "the GGUF has no 2-D token_embd.weight", "use a complete GGUF file")),
        };
        if let Some(t) = self.meta(&k("rope.scaling.type")).and_then(|v| v.to_string().ok()) {
            if t != "none" {
                return Err(usage(
                    &self.what,
                    format!("GGUF rope scaling {t:?} is not supported"),
                    "use a GGUF without it",
                ));
            }
        }
        let raw = serde_json::json!({
            "model_type": arch,
            "vocab_size": vocab,
            "hidden_size": self.meta_u64(&k("embedding_length"))?,
            "num_hidden_layers": self.meta_u64(&k("block_count"))?,
            "num_attention_heads": self.meta_u64(&k("attention.head_count"))?,
            "num_key_value_heads": self.meta_u64(&k("attention.head_count_kv")).ok(),
            "intermediate_size": self.meta_u64(&k("feed_forward_length"))?,
            "max_position_embeddings": self.meta_u64(&k("context_length"))?,
            "hidden_act": "silu",
            "rms_norm_eps": self.meta_f64(&k("attention.layer_norm_rms_epsilon")).unwrap_or(1e-5),
            "rope_theta": self.meta_f64(&k("rope.freq_base")).unwrap_or(10000.0),
            "tie_word_embeddings": !self.content.tensor_infos.contains_key("output.weight"),
            // For --pad-to, as config.json's.
            "pad_token_id": self.meta_u64("tokenizer.ggml.padding_token_id").ok(),
            "eos_token_id": self.meta_u64("tokenizer.ggml.eos_token_id").ok(),
        });
        DecoderConfig::read(raw, &self.what)
    }

    /// The tensor types by group (`attn_q`, `ffn_down`, `token_embd`, …), for `config`.
    pub fn tensor_types(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (name, info) in &self.content.tensor_infos {
            let group = name.trim_start_matches("blk.").trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
            let group = group.trim_end_matches(".weight").trim_end_matches(".bias").to_string();
            let ty = format!("{:?}", info.ggml_dtype).to_lowercase();
            out.entry(group).or_insert(ty);
        }
        out
    }

    /// The tensor `name` dequantized to f32, checked to have `shape` (rows, columns).
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let info =
            self.content.tensor_infos.get(name).ok_or_else(|| {
                usage(&self.what, format!("the GGUF has no tensor {name}"), "use a complete GGUF file")
            })?;
        if info.shape.dims() != shape {
            return Err(usage(
                &self.what,
                format!("tensor {name} has shape {:?} but the metadata implies {shape:?}", info.shape.dims()),
                "use a consistent GGUF file",
            ));
        }
        let mut f = std::fs::File::open(&self.path).map_err(|e| usage(&self.what, e, "pass a readable .gguf file"))?;
        let bad = |e: candle_core::Error| {
            usage(
                &self.what,
                format!("tensor {name} cannot be read ({})", first_line(&e.to_string())),
                "use a complete GGUF file",
            )
        };
        let q = info.read(&mut f, self.content.tensor_data_offset, &Device::Cpu).map_err(bad)?;
        Ok(q.dequantize(&Device::Cpu).map_err(bad)?.reshape(shape)?)
    }

    pub fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }
}

/// Reads the header (magic, version, metadata, tensor table) with candle's reader, which
/// bounds every length by the bytes left, then checks that every tensor lies inside the file,
/// so a truncated file is refused before anything is computed.
fn header<R: std::io::Read + std::io::Seek>(r: &mut R, len: u64, what: &str) -> Result<Content> {
    let content = Content::read(r).map_err(|e| {
        usage(
            what,
            format!("not a readable GGUF file ({})", first_line(&e.to_string())),
            "pass a complete GGUF file (llama.cpp's format, version 1 to 3)",
        )
    })?;
    // candle decodes names lossily: a U+FFFD marks bytes that were not UTF-8.
    let bad = content.metadata.keys().chain(content.tensor_infos.keys()).find(|k| k.contains('\u{fffd}'));
    if let Some(k) = bad {
        return Err(usage(
            what,
            format!("a metadata key or tensor name is not UTF-8 ({})", crate::error::quote(k)),
            "use an intact GGUF file",
        ));
    }
    for (name, info) in &content.tensor_infos {
        let (elems, block) = (info.shape.elem_count() as u64, info.ggml_dtype.block_size() as u64);
        let bytes = elems / block.max(1) * info.ggml_dtype.type_size() as u64;
        let end = content.tensor_data_offset.saturating_add(info.offset).saturating_add(bytes);
        if end > len || elems % block.max(1) != 0 {
            return Err(usage(
                what,
                format!("tensor {name} lies past the end of the file ({end} > {len} bytes): the file is truncated"),
                "download the GGUF file again",
            ));
        }
    }
    Ok(content)
}

/// Undoes llama.cpp's row permutation of a Q or K weight (or bias) with `heads` heads:
/// transformers' `reverse_permute_weights`: rows viewed as [heads, d/2, 2] become [heads, 2, d/2].
fn unpermute(t: &Tensor, heads: usize) -> Result<Tensor> {
    let dims = t.dims().to_vec();
    let rows = dims[0];
    let half = rows / heads / 2;
    let rest: usize = dims[1..].iter().product();
    let t = t.reshape((heads, half, 2, rest))?.transpose(1, 2)?.contiguous()?;
    Ok(t.reshape(dims)?)
}

/// Every parameter, by GGUF names (`token_embd`, `blk.{i}.attn_q`, …, `output_norm`,
/// `output`), dequantized to f32.
/// Layers are dequantized one at a time as the forward pass reaches them (layer 0 once here,
/// so a file with the wrong names or shapes is refused before anything runs).
pub fn params(c: DecoderConfig, g: Gguf) -> Result<Params> {
    let both = std::sync::Arc::new((c, g));
    let (c, g) = (&both.0, &both.1);
    let d = c.hidden_size;
    let token = g.get("token_embd.weight", &[c.vocab_size, d])?;
    // The whole table stays (the head of a tied model is the same tensor): a patching sweep
    // embeds a second input with it.

    let shared = both.clone();
    let load = move |i: usize| layer(&shared.0, &shared.1, i);
    // Read here so that a bad file is refused before anything runs; kept for the forward pass.
    let first = load(0)?;
    let head = if c.tied() { token.clone() } else { g.get("output.weight", &[c.vocab_size, d])? };
    Ok(Params {
        token: Some(token.clone()),
        token_rows: None,
        position: None,
        token_type: None,
        embed_norm: None,
        layers: Layers::lazy(c.num_hidden_layers, std::sync::Arc::new(load), first),
        final_norm: Some(LayerNorm { weight: g.get("output_norm.weight", &[d])?, bias: None }),
        lm_head: Some(Linear { weight: head, bias: None }),
        mlm: None,
    })
}

/// Layer `i` by its GGUF names (`blk.{i}.attn_q`, …), dequantized to f32.
fn layer(c: &DecoderConfig, g: &Gguf, i: usize) -> Result<LayerParams> {
    let (d, ff, dh) = (c.hidden_size, c.d_ff(), c.d_head());
    let (h, kvh) = (c.num_attention_heads, c.kv_heads());
    let p = format!("blk.{i}");
    let norm = |name: &str| -> Result<LayerNorm> {
        Ok(LayerNorm { weight: g.get(&format!("{p}.{name}.weight"), &[d])?, bias: None })
    };
    // `heads`: undo llama.cpp's Q/K row permutation for this many heads (0: none).
    let lin = |name: &str, d_in: usize, d_out: usize, heads: usize| -> Result<Linear> {
        let fix = |t: Tensor| if heads > 0 { unpermute(&t, heads) } else { Ok(t) };
        let bias_name = format!("{p}.{name}.bias");
        Ok(Linear {
            weight: fix(g.get(&format!("{p}.{name}.weight"), &[d_out, d_in])?)?,
            bias: g.has(&bias_name).then(|| g.get(&bias_name, &[d_out]).and_then(fix)).transpose()?,
        })
    };
    // llama.cpp permutes only the `llama` architecture's Q and K.
    let (qh, kh) = if c.model_type == "llama" { (h, kvh) } else { (0, 0) };
    Ok(LayerParams {
        q_proj: lin("attn_q", d, h * dh, qh)?,
        k_proj: lin("attn_k", d, kvh * dh, kh)?,
        v_proj: lin("attn_v", d, kvh * dh, 0)?,
        out_proj: Some(lin("attn_output", h * dh, d, 0)?),
        block: Some(Block {
            norm1: norm("attn_norm")?,
            linear1: lin("ffn_up", d, ff, 0)?,
            linear2: lin("ffn_down", ff, d, 0)?,
            norm2: norm("ffn_norm")?,
            gate: Some(lin("ffn_gate", d, ff, 0)?),
        }),
    })
}

/// Opens a GGUF model: its configuration and tokenizer from the metadata. `how` is
/// (`--truncate`, add special tokens); the tokenizer's own BOS rule applies unless
/// `--no-special-tokens`.
pub fn open(
    settings: &crate::settings::Settings,
    spec: &str,
    path: &Path,
    how: (bool, bool),
    sentence: Option<String>,
) -> Result<(super::Loaded, super::Source)> {
    let what = format!("--model {spec}");
    let g = Gguf::open(path, &what)?;
    let c = g.config()?;
    // Built once per batch (sources::memo).
    let key = format!("gguf tokenizer {}", path.display());
    let (tokenizer, _) = super::memo::kept(&key, || super::gguf_tokenizer::build(&g.content.metadata, &what))?;
    let types = g.tensor_types();
    let mut kinds: Vec<&str> = types.values().map(String::as_str).collect();
    kinds.sort();
    kinds.dedup();
    let facts = super::hf::load::Facts {
        path: path.display().to_string(),
        weights: path.display().to_string(),
        stored_dtype: Some(format!("gguf {}", kinds.join("+"))),
        attn_bias: g.has("blk.0.attn_q.bias"),
    };
    let mut loaded = super::hf::load::decoder_loaded(settings, &what, &c, tokenizer, how, sentence, facts)?;
    if let Some(m) = loaded.cfg.model.as_mut() {
        m.tensor_types = Some(types);
    }
    Ok((loaded, super::Source::Gguf(Box::new((c, g)))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermute_turns_interleaved_pairs_into_halves() {
        // One head of width 4: llama.cpp's rows are [r0, r2, r1, r3] (pairs (0,2),(1,3) side
        // by side); Hugging Face's are [r0, r1, r2, r3].
        let t = Tensor::new(&[[0f32], [2.0], [1.0], [3.0]], &Device::Cpu).unwrap();
        let u = unpermute(&t, 1).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(u, vec![0.0, 1.0, 2.0, 3.0]);
    }
}
