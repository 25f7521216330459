//! A whole run's peak memory: the program itself, what the model's sources hold (the
//! tokenizer, a mapped checkpoint), the forward pass ([`estimate`]) and what a run does beside
//! or after it (a second stack, a generation's logits, `--attribute`'s vectors, a patching
//! sweep, the pass in llama.cpp's arithmetic that a GGUF's tables are checked against). Each
//! term is measured against `/usr/bin/time` by `tests/bench/bench_memory.py` (BENCHMARKS.md,
//! "The memory estimate against the measured peak"), which keeps the sum between 1.0 and 1.25
//! times the measured peak on the shapes people use.

use super::estimate::{estimate, model_params, trace_bytes, BASELINE};
use crate::config::{Arithmetic, ModelConfig, Norm, RunConfig};
use crate::settings::{Format, ModelChoice, Settings};
use crate::trace::Selection;

/// Bytes a real model's tokenizer holds per vocabulary entry: the token and its id in both
/// directions, a BPE merge, the pre-tokenizer's tables, and (for a GGUF) the metadata arrays
/// they were read from (measured: SmolLM2's 49,152 entries, about 14 MiB, with a margin).
const TOKENIZER_BYTES: f64 = 360.0;

/// Bytes per head weight of the pass in llama.cpp's arithmetic: the token table and the head
/// read as blocks (a byte and a scale a weight at most), unpacked into 8-bit values and their
/// scales, each of the two (measured: SmolLM2's 28 M-weight table, about 120 MiB).
const GGML_HEAD_BYTES: f64 = 4.0;

/// The bytes a run of `s` needs at its peak, `n` positions (a generation's whole length),
/// recording `record` (streamed or kept, as the plan says).
pub fn need((cfg, run): (&ModelConfig, &RunConfig), n: usize, record: (&Selection, bool), s: &Settings) -> f64 {
    // An encoder–decoder's decoder is a second stack: its parameters and steps count too
    // (over the decoder's tokens, or a generation's length; `n` bounds both here).
    let decoder = cfg
        .parts
        .seq2seq
        .as_ref()
        .map_or(0.0, |d| estimate((&d.decoder, run), n.max(d.decoder_ids.len()), record.0, record.1));
    // A generation reads the prompt's logits whole, where `estimate` counts a few positions'.
    let prompt_logits = if s.generate.is_some() { 8.0 * n as f64 * cfg.vocab_size as f64 } else { 0.0 };
    // A generation converts every layer once when the whole model fits (`run/generate.rs`).
    let whole = run.whole();
    let generating = s.generate.is_some() && run.layer_at_a_time;
    let pass = |run: &RunConfig| {
        estimate((cfg, run), n, record.0, record.1) + decoder + attribution_bytes(cfg, n, s) + prompt_logits
    };
    let mut peak = pass(run);
    if generating {
        let made = pass(&whole);
        let limit = s.memory_available.map_or(s.max_memory, |free| free.min(s.max_memory)) as f64;
        if BASELINE + resident(cfg) + made <= limit {
            peak = made;
        }
    }
    // After the pass, when its parameters are gone: the sweep (which reads every layer again),
    // or the pass of the GGUF note (which opens the model again); the trace is still held.
    let trace = trace_bytes(cfg, n, record.0, record.1);
    let after = patching((cfg, &whole), n, s).max(ggml_note((cfg, run), n, s)) + trace;
    BASELINE + resident(cfg) + peak.max(after) + ggml_blocks(cfg)
}

/// What the model's sources hold for the whole run: the tokenizer, and a safetensors
/// checkpoint mapped into memory, every page of which the conversion to f32 reads (a GGUF's
/// tensors are read into buffers instead, counted with the parameters).
fn resident(cfg: &ModelConfig) -> f64 {
    let Some(model) = &cfg.model else { return 0.0 };
    let tokenizer = TOKENIZER_BYTES * cfg.vocab_size as f64;
    // An f32 checkpoint's tensors are the mapped pages themselves (measured: MiniLM's 87 MiB
    // file and its parameters peak at 102 MiB together).
    let mapped = match (&model.tensor_types, model.stored_dtype.as_deref()) {
        (None, Some("f16" | "bf16")) => 2.0 * model_params(cfg),
        _ => 0.0,
    };
    tokenizer + mapped
}

/// A patching sweep (`--patch`) reads every layer once and keeps them, with the head in f32
/// (`analysis::patch::activation::sweep`: a copy of a tied table), and each layer's residual stream of the two
/// baseline runs.
fn patching((whole, run): (&ModelConfig, &RunConfig), n: usize, s: &Settings) -> f64 {
    if s.analysis.patch.is_none() {
        return 0.0;
    }
    let nothing = Selection { steps: Some(Default::default()), ..Default::default() };
    let streams = 2.0 * 4.0 * (whole.layers * n * whole.d_model) as f64;
    let head = 4.0 * (whole.vocab_size * whole.d_model) as f64;
    estimate((whole, run), n, &nothing, true) + streams + head
}

/// The pass in llama.cpp's arithmetic that checks a GGUF model's predictions shown as tables
/// (`crate::arithmetic`): the prompt once more, recording nothing, its attention and FFN
/// untiled, with the token table and head as blocks.
fn ggml_note((cfg, run): (&ModelConfig, &RunConfig), n: usize, s: &Settings) -> f64 {
    let ModelChoice::Pretrained { arithmetic: Arithmetic::F32, .. } = &s.model else { return 0.0 };
    let gguf = cfg.model.as_ref().is_some_and(|m| m.tensor_types.is_some());
    let table = matches!(s.output.format, Format::Table | Format::Heatmap);
    if !gguf || !table || s.quiet || cfg.parts.lm_head.is_none() || cfg.parts.seq2seq.is_some() {
        return 0.0;
    }
    let mut ggml = cfg.clone();
    ggml.parts.arithmetic = Arithmetic::Ggml;
    let nothing = Selection { steps: Some(Default::default()), ..Default::default() };
    estimate((&ggml, run), n, &nothing, true) + ggml_blocks(&ggml)
}

/// Under `--arithmetic ggml`, the token table and head as blocks, unpacked ([`GGML_HEAD_BYTES`]);
/// a table stored as floats is used as it is.
fn ggml_blocks(cfg: &ModelConfig) -> f64 {
    let types = cfg.model.as_ref().and_then(|m| m.tensor_types.as_ref());
    let blocks = types.is_some_and(|t| t.values().flat_map(|m| m.keys()).any(|k| !k.starts_with(['f', 'b'])));
    if cfg.parts.arithmetic != Arithmetic::Ggml || !blocks {
        return 0.0;
    }
    GGML_HEAD_BYTES * (cfg.vocab_size * cfg.d_model) as f64
}

/// `--attribute` on a post-norm stack or a masked-LM head keeps each head's sources as vectors
/// at the position (analysis/attribute: heads × tokens × d_model f64 a layer), and each later
/// norm makes a new copy while the old one is alive; a pre-norm one keeps numbers only.
fn attribution_bytes(cfg: &ModelConfig, n: usize, s: &Settings) -> f64 {
    let keeps = cfg.norm == Norm::Post || cfg.parts.masked_lm;
    if s.analysis.attribute.is_none() || !keeps {
        return 0.0;
    }
    2.0 * 8.0 * (cfg.layers * cfg.heads) as f64 * n as f64 * cfg.d_model as f64
}
