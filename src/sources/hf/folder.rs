//! An opened model folder and what its loaders share: finding the folder, its tokenizer,
//! encoding and padding the sentence, its end-of-sequence ids.

use crate::error::usage;
use crate::sources::family::bert::BertConfig;
use crate::sources::family::bert_weights as weights;
use anyhow::Result;
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// An opened model folder.
pub struct HfModel {
    pub dir: PathBuf,
    pub config: BertConfig,
    pub tokenizer: Tokenizer,
    pub weights: weights::Weights,
}

/// The tokenizer's output for one sentence or a pair.
#[derive(Debug, Clone)]
pub struct Encoded {
    pub tokens: Vec<String>,
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
    /// Tokens dropped by `--truncate`.
    pub truncated: usize,
}

/// Finds the model folder: a directory as given, or `ORG/NAME` in the Hugging Face cache
/// (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`).
pub fn resolve(spec: &str) -> Result<PathBuf> {
    let p = Path::new(spec);
    if p.is_dir() {
        return Ok(p.to_path_buf());
    }
    if let Some(e) = not_a_folder(spec, p) {
        return Err(e);
    }
    let hub = std::env::var_os("HF_HUB_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HF_HOME").map(|h| PathBuf::from(h).join("hub")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface/hub")));
    let looks_like_id = spec.split('/').count() == 2 && !spec.starts_with('.') && !spec.starts_with('/');
    if let (true, Some(hub)) = (looks_like_id, hub) {
        let repo = hub.join(format!("models--{}", spec.replace('/', "--")));
        let snapshots = repo.join("snapshots");
        let by_ref = std::fs::read_to_string(repo.join("refs/main")).ok().map(|r| snapshots.join(r.trim()));
        let only = std::fs::read_dir(&snapshots).ok().and_then(|d| {
            let dirs: Vec<PathBuf> = d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
            (dirs.len() == 1).then(|| dirs[0].clone())
        });
        if let Some(dir) = by_ref.filter(|d| d.is_dir()).or(only) {
            return Ok(dir);
        }
        return Err(usage(
            format!("--model {spec}"),
            format!("not a folder, and not in the local Hugging Face cache (looked in {})", repo.display()),
            "pass the path of a model folder, or download the model into the cache first",
        ));
    }
    Err(usage(
        format!("--model {spec}"),
        "no such folder",
        "pass the path of a Hugging Face model folder (config.json, model.safetensors, tokenizer.json), \
         ORG/NAME in the local Hugging Face cache, a .gguf file or ollama:NAME",
    ))
}

/// The message for a `--model` that names a file rather than a folder, so that it answers
/// what was named: a `.gguf` path that does not exist, or a file that is neither a folder nor
/// a GGUF file (a GGUF file that exists never gets here: `gguf::find` takes it first).
fn not_a_folder(spec: &str, p: &Path) -> Option<anyhow::Error> {
    let what = format!("--model {spec}");
    let gguf = p.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    if gguf && !p.exists() {
        return Some(usage(what, "no such GGUF file", "check the path of the .gguf file"));
    }
    if p.is_file() {
        return Some(usage(
            what,
            "a file, and --model reads a folder, a .gguf file or ollama:NAME",
            "pass the model's folder or its .gguf file (a toy model's weights file is --weights FILE)",
        ));
    }
    // A device, FIFO or socket (`--model /dev/zero`) exists: "no such folder" would mislead.
    if p.exists() {
        return Some(usage(
            what,
            "a device, pipe or socket, not a model folder or file",
            "pass the model's folder, its .gguf file or ollama:NAME",
        ));
    }
    None
}

impl HfModel {
    pub fn open(dir: &Path) -> Result<HfModel> {
        let what = format!("--model {}", dir.display());
        for f in ["config.json", "model.safetensors", "tokenizer.json"] {
            if !dir.join(f).is_file() {
                let fix = if f == "model.safetensors" && dir.join("pytorch_model.bin").is_file() {
                    "convert pytorch_model.bin to safetensors (transformers: model.save_pretrained(dir, safe_serialization=True))"
                } else {
                    "pass a Hugging Face model folder with config.json, model.safetensors and tokenizer.json"
                };
                return Err(usage(&what, format!("{f} is missing"), fix));
            }
        }
        let config = BertConfig::read(&dir.join("config.json"))?;
        let tokenizer = load_tokenizer(dir, config.vocab_size, &what)?;
        let weights = weights::Weights::open(&dir.join("model.safetensors"), &what)?;
        weights.check_layers(config.num_hidden_layers)?;
        Ok(HfModel { dir: dir.to_path_buf(), config, tokenizer, weights })
    }

    /// Tokenizes one sentence, or a pair with token types 0 and 1, as transformers does.
    /// A sequence longer than max_position_embeddings is an error unless `truncate`.
    pub fn encode(&self, a: &str, b: Option<&str>, truncate: bool, special: bool) -> Result<Encoded> {
        let c = &self.config;
        let what = format!("--model {}", self.dir.display());
        encode(&self.tokenizer, (a, b), special, (c.max_position_embeddings, c.vocab_size), truncate, &what)
    }
}

/// Loads `tokenizer.json` with its own padding and truncation switched off (MiniLM's asks
/// for padding to 128; transformers does not apply either to a single sentence).
pub fn load_tokenizer(dir: &Path, vocab_size: usize, what: &str) -> Result<Tokenizer> {
    // Parsed once per batch (sources::memo).
    let path = dir.join("tokenizer.json");
    let mut tokenizer = crate::sources::memo::kept(&format!("tokenizer.json {}", path.display()), || {
        let fix = "restore the model's tokenizer.json";
        let named = format!("{what}: tokenizer.json");
        let bytes = crate::sources::input_file::bytes(&named, &path, fix, crate::sources::input_file::LARGE)?;
        Tokenizer::from_bytes(&bytes).map_err(|e| {
            usage(
                what,
                format!("tokenizer.json cannot be read: {}", first_line(&e.to_string())),
                "restore the model's tokenizer.json",
            )
        })
    })?;
    tokenizer.with_padding(None);
    tokenizer.with_truncation(None).map_err(|e| {
        usage(what, format!("tokenizer.json: {}", first_line(&e.to_string())), "restore the model's tokenizer.json")
    })?;
    let tok_vocab = tokenizer.get_vocab_size(true);
    if tok_vocab > vocab_size {
        return Err(usage(
            what,
            format!("tokenizer.json has {tok_vocab} tokens but config.json's vocab_size is {vocab_size}"),
            "use the tokenizer that belongs to this model",
        ));
    }
    Ok(tokenizer)
}

/// Tokenizes a sentence (or a pair, `text.1`), with the tokenizer's special tokens if
/// `special`. `limits` are (max positions, vocab size): a longer sequence is an error unless
/// `truncate`, which keeps the first tokens.
pub fn encode(
    tokenizer: &Tokenizer,
    text: (&str, Option<&str>),
    special: bool,
    limits: (usize, usize),
    truncate: bool,
    what: &str,
) -> Result<Encoded> {
    let (a, b) = text;
    let (max, vocab_size) = limits;
    let enc = |t: &Tokenizer| match b {
        Some(b) => t.encode((a.to_string(), b.to_string()), special),
        None => t.encode(a, special),
    };
    let err = |e: tokenizers::Error| {
        usage(
            what,
            format!("the tokenizer failed: {}", first_line(&e.to_string())),
            "check the sentence and tokenizer.json",
        )
    };
    let full = enc(tokenizer).map_err(err)?;
    let n = full.get_ids().len();
    let (e, truncated) = if n > max {
        if !truncate {
            return Err(usage(
                "sentence",
                format!("it has {n} tokens but the model takes at most {max} (max_position_embeddings)"),
                "shorten it, or pass --truncate to keep the first tokens",
            ));
        }
        let mut t = tokenizer.clone();
        let params = tokenizers::TruncationParams { max_length: max, ..Default::default() };
        t.with_truncation(Some(params)).map_err(err)?;
        let e = enc(&t).map_err(err)?;
        let dropped = n - e.get_ids().len();
        (e, dropped)
    } else {
        (full, 0)
    };
    if e.get_ids().is_empty() {
        return Err(usage("sentence", "the tokenizer produced no tokens", "pass a sentence with at least one word"));
    }
    if let Some(&bad) = e.get_ids().iter().find(|&&i| i as usize >= vocab_size) {
        return Err(usage(
            what,
            format!("the tokenizer produced id {bad}, beyond vocab_size {vocab_size}"),
            "use the tokenizer that belongs to this model",
        ));
    }
    Ok(Encoded {
        tokens: e.get_tokens().to_vec(),
        ids: e.get_ids().to_vec(),
        type_ids: e.get_type_ids().to_vec(),
        truncated,
    })
}

pub(super) fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// `--pad-to (n, left)`: pads the encoded sentence to `n` tokens with `pad_id` (token type 0),
/// on the left or the right, as a tokenizer pads a batch, and returns `config.padding` with
/// transformers' `attention_mask` (1 for the sentence, 0 for pads). `max` is the model's
/// position count.
pub fn pad(
    enc: &mut Encoded,
    (n, left): (usize, bool),
    pad_id: u32,
    tokenizer: &Tokenizer,
    max: usize,
) -> Result<crate::config::Padding> {
    let len = enc.ids.len();
    if n > max {
        return Err(usage(
            "--pad-to",
            format!("{n} is more than the model's {max} positions"),
            format!("pass --pad-to {max} or less"),
        ));
    }
    if len > n {
        return Err(usage(
            "--pad-to",
            format!("the sentence has {len} tokens, more than {n}"),
            format!("pass --pad-to {len} or more"),
        ));
    }
    let token = tokenizer.id_to_token(pad_id).unwrap_or_else(|| format!("#{pad_id}"));
    let at = if left { 0 } else { len };
    let pads = n - len;
    enc.ids.splice(at..at, std::iter::repeat_n(pad_id, pads));
    enc.tokens.splice(at..at, std::iter::repeat_n(token, pads));
    enc.type_ids.splice(at..at, std::iter::repeat_n(0, pads));
    let mut attention_mask = vec![1u8; len];
    attention_mask.splice(at..at, std::iter::repeat_n(0, pads));
    Ok(crate::config::Padding { side: if left { "left" } else { "right" }, length: n, pad_id, attention_mask })
}

/// The ids of a config's `eos_token_id`: one id, a list (Llama 3), or none.
pub fn eos_ids(v: Option<&serde_json::Value>) -> Vec<u32> {
    let one = |v: &serde_json::Value| v.as_u64().and_then(|i| u32::try_from(i).ok());
    match v {
        Some(serde_json::Value::Array(ids)) => ids.iter().filter_map(one).collect(),
        Some(v) => one(v).into_iter().collect(),
        None => Vec::new(),
    }
}

/// The end-of-sequence ids of a folder's generation_config.json, which transformers'
/// `generate` reads before config.json's; None without the file or the key.
pub fn generation_eos(dir: &std::path::Path, what: &str) -> Result<Option<Vec<u32>>> {
    let path = dir.join("generation_config.json");
    // Absent is fine; anything else by that name is read (a FIFO or device is refused).
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let fix = "restore the model's generation_config.json, or remove it to use config.json's eos_token_id";
    let what = format!("{what}: generation_config.json");
    let bytes = crate::sources::input_file::bytes(&what, &path, fix, crate::sources::input_file::CONFIG)?;
    let json = crate::strict_json::parse(&bytes).map_err(|e| usage(&what, format!("not valid JSON: {e}"), fix))?;
    Ok(json.get("eos_token_id").map(|v| eos_ids(Some(v))))
}

/// The token `--pad-to` pads a decoder with: `pad_token_id`, else the (first) `eos_token_id`.
pub fn decoder_pad_id(c: &crate::sources::family::DecoderConfig, what: &str) -> Result<u32> {
    let eos = match &c.eos_token_id {
        Some(serde_json::Value::Array(ids)) => ids.first().and_then(serde_json::Value::as_u64),
        Some(v) => v.as_u64(),
        None => None,
    };
    c.pad_token_id.or(eos.and_then(|e| u32::try_from(e).ok())).ok_or_else(|| {
        usage(what, "the model names no pad token (pad_token_id) or eos token (eos_token_id)", "drop --pad-to")
    })
}

/// `--induction N`: the tokenizer's own prefix (a BOS, if it adds one) followed by N tokens
/// drawn at random (a fixed xorshift stream, so every run is the same) and the same N again.
pub(super) fn induction_input(
    tok: &tokenizers::Tokenizer,
    special: bool,
    n: usize,
    vocab: usize,
    max: usize,
    what: &str,
) -> Result<Encoded> {
    // The special tokens it adds to an empty text are the ones it puts before any text.
    let prefix = tok.encode("", special).map_err(|e| {
        usage(what, format!("the tokenizer failed: {}", first_line(&e.to_string())), "check tokenizer.json")
    })?;
    let keep = prefix.get_ids().len();
    let mut enc = Encoded {
        tokens: prefix.get_tokens().to_vec(),
        ids: prefix.get_ids().to_vec(),
        type_ids: Vec::new(),
        truncated: 0,
    };
    if keep + 2 * n > max {
        return Err(usage(
            "--induction",
            format!("{} tokens exceed the model's {max} positions", keep + 2 * n),
            "pass a smaller N",
        ));
    }
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let low = (vocab / 10).max(1);
    let random: Vec<u32> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (low + (state % (vocab - low) as u64) as usize) as u32
        })
        .collect();
    for &id in random.iter().chain(&random) {
        enc.ids.push(id);
        enc.tokens.push(tok.id_to_token(id).unwrap_or_else(|| format!("#{id}")));
    }
    enc.type_ids = vec![0; enc.ids.len()];
    Ok(enc)
}

/// What `--truncate` dropped, if anything.
pub fn truncation_note(truncated: usize, max_len: usize) -> Option<String> {
    (truncated > 0)
        .then(|| format!("--truncate dropped the last {truncated} tokens to fit max_position_embeddings {max_len}"))
}
