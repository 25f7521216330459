//! `--check` on a Hugging Face decoder folder: candle-transformers' model of the folder's
//! `model_type`, its `Config` deserialised by candle's own serde from config.json and its
//! weights read by candle's `VarBuilder` (safetensors, shards, or a PyTorch `.bin`), run on
//! the trace's token ids. Every one returns the logits at the last position; Qwen2 and Qwen3
//! expose their final hidden states too, which are then compared as well.

use super::shared::{cannot_load, Theirs};
use crate::error::usage;
use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models as m;
use std::path::{Path, PathBuf};

/// The decoder families candle-transformers implements, by config.json's `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Llama,
    Mistral,
    Mixtral,
    Qwen2,
    Qwen2Moe,
    Qwen3,
    Qwen3Moe,
    Gemma2,
    Gemma3,
    Phi3,
}

const KINDS: [(&str, Kind); 11] = [
    ("llama", Kind::Llama),
    ("mistral", Kind::Mistral),
    ("mixtral", Kind::Mixtral),
    ("qwen2", Kind::Qwen2),
    ("qwen2_moe", Kind::Qwen2Moe),
    ("qwen3", Kind::Qwen3),
    ("qwen3_moe", Kind::Qwen3Moe),
    ("gemma2", Kind::Gemma2),
    ("gemma3_text", Kind::Gemma3),
    // A Gemma 3 folder with the multimodal `gemma3` type, whose text model attn-trace reads.
    ("gemma3", Kind::Gemma3),
    ("phi3", Kind::Phi3),
];

impl Kind {
    pub const NAMES: [&'static str; KINDS.len()] = {
        let mut names = [""; KINDS.len()];
        let mut i = 0;
        while i < KINDS.len() {
            names[i] = KINDS[i].0;
            i += 1;
        }
        names
    };

    pub fn of(model_type: &str) -> Option<Kind> {
        KINDS.iter().find(|(n, _)| *n == model_type).map(|(_, k)| *k)
    }

    /// Why candle-transformers' model of this kind would not compute `config` (config.json)
    /// as transformers does on `n` tokens, where it is known not to: the check refuses then
    /// rather than fail a correct trace. Each was found by comparing it with transformers'
    /// own outputs on the test fixtures (fixtures/oracle).
    pub fn unsupported(self, config: &serde_json::Value, n: usize) -> Option<String> {
        let num = |k: &str| config.get(k).and_then(|v| v.as_f64());
        let yes = |k: &str| config.get(k).and_then(|v| v.as_bool()) == Some(true);
        let model = self.name();
        let windowed = match self {
            Kind::Qwen2 | Kind::Qwen2Moe => yes("use_sliding_window"),
            Kind::Mistral | Kind::Mixtral | Kind::Gemma2 => true,
            _ => false,
        };
        match num("sliding_window") {
            Some(w) if windowed && (w as usize) < n => {
                return Some(format!(
                    "candle's {model} masks a sliding window one key wider than transformers, and these {n} tokens exceed sliding_window ({w})"
                ))
            }
            _ => {}
        }
        for flag in ["attention_bias", "mlp_bias"] {
            if self == Kind::Llama && yes(flag) {
                return Some(format!("candle's llama has no biases, and config.json sets {flag}"));
            }
        }
        if self == Kind::Qwen2Moe && yes("tie_word_embeddings") {
            return Some(
                "candle's qwen2_moe reads lm_head.weight, and this checkpoint ties its head to the embeddings".into(),
            );
        }
        if self == Kind::Phi3 && num("partial_rotary_factor").is_some_and(|f| f < 1.0) {
            return Some("candle's phi3 rotates every dimension, and config.json sets partial_rotary_factor".into());
        }
        if self == Kind::Phi3 && config.get("rope_scaling").is_some_and(|v| !v.is_null()) {
            return Some("candle's phi3 does not scale rotary positions as transformers does (rope_scaling)".into());
        }
        if matches!(self, Kind::Gemma2 | Kind::Gemma3) && num("query_pre_attn_scalar") != num("head_dim") {
            let why = "scales scores by 1/√head_dim, and config.json's query_pre_attn_scalar differs";
            return Some(format!("candle's {} {why}", self.module()));
        }
        None
    }

    /// candle-transformers' module for this kind.
    fn module(self) -> &'static str {
        match self {
            Kind::Gemma3 => "gemma3",
            k => k.name(),
        }
    }

    fn name(self) -> &'static str {
        KINDS.iter().find(|(_, k)| *k == self).map_or("?", |(n, _)| n)
    }
}

/// Runs candle-transformers' model of `kind` from the folder `dir` on `ids`.
pub(crate) fn run(kind: Kind, dir: &Path, ids: &[u32]) -> Result<Theirs> {
    let what = dir.display().to_string();
    let reference = format!("candle-transformers 0.11 models::{}", kind.module());
    let failed = cannot_load(&what, &reference);
    let config = candle_config(&read_config(dir)?).to_string();
    let files = weights(dir)?;
    let vb = if files[0].extension().is_some_and(|e| e == "bin") {
        VarBuilder::from_pth(&files[0], DType::F32, &Device::Cpu).map_err(&failed)?
    } else {
        // SAFETY: the checkpoint is mapped read-only, as the trace itself maps it; it must not
        // be truncated while we run.
        unsafe { VarBuilder::from_mmaped_safetensors(&files, DType::F32, &Device::Cpu) }.map_err(&failed)?
    };
    let input = Tensor::new(ids, &Device::Cpu)?.unsqueeze(0)?; // [1, pos]
    let parse = |e: serde_json::Error| {
        usage(format!("--check ({what})"), format!("{reference} cannot read config.json: {e}"), "drop --check")
    };
    let c = |e| failed(e);
    let (logits, hidden) = match kind {
        Kind::Llama => {
            let cfg: m::llama::LlamaConfig = serde_json::from_str(&config).map_err(parse)?;
            let cfg = cfg.into_config(false);
            let mut cache = m::llama::Cache::new(false, DType::F32, &cfg, &Device::Cpu).map_err(c)?;
            let model = m::llama::Llama::load(vb, &cfg).map_err(c)?;
            (model.forward(&input, 0, &mut cache).map_err(c)?, None)
        }
        Kind::Mistral => {
            let cfg: m::mistral::Config = serde_json::from_str(&config).map_err(parse)?;
            (m::mistral::Model::new(&cfg, vb).map_err(c)?.forward(&input, 0).map_err(c)?, None)
        }
        Kind::Mixtral => {
            let cfg: m::mixtral::Config = serde_json::from_str(&config).map_err(parse)?;
            (m::mixtral::Model::new(&cfg, vb).map_err(c)?.forward(&input, 0).map_err(c)?, None)
        }
        Kind::Qwen2 => {
            let cfg: m::qwen2::Config = serde_json::from_str(&config).map_err(parse)?;
            let hidden = m::qwen2::Model::new(&cfg, vb.clone()).map_err(c)?.forward(&input, 0, None).map_err(c)?;
            (head(&vb, cfg.tie_word_embeddings, &hidden).map_err(c)?, Some(hidden))
        }
        Kind::Qwen2Moe => {
            let cfg: m::qwen2_moe::Config = serde_json::from_str(&config).map_err(parse)?;
            (m::qwen2_moe::Model::new(&cfg, vb).map_err(c)?.forward(&input, 0).map_err(c)?, None)
        }
        Kind::Qwen3 => {
            let cfg: m::qwen3::Config = serde_json::from_str(&config).map_err(parse)?;
            let hidden = m::qwen3::Model::new(&cfg, vb.clone()).map_err(c)?.forward(&input, 0).map_err(c)?;
            (head(&vb, cfg.tie_word_embeddings, &hidden).map_err(c)?, Some(hidden))
        }
        Kind::Qwen3Moe => {
            let cfg: m::qwen3_moe::Config = serde_json::from_str(&config).map_err(parse)?;
            (m::qwen3_moe::ModelForCausalLM::new(&cfg, vb).map_err(c)?.forward(&input, 0).map_err(c)?, None)
        }
        Kind::Gemma2 => {
            let cfg: m::gemma2::Config = serde_json::from_str(&config).map_err(parse)?;
            (m::gemma2::Model::new(false, &cfg, vb).map_err(c)?.forward(&input, 0).map_err(c)?, None)
        }
        Kind::Gemma3 => {
            let cfg: m::gemma3::Config = serde_json::from_str(&config).map_err(parse)?;
            (m::gemma3::Model::new(false, &cfg, vb).map_err(c)?.forward(&input, 0).map_err(c)?, None)
        }
        Kind::Phi3 => {
            let cfg: m::phi3::Config = serde_json::from_str(&config).map_err(parse)?;
            (m::phi3::Model::new(&cfg, vb).map_err(c)?.forward(&input, 0).map_err(c)?, None)
        }
    };
    Ok(Theirs {
        name: reference,
        logits: logits.flatten_all()?,                     // [vocab]: the last position's
        hidden: hidden.map(|h| h.squeeze(0)).transpose()?, // [pos, d_model]
        notes: Vec::new(),
    })
}

/// config.json as read.
pub fn read_config(dir: &Path) -> Result<serde_json::Value> {
    Ok(serde_json::from_str(&std::fs::read_to_string(dir.join("config.json"))?)?)
}

/// config.json with transformers' meaning of a `null` window (no window) spelled as candle's
/// configurations need it: a window as long as the model's context.
fn candle_config(config: &serde_json::Value) -> serde_json::Value {
    let mut config = config.clone();
    // Mixtral's configuration names candle's attention kernel; the reference never uses flash.
    if config.get("use_flash_attn").is_none() {
        config["use_flash_attn"] = serde_json::json!(false);
    }
    if config.get("sliding_window").is_some_and(|v| v.is_null()) {
        config["sliding_window"] = config.get("max_position_embeddings").cloned().unwrap_or(serde_json::json!(1 << 20));
    }
    config
}

/// The language-model head over the last position of `hidden` [1, pos, d_model], as
/// candle's `ModelForCausalLM` applies it (its base model is what exposes the hidden states).
fn head(vb: &VarBuilder, tied: bool, hidden: &Tensor) -> candle_core::Result<Tensor> {
    let name =
        if tied || !vb.contains_tensor("lm_head.weight") { "model.embed_tokens.weight" } else { "lm_head.weight" };
    let (_, n, d) = hidden.dims3()?;
    let w = vb.get_unchecked(name)?; // [vocab, d_model]
    let last = hidden.narrow(1, n - 1, 1)?.reshape((1, d))?; // [1, d_model]
    last.matmul(&w.t()?) // [1, vocab]
}

/// The folder's weight files, in candle's order: `model.safetensors`, the shards an index
/// names, or `pytorch_model.bin`.
fn weights(dir: &Path) -> Result<Vec<PathBuf>> {
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&index)?)?;
        let mut shards: Vec<PathBuf> = doc["weight_map"]
            .as_object()
            .map(|m| m.values().filter_map(|v| v.as_str()).map(|f| dir.join(f)).collect())
            .unwrap_or_default();
        shards.sort();
        shards.dedup();
        if !shards.is_empty() {
            return Ok(shards);
        }
    }
    let bin = dir.join("pytorch_model.bin");
    if bin.is_file() {
        return Ok(vec![bin]);
    }
    Err(usage(
        format!("--check ({})", dir.display()),
        "candle-transformers' loaders read model.safetensors, its shards or pytorch_model.bin, and the folder has none",
        "drop --check",
    ))
}
