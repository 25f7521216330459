//! Steering vectors (`--steer L:FILE[@ALPHA[@FROM]]`, `--steer-from A B --at-layer L --alpha
//! A`): the flags parsed here, and the vectors checked against the model once `sources` has
//! read them (`check`), still pure: no file is read here.

use crate::cli::Cli;
use crate::config::{ModelConfig, Steer};
use crate::error::usage;
use anyhow::Result;

/// The steering asked for, as typed and parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Steering {
    pub files: Vec<SteerFile>,
    pub from_prompts: Option<SteerFrom>,
}

/// One `--steer L:FILE[@ALPHA[@FROM]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SteerFile {
    pub layer: usize,
    /// The file and, for a trace, `#STEP[ROW]`.
    pub file: String,
    pub alpha: f32,
    pub from: usize,
}

/// `--steer-from A B --at-layer L --alpha A`.
#[derive(Debug, Clone, PartialEq)]
pub struct SteerFrom {
    pub positive: String,
    pub negative: String,
    pub layer: usize,
    pub alpha: f32,
}

impl Steering {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.from_prompts.is_none()
    }
}

/// `--steer` and `--steer-from` as typed.
pub fn options(cli: &Cli) -> Result<Steering> {
    let files = cli.steer.iter().map(|s| parse(s)).collect::<Result<Vec<_>>>()?;
    let from_prompts = match (&cli.steer_from, cli.at_layer) {
        (Some(p), Some(layer)) => {
            if let Some(empty) = p.iter().find(|t| t.trim().is_empty()) {
                let which = if std::ptr::eq(empty, &p[0]) { "first" } else { "second" };
                return Err(usage(
                    "--steer-from",
                    format!("the {which} prompt is empty"),
                    "pass two prompts, e.g. --steer-from \"Love\" \"Hate\"",
                ));
            }
            let alpha = cli.alpha.unwrap_or(1.0);
            finite_alpha("--alpha", alpha)?;
            Some(SteerFrom { positive: p[0].clone(), negative: p[1].clone(), layer, alpha })
        }
        _ => None,
    };
    let steering = Steering { files, from_prompts };
    if !steering.is_empty() && cli.attribute.is_some() {
        return Err(usage(
            "--steer",
            "--attribute does not count a steering vector as a term yet, so its sum check would fail",
            "drop --steer/--steer-from or --attribute",
        ));
    }
    if !steering.is_empty() && cli.check {
        return Err(usage(
            "--steer",
            "--check recomputes the model with candle-transformers, which is not steered",
            "drop --steer/--steer-from or --check",
        ));
    }
    Ok(steering)
}

fn finite_alpha(flag: &str, alpha: f32) -> Result<()> {
    if !alpha.is_finite() {
        return Err(usage(flag, format!("the coefficient {alpha} is not a finite number"), "pass e.g. 4 or -2.5"));
    }
    Ok(())
}

/// `3:v.npy@2.5@4` → layer 3, file v.npy, alpha 2.5, from position 4 (a file name with `@`
/// is not accepted: the first `@` starts ALPHA).
fn parse(spec: &str) -> Result<SteerFile> {
    let bad = |why: &str| {
        usage(
            "--steer",
            format!("{} {why}", crate::error::quote(spec)),
            "write L:FILE[@ALPHA[@FROM]], e.g. --steer 3:love.npy@4 or 3:t.json#layers.3.add_norm2.sum[5]@-2@1",
        )
    };
    let (layer, rest) = spec.split_once(':').ok_or_else(|| bad("has no L: before the file"))?;
    let layer: usize = layer.trim().parse().map_err(|_| bad("does not start with a layer number"))?;
    let mut parts = rest.split('@');
    let file = parts.next().unwrap_or_default().to_string();
    if file.trim().is_empty() {
        return Err(bad("names no file"));
    }
    let alpha: f32 = parts.next().map_or(Ok(1.0), |a| a.trim().parse()).map_err(|_| bad("has a bad ALPHA"))?;
    finite_alpha("--steer", alpha)?;
    let from: usize = match parts.next() {
        Some(f) => f.trim().parse().map_err(|_| bad("has a FROM that is not a position (0, 1, …)"))?,
        None => 0,
    };
    if parts.next().is_some() {
        return Err(bad("has more than L:FILE@ALPHA@FROM"));
    }
    Ok(SteerFile { layer, file, alpha, from })
}

/// A steering layer checked against the model: it exists; encoder–decoders are refused for now.
pub fn check_layer(cfg: &ModelConfig, flag: &str, layer: usize) -> Result<()> {
    if cfg.parts.seq2seq.is_some() {
        return Err(usage(
            flag,
            "steering an encoder–decoder is not supported yet",
            "use a decoder-only or encoder model",
        ));
    }
    if layer >= cfg.layers {
        return Err(usage(
            flag,
            format!("layer {layer} does not exist; the model has layers 0 to {}", cfg.layers - 1),
            "pick a layer in range",
        ));
    }
    Ok(())
}

/// A steering vector (read by the run) checked against the model: its layer exists, its width
/// is the residual stream's, every value is finite.
pub fn check(cfg: &ModelConfig, flag: &str, steer: Steer) -> Result<Steer> {
    check_layer(cfg, flag, steer.layer)?;
    let width = if cfg.parts.attention_only { cfg.out_width() } else { cfg.d_model };
    if steer.vector.len() != width {
        return Err(usage(
            flag,
            format!("{} has {} values, and the residual stream has {width}", steer.source, steer.vector.len()),
            "pass a vector of the model's width (d_model)",
        ));
    }
    if let Some(i) = steer.vector.iter().position(|x| !x.is_finite()) {
        return Err(usage(
            flag,
            format!("{} holds {} at index {i}", steer.source, steer.vector[i]),
            "pass a vector of finite numbers",
        ));
    }
    Ok(steer)
}
