//! `--check` on a GGUF file: candle-transformers' quantized model of the file's
//! `general.architecture`, read by candle's own GGUF reader and run on the trace's ids.
//!
//! Under attn-trace's default f32 arithmetic every block is dequantized to f32 and the
//! products are f32, so the reference is made to dequantize every weight too
//! (`CANDLE_DEQUANTIZE_ALL`, candle's own switch): both then compute in f32 on the same
//! values, and differ only in the order of their sums. Under `--arithmetic ggml` the
//! reference keeps candle's quantized products (activations rounded to 8 bits per block,
//! as llama.cpp does); candle's kernels are its own port of ggml's, so the two agree to
//! the rounding of those blocks, not bit for bit.

use super::shared::{cannot_load, Theirs};
use crate::error::usage;
use anyhow::Result;
use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models as m;
use std::io::Read;
use std::path::Path;

/// The GGUF architectures candle-transformers has a quantized model for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `quantized_llama`: Llama, Mistral, SmolLM and the Mixtral mixture (`llama.expert_count`).
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
    Phi3,
}

const KINDS: [(&str, Kind, &str); 5] = [
    ("llama", Kind::Llama, "quantized_llama"),
    ("qwen2", Kind::Qwen2, "quantized_qwen2"),
    ("qwen3", Kind::Qwen3, "quantized_qwen3"),
    ("gemma3", Kind::Gemma3, "quantized_gemma3"),
    ("phi3", Kind::Phi3, "quantized_phi3"),
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

    pub fn of(arch: &str) -> Option<Kind> {
        KINDS.iter().find(|(a, _, _)| *a == arch).map(|(_, k, _)| *k)
    }

    fn module(self) -> &'static str {
        KINDS.iter().find(|(_, k, _)| *k == self).map_or("?", |(_, _, m)| m)
    }
}

/// Whether `path` is a GGUF file (its first four bytes).
pub fn is_gguf(path: &str) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"GGUF"
}

/// The file's `general.architecture`, as candle's reader reads it.
pub fn architecture(path: &str) -> Result<String> {
    let mut file = std::fs::File::open(path)?;
    let what = format!("--check ({path})");
    let ct = gguf_file::Content::read(&mut file)
        .map_err(|e| usage(&what, format!("candle cannot read the GGUF header: {e}"), "drop --check"))?;
    let arch = ct.metadata.get("general.architecture").and_then(|v| v.to_string().ok()).cloned();
    arch.ok_or_else(|| usage(&what, "the file names no general.architecture", "drop --check"))
}

/// Runs candle-transformers' quantized model of `kind` from `path` on `ids`; `ggml`: keep
/// candle's quantized products (else every weight is dequantized to f32 first).
pub(crate) fn run(kind: Kind, path: &Path, ids: &[u32], ggml: bool) -> Result<Theirs> {
    let reference = format!("candle-transformers 0.11 models::{}", kind.module());
    let what = path.display().to_string();
    // candle reads its switch once per thread, when a thread first builds a product: the
    // reference runs on a thread of its own with the switch set as this run needs it.
    let _switch = Switch::set(!ggml);
    let logits = super::shared::on_thread(&reference, || -> Result<Tensor> {
        let failed = cannot_load(&what, &reference);
        let mut file = std::fs::File::open(path)?;
        let ct = gguf_file::Content::read(&mut file).map_err(&failed)?;
        let dev = Device::Cpu;
        let input = Tensor::new(ids, &dev)?.unsqueeze(0)?; // [1, pos]
        let logits = match kind {
            Kind::Llama => {
                m::quantized_llama::ModelWeights::from_gguf(ct, &mut file, &dev).map_err(&failed)?.forward(&input, 0)
            }
            Kind::Qwen2 => {
                m::quantized_qwen2::ModelWeights::from_gguf(ct, &mut file, &dev).map_err(&failed)?.forward(&input, 0)
            }
            Kind::Qwen3 => {
                m::quantized_qwen3::ModelWeights::from_gguf(ct, &mut file, &dev).map_err(&failed)?.forward(&input, 0)
            }
            Kind::Gemma3 => {
                m::quantized_gemma3::ModelWeights::from_gguf(ct, &mut file, &dev).map_err(&failed)?.forward(&input, 0)
            }
            Kind::Phi3 => m::quantized_phi3::ModelWeights::from_gguf(false, ct, &mut file, &dev)
                .map_err(&failed)?
                .forward(&input, 0),
        };
        Ok(logits.map_err(&failed)?.flatten_all()?) // [vocab]: the last position's
    })?;
    let arithmetic = if ggml {
        "candle's quantized products (8-bit activations per block), not llama.cpp's bit for bit"
    } else {
        "every weight dequantized to f32 (CANDLE_DEQUANTIZE_ALL), f32 products"
    };
    Ok(Theirs { name: reference, logits, hidden: None, notes: vec![("reference_arithmetic", arithmetic.to_string())] })
}

/// candle's `CANDLE_DEQUANTIZE_ALL`, set (or removed) for the reference's thread and put
/// back as it was when dropped.
struct Switch(Option<std::ffi::OsString>);

const SWITCH: &str = "CANDLE_DEQUANTIZE_ALL";

impl Switch {
    fn set(on: bool) -> Switch {
        let before = std::env::var_os(SWITCH);
        if on {
            std::env::set_var(SWITCH, "1");
        } else {
            std::env::remove_var(SWITCH);
        }
        Switch(before)
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        match &self.0 {
            Some(v) => std::env::set_var(SWITCH, v),
            None => std::env::remove_var(SWITCH),
        }
    }
}
