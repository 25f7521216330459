//! `--set STEP=FILE`, read before the pass: each step id checked against what this model
//! computes through its hook port, each file read through `input_file` (bounded, never a
//! device) and its readers' checks: a `.npy` array, or the step of that id in a saved trace
//! (`.json`, `.jsonl`, `.safetensors`, `.npz`, as `diff` reads them). The values must be
//! numbers and hold no NaN. The shape is checked by the hook (`analysis/set.rs`) against the
//! step's in the run.

use crate::config::{ModelConfig, SetStep};
use crate::diff::json::Raw;
use crate::error::{quote, usage};
use crate::export::Data;
use crate::settings::Settings;
use crate::trace::steps::{self, Stack};
use anyhow::Result;
use std::path::Path;

/// Steps recorded beside the port, not through it (nothing can replace them).
const NOT_HOOKED: [&str; 9] = [
    "tokens",
    "token_ids",
    "attn.mask",
    "attn.scores_uncapped",
    "ffn.router.chosen",
    "ffn.router.weights",
    "logits_uncapped",
    "attribution.heads",
    "attribution.sources",
];

/// The steps `--set` replaces, read and checked (and `--ablate`'s step ids checked, against
/// the same list of steps a hook can change).
pub fn read(settings: &Settings, cfg: &ModelConfig) -> Result<Vec<SetStep>> {
    for step in &settings.analysis.ablate_steps {
        check_step(cfg, "--ablate", step)?;
    }
    let mut out = Vec::new();
    for (step, file) in &settings.analysis.set {
        check_step(cfg, "--set", step)?;
        let (shape, values) = tensor(step, file)?;
        out.push(SetStep { step: step.clone(), file: file.clone(), shape, values: std::sync::Arc::new(values) });
    }
    Ok(out)
}

/// Refuses a step id this model does not compute through its port.
fn check_step(cfg: &ModelConfig, flag: &str, step: &str) -> Result<()> {
    let stack = crate::trace::stack_of(step);
    let own = match (stack, cfg.parts.seq2seq.as_ref()) {
        (Stack::Only, None) | (Stack::Encoder, Some(_)) => Some(cfg),
        (Stack::Decoder, Some(s)) => Some(&*s.decoder),
        _ => None,
    };
    let rest = &step[stack.prefix().len()..];
    let known = match (own, steps::parse_layer_id(step)) {
        (Some(c), Some((_, l, name))) => {
            l < c.layers && steps::def(name).is_some_and(|d| d.in_layer) && computed(name, c)
        }
        (Some(c), None) => steps::def(rest).is_some_and(|d| !d.in_layer) && computed(rest, c),
        (None, _) => false,
    };
    if known {
        return Ok(());
    }
    Err(usage(
        format!("{flag} {}", quote(step)),
        "this model computes no such step",
        "name a step id as the trace lists them: attn-trace --format json … | jq '.steps[].id'",
    ))
}

fn computed(name: &str, cfg: &ModelConfig) -> bool {
    !NOT_HOOKED.contains(&name) && crate::settings::limits::produced(name, cfg)
}

/// `file`'s tensor for `step`: its shape and values.
fn tensor(step: &str, file: &str) -> Result<(Vec<usize>, Vec<f32>)> {
    let what = format!("--set {}", quote(file));
    let fix = "pass a .npy of the step's shape, or a saved trace holding the step (.json, .jsonl, .safetensors, .npz)";
    let cant = |why: String| usage(&what, why, fix);
    let path = Path::new(file);
    crate::sources::input_file::open(&what, path, fix)?;
    let bytes = crate::sources::input_file::read(&what, path, fix)?;
    let raw = match file.to_ascii_lowercase().ends_with(".npy") {
        true => {
            let (shape, data, dtype) = crate::export::npy::read(&bytes).map_err(cant)?;
            Raw { name: step.to_string(), shape, data, dims: None, heads: None, dtype: Some(dtype) }
        }
        false => {
            let raws = crate::diff::load::tensors(&bytes, &what)?.raws;
            let mut found = raws.into_iter().filter(|r| r.name == step);
            let raw = found.next().ok_or_else(|| cant(format!("has no step {}", quote(step))))?;
            if raw.heads.is_some() {
                return Err(cant(format!("holds only some heads of {}", quote(step))));
            }
            raw
        }
    };
    let Data::Num(values) = raw.data else { return Err(cant("holds strings, not numbers".into())) };
    if values.iter().any(|v| v.is_nan()) {
        return Err(cant("holds NaN".into()));
    }
    Ok((raw.shape, values.iter().map(|&v| v as f32).collect()))
}
