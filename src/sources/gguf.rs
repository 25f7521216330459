//! GGUF files (llama.cpp, Ollama, LM Studio), read directly with candle's GGUF support:
//! the configuration from the metadata, the tokenizer from `tokenizer.ggml.*`, and each
//! tensor dequantized to f32 (every type candle can dequantize). Each architecture is read
//! by the family file of its Hugging Face folders (`family/`), through `gguf_names.rs`, which
//! maps llama.cpp's tensor names (and its Q/K row order) onto the family's, so the forward
//! pass and the step names are the same.

use super::family::DecoderConfig;
use crate::error::usage;
use crate::params::InputForm;
use anyhow::Result;
use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use std::path::{Path, PathBuf};

/// An opened GGUF file: its parsed header and where to read tensors from.
#[derive(Clone)]
pub struct Gguf {
    pub path: PathBuf,
    /// Shared: a server's requests and a batch's sentences open the file once (`memo`).
    pub content: std::sync::Arc<Content>,
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
    let text = super::input_file::bytes("", &manifest, "", super::input_file::CONFIG).map_err(|_| {
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
        let f = std::fs::File::open(path).map_err(|e| usage(what, e, "pass a readable .gguf file"))?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let content = header(&mut super::counted::Counted::new(f), len, what)?;
        Ok(Gguf { path: path.to_path_buf(), content: content.into(), what: what.to_string() })
    }

    /// Checks a GGUF file's bytes as `open` would (header, tensor table, metadata as a
    /// config, tokenizer): the fuzz target's entry point.
    pub fn check_bytes(bytes: &[u8]) -> Result<()> {
        let mut r = std::io::Cursor::new(bytes);
        let content = header(&mut r, bytes.len() as u64, "fuzz")?;
        let g = Gguf { path: PathBuf::new(), content: content.into(), what: "fuzz".into() };
        let c = g.config()?;
        super::gguf_tokenizer::build(&g.content.metadata, "fuzz")?;
        let _ = (c.d_head(), g.tensor_types());
        Ok(())
    }

    /// The metadata as a Hugging Face `config.json` of the same model, checked as one
    /// (`gguf_meta.rs`).
    pub fn config(&self) -> Result<DecoderConfig> {
        // LongRoPE's factors are small tensors (`rope_factors_long.weight`), read here.
        let vector =
            |name: &str| -> Result<Vec<f32>> { Ok(self.read(name, self.info(name)?)?.flatten_all()?.to_vec1()?) };
        super::gguf_meta::config(&self.content, &self.what, &vector)
    }

    /// The tensor types by group (`attn_q`, `ffn_down`, `attn_q.bias`, `token_embd`, …), each
    /// type with its count, for `config`. The tensor table is a hash map: only ordered maps
    /// and counts make the result independent of its iteration order.
    pub fn tensor_types(&self) -> crate::config::TensorTypes {
        let mut out = crate::config::TensorTypes::new();
        for (name, info) in &self.content.tensor_infos {
            let group = name.trim_start_matches("blk.").trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
            // A bias keeps its suffix: its type (f32) is not its weight's.
            let group = group.trim_end_matches(".weight").to_string();
            let ty = format!("{:?}", info.ggml_dtype).to_lowercase();
            *out.entry(group).or_default().entry(ty).or_insert(0) += 1;
        }
        out
    }

    /// The tensor `name` dequantized to f32, checked to have `shape` (rows, columns).
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let info = self.check(name, shape)?;
        Ok(self.read(name, info)?.reshape(shape)?)
    }

    pub(super) fn info(&self, name: &str) -> Result<&candle_core::quantized::gguf_file::TensorInfo> {
        self.content
            .tensor_infos
            .get(name)
            .ok_or_else(|| usage(&self.what, format!("the GGUF has no tensor {name}"), "use a complete GGUF file"))
    }

    /// Reads and dequantizes the bytes `info` locates.
    pub(super) fn read(&self, name: &str, info: &candle_core::quantized::gguf_file::TensorInfo) -> Result<Tensor> {
        let mut f = std::fs::File::open(&self.path).map_err(|e| usage(&self.what, e, "pass a readable .gguf file"))?;
        let bad = |e: candle_core::Error| {
            usage(
                &self.what,
                format!("tensor {name} cannot be read ({})", first_line(&e.to_string())),
                "use a complete GGUF file",
            )
        };
        let q = info.read(&mut f, self.content.tensor_data_offset, &Device::Cpu).map_err(bad)?;
        match super::dequant::dequantize(&q).map_err(bad)? {
            Some(t) => Ok(t),
            None => q.dequantize(&Device::Cpu).map_err(bad),
        }
    }

    pub fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }
}

/// A GGUF file read under Hugging Face names. `qk_heads`: the (query, key/value) head counts
/// whose Q and K rows llama.cpp permuted, or `None` when it did not; `heads`: the query heads,
/// for GPT-NeoX's fused q/k/v, which the converter reorders.
#[derive(Debug)]
pub struct GgufStore {
    pub file: Gguf,
    pub qk_heads: Option<(usize, usize)>,
    pub heads: usize,
    /// The family's own name rows, read before the common ones (`gguf_names::SANDWICH`).
    pub names: &'static [(&'static str, &'static str)],
    /// `--arithmetic ggml`: the products are to be computed as llama.cpp computes them.
    pub ggml: bool,
}

impl GgufStore {
    /// The file's name for `name`; an unmapped name is kept, so that a message names it.
    fn name(&self, name: &str) -> String {
        super::gguf_names::gguf_name_in(name, self.names).unwrap_or_else(|| name.to_string())
    }

    /// `mins` (a tensor's values by block, rows as the file stores them) with the rows in the
    /// order `get` gives the tensor `name`'s.
    fn rows_as_read(&self, name: &str, mins: Tensor) -> Result<Tensor> {
        if super::gguf_names::is_per_head_qkv(name) {
            return super::gguf_names::per_head_qkv(&mins, self.heads);
        }
        match self.permuted(name) {
            Some(heads) => super::gguf_names::unpermute(&mins, heads),
            None => Ok(mins),
        }
    }

    /// The heads whose rows to unpermute in `name`, if it is a permuted Q or K tensor.
    fn permuted(&self, name: &str) -> Option<usize> {
        let (q, kv) = self.qk_heads?;
        let part = name.rsplit_once('.')?.0;
        if part.ends_with("self_attn.q_proj") {
            Some(q)
        } else {
            part.ends_with("self_attn.k_proj").then_some(kv)
        }
    }
}

impl super::store::TensorStore for GgufStore {
    fn what(&self) -> &str {
        &self.file.what
    }
    fn has(&self, name: &str) -> bool {
        self.file.has(&self.name(name))
    }
    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        self.file.content.tensor_infos.get(&self.name(name)).map(|t| t.shape.dims().to_vec())
    }
    fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let t = self.file.get(&self.name(name), shape)?;
        if super::gguf_names::is_per_head_qkv(name) {
            return super::gguf_names::per_head_qkv(&t, self.heads);
        }
        match self.permuted(name) {
            Some(heads) => super::gguf_names::unpermute(&t, heads),
            None => Ok(t),
        }
    }
    fn has_rows(&self, name: &str, shape: &[usize]) -> bool {
        self.shape(name).is_some_and(|s| s == shape && shape.len() == 2)
    }
    /// llama.cpp stacks a layer's experts into one [experts, out, in] tensor per projection:
    /// read (and dequantized) once, each expert a view of it.
    fn experts(&self, pattern: &str, count: usize, shape: &[usize]) -> Result<Vec<Tensor>> {
        let Some(name) = super::gguf_names::gguf_experts_name(pattern) else {
            return (0..count).map(|e| self.get(&pattern.replace("{e}", &e.to_string()), shape)).collect();
        };
        let all = self.file.get(&name, &[&[count][..], shape].concat())?;
        Ok(all.chunk(count, 0)?.into_iter().map(|t| t.squeeze(0)).collect::<candle_core::Result<_>>()?)
    }

    fn is_gguf(&self) -> bool {
        true
    }
    fn ggml_input(&self, name: &str) -> Result<Option<crate::params::GgmlInput>> {
        let file_name = self.name(name);
        let Some(form) =
            self.ggml.then(|| self.file.info(&file_name)).transpose()?.and_then(|i| InputForm::of(i.ggml_dtype))
        else {
            return Ok(None);
        };
        let (mut blocks, mut kblocks) = (None, None);
        if let Some((bytes, dtype)) = self.file.block_bytes(&file_name)? {
            match super::gguf_blocks::unpack(&self.rows_as_read(name, bytes)?, dtype)? {
                super::gguf_blocks::Unpacked::Blocks(b) => blocks = Some(b),
                super::gguf_blocks::Unpacked::K(b) => kblocks = Some(b),
            }
        }
        // Q4_1's offsets are in its unpacked blocks already: the file is read once.
        let mins = match &blocks {
            Some(b) if b.q4_1 => Some(Tensor::from_vec(b.m.to_vec(), (b.rows, b.per_row), &Device::Cpu)?),
            Some(_) => None,
            None => self.file.block_mins(&file_name)?.map(|m| self.rows_as_read(name, m)).transpose()?,
        };
        Ok(Some(crate::params::GgmlInput { form, mins, blocks, kblocks }))
    }
    fn ggml_experts(&self, pattern: &str, count: usize) -> Result<Vec<Option<crate::params::GgmlInput>>> {
        let Some(name) = super::gguf_names::gguf_experts_name(pattern).filter(|_| self.ggml) else {
            return (0..count).map(|e| self.ggml_input(&pattern.replace("{e}", &e.to_string()))).collect();
        };
        let Some(form) = InputForm::of(self.file.info(&name)?.ggml_dtype) else { return Ok(vec![None; count]) };
        let mins = match self.file.block_mins(&name)? {
            Some(m) => m.chunk(count, 0)?.into_iter().map(|t| Ok(Some(t.squeeze(0)?))).collect::<Result<Vec<_>>>()?,
            None => vec![None; count],
        };
        Ok(mins
            .into_iter()
            .map(|mins| Some(crate::params::GgmlInput { form, mins, blocks: None, kblocks: None }))
            .collect())
    }
    fn rows(&self, name: &str, start: usize, len: usize) -> Result<Tensor> {
        self.file.rows(&self.name(name), start, len)
    }
}

/// Reads the header (magic, version, metadata, tensor table) with candle's reader, which
/// bounds every length by the bytes left, after `gguf_check::scan`; then checks that every tensor lies inside the file,
/// so a truncated file is refused before anything is computed.
fn header<R: std::io::BufRead + std::io::Seek>(r: &mut R, len: u64, what: &str) -> Result<Content> {
    // Our own scan first: candle's reader divides by the alignment and keeps the last of a
    // key or tensor given twice.
    super::gguf_check::scan(r, len, what)?;
    r.seek(std::io::SeekFrom::Start(0)).map_err(|e| usage(what, e, "pass a readable .gguf file"))?;
    let content = Content::read(r).map_err(|e| {
        usage(
            what,
            format!("not a readable GGUF file ({})", first_line(&e.to_string())),
            "pass a complete GGUF file (llama.cpp's format, version 1 to 3)",
        )
    })?;
    // candle decodes names lossily: a U+FFFD marks bytes that were not UTF-8.
    // The first in name order: the maps' own order changes from run to run.
    let bad = content.metadata.keys().chain(content.tensor_infos.keys()).filter(|k| k.contains('\u{fffd}')).min();
    if let Some(k) = bad {
        return Err(usage(
            what,
            format!("a metadata key or tensor name is not UTF-8 ({})", crate::error::quote(k)),
            "use an intact GGUF file",
        ));
    }
    let mut infos: Vec<_> = content.tensor_infos.iter().collect();
    infos.sort_by_key(|(name, _)| name.as_str());
    for (name, info) in infos {
        // Dimensions whose product overflows claim more than any file holds (candle's
        // `elem_count` would overflow on them).
        let elems = info.shape.dims().iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64)).unwrap_or(u64::MAX);
        let block = info.ggml_dtype.block_size() as u64;
        let bytes = (elems / block.max(1)).saturating_mul(info.ggml_dtype.type_size() as u64);
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

/// Opens a GGUF model: its configuration and tokenizer from the metadata. `how` is
/// (`--truncate`, add special tokens); the tokenizer's own BOS rule applies unless
/// `--no-special-tokens`.
pub fn open(
    settings: &crate::settings::Settings,
    spec: &str,
    path: &Path,
    how: (bool, bool),
    sentence: Option<String>,
) -> Result<(super::loaded::Loaded, super::loaded::Source)> {
    let what = format!("--model {spec}");
    // Opened once per batch or server (sources::memo): the header of a file whose layers
    // are kept already.
    let g = super::memo::kept(&format!("gguf header {} {what}", path.display()), || Gguf::open(path, &what))?;
    let c = g.config()?;
    // Built once per batch (sources::memo).
    let key = format!("gguf tokenizer {}", path.display());
    let (tokenizer, _) = super::memo::kept(&key, || super::gguf_tokenizer::build(&g.content.metadata, &what))?;
    let chat = settings.chat.as_ref().map(|chat| super::chat::from_gguf(&g.content, chat, &what)).transpose()?;
    let types = g.tensor_types();
    let kinds: std::collections::BTreeSet<&str> = types.values().flat_map(|t| t.keys()).map(String::as_str).collect();
    let kinds = kinds.into_iter().collect::<Vec<&str>>().join("+");
    let fam = c.family();
    let qk_heads = fam.gguf_permutes_qk().then_some((c.num_attention_heads, c.kv_heads()));
    let arithmetic = match settings.model {
        crate::settings::ModelChoice::Pretrained { arithmetic, .. } => arithmetic,
        crate::settings::ModelChoice::Toy(_) => crate::config::Arithmetic::F32,
    };
    let ggml = arithmetic == crate::config::Arithmetic::Ggml;
    let store = GgufStore { file: g, qk_heads, heads: c.num_attention_heads, names: fam.gguf_layer_names(), ggml };
    let facts = super::hf::load::Facts {
        path: path.display().to_string(),
        weights: path.display().to_string(),
        stored_dtype: Some(format!("gguf {kinds}")),
        attn_bias: super::store::TensorStore::has(&store, &fam.q_bias(&store)),
        chat,
    };
    let mut loaded = super::hf::load::decoder_loaded(settings, &what, &c, tokenizer, how, sentence, facts)?;
    if let Some(m) = loaded.cfg.model.as_mut() {
        m.tensor_types = Some(types);
    }
    loaded.run.vocab_stored = true; // `params` keeps the token table and head stored
    loaded.cfg.parts.arithmetic = arithmetic;
    loaded.run.ggml_interleaved = ggml && qk_heads.is_some();
    loaded.run.ggml_scales_q = ggml && c.model_type.starts_with("gemma");
    if ggml {
        // The stored type's note says f32 arithmetic: not this run's.
        let f32_note = super::common::stored_note(&format!("gguf {kinds}"));
        loaded.notes.retain(|n| *n != f32_note);
        loaded.notes.push(format!(
            "the weights are stored as gguf {kinds}; the arithmetic is llama.cpp's (--arithmetic ggml: \
             inputs quantized for each weight's type, f16 keys, values and attention weights, flash attention off)"
        ));
    }
    Ok((loaded, super::loaded::Source::Decoder(Box::new((c, Box::new(store))))))
}
