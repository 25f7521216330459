//! The toy model's textbook forms: attention-only layers (a `MultiHeadAttention(d_in, d_out,
//! …)` module alone, with or without its output projection), heads built as separate
//! single-head modules, and an output projection whose bias differs from the q/k/v
//! projections'. Each is decided by the flags and, with `--weights`, by which tensors the
//! file holds; the two must agree.

use super::common::agree;
use super::file::FileDims;
use crate::config::ModelConfig;
use crate::config::Parts;
use crate::error::usage;
use crate::settings::recipe::{LinearInit, Proj, Recipe};
use crate::settings::Shape;
use anyhow::Result;

/// Which parts a layer has besides its q, k, v projections.
#[derive(Debug, Clone, Copy)]
pub struct Form {
    pub attention_only: bool,
    pub no_out_proj: bool,
}

/// The layer form from the flags and the file: a file without `ffn.linear1` is
/// attention-only, and such a file without `attn.out_proj` has no output projection.
pub fn form(s: &Shape, fd: Option<&FileDims>, w: &str) -> Result<Form> {
    let Some(f) = fd else {
        return Ok(Form { attention_only: s.attention_only, no_out_proj: s.no_out_proj });
    };
    let attention_only = f.d_ff.is_none();
    if s.attention_only && !attention_only {
        return Err(usage(
            "--attention-only",
            format!("{w} has an FFN (layers.0.ffn.linear1.weight)"),
            "drop --attention-only",
        ));
    }
    if s.no_out_proj && f.out_width.is_some() {
        return Err(usage(
            "--no-out-proj",
            format!("{w} has an output projection (layers.0.attn.out_proj.weight)"),
            "drop --no-out-proj",
        ));
    }
    // A full layer without its output projection is reported with every missing tensor.
    Ok(Form { attention_only, no_out_proj: attention_only && f.out_width.is_none() })
}

/// What `fill` needs to know about the model besides the flags and the file.
pub struct Sizes {
    pub d_model: usize,
    /// The heads side by side: heads × d_v.
    pub concat: usize,
    pub layers: usize,
    pub qkv_bias: bool,
}

/// Sets the textbook parts of `parts`: the form, the width of `attn.out` (`d_out` when it is
/// not d_model) and the output projection's bias.
pub fn fill(parts: &mut Parts, s: &Shape, form: Form, z: Sizes, fd: Option<&FileDims>, w: &str) -> Result<()> {
    parts.attention_only = form.attention_only;
    parts.no_out_proj = form.no_out_proj;
    parts.separate_heads = s.separate_heads;
    if form.attention_only && (parts.final_norm || parts.lm_head.is_some() || parts.gated_ffn) {
        return Err(usage(
            w,
            "an attention-only model (no layers.0.ffn.linear1.weight) has no gated FFN, final norm or LM head",
            "remove those tensors, or give every layer its FFN",
        ));
    }
    if s.separate_heads && parts.kv_heads.is_some() {
        return Err(usage(
            "--separate-heads",
            "single-head modules each have their own key and value, so heads cannot share them",
            "drop --separate-heads or the shared key/value heads",
        ));
    }
    let out = out_width(s, form, &z, fd, w)?;
    if form.attention_only && z.layers > 1 && out != z.d_model {
        return Err(usage(
            "--layers",
            format!(
                "each attention-only layer feeds the next, but its output is {out} wide, not d_model {}",
                z.d_model
            ),
            "trace one layer (--layers 1), or make the output d_model wide",
        ));
    }
    parts.d_out = (out != z.d_model).then_some(out);
    let out_bias = out_bias(s, form, fd, w)?;
    parts.attn_out_bias = (!form.no_out_proj && out_bias != z.qkv_bias).then_some(out_bias);
    Ok(())
}

/// The width of `attn.out`: the concatenated heads without an output projection, else the
/// file's output projection rows, `--d-out`, or d_model.
fn out_width(s: &Shape, form: Form, z: &Sizes, fd: Option<&FileDims>, w: &str) -> Result<usize> {
    if s.d_out.is_some() && !form.attention_only {
        return Err(usage(
            "--d-out",
            "a layer with a residual sum keeps d_model wide",
            "add --attention-only to trace the attention module alone, or drop --d-out",
        ));
    }
    if form.no_out_proj {
        return match s.d_out {
            Some(d) if d != z.concat => Err(usage(
                "--d-out",
                format!("without an output projection attn.out is the heads side by side, {} wide, not {d}", z.concat),
                "leave --d-out out, or set each head's width with --d-k and --d-v",
            )),
            _ => Ok(z.concat),
        };
    }
    Ok(match fd.and_then(|f| f.out_width) {
        Some(rows) if !form.attention_only && rows != z.d_model => {
            return Err(usage(
                w,
                format!(
                    "layers.0.attn.out_proj.weight has {rows} rows, but the residual sum needs d_model {}",
                    z.d_model
                ),
                "give the output projection d_model rows",
            ))
        }
        Some(rows) => agree("--d-out", s.d_out, rows, w)?,
        None => s.d_out.unwrap_or(z.d_model),
    })
}

/// Whether the output projection has a bias: `--attn-bias` or `--out-proj-bias`, or the file.
fn out_bias(s: &Shape, form: Form, fd: Option<&FileDims>, w: &str) -> Result<bool> {
    if form.no_out_proj && s.out_proj_bias {
        return Err(usage("--out-proj-bias", "there is no output projection", "drop --out-proj-bias or --no-out-proj"));
    }
    let flag = s.attn_bias || s.out_proj_bias;
    match fd {
        Some(f) if flag && !f.out_bias && !form.no_out_proj => {
            let name = if s.attn_bias { "--attn-bias" } else { "--out-proj-bias" };
            Err(usage(name, format!("{w} has no output projection bias"), format!("drop {name}")))
        }
        Some(f) => Ok(f.out_bias),
        None => Ok(flag),
    }
}

/// `--linear-init encoder-layer` draws what `nn.TransformerEncoderLayer(d_model, heads, d_ff,
/// bias=…)` has: one fused in-projection split evenly into heads, biases everywhere or
/// nowhere, a plain FFN, and nothing it lacks.
pub fn check_encoder_layer(cfg: &ModelConfig, recipe: &Recipe) -> Result<()> {
    if recipe.linear != LinearInit::EncoderLayer {
        return Ok(());
    }
    let p = &cfg.parts;
    let refuse = |why: String, fix: &str| Err(usage("--linear-init encoder-layer", why, fix));
    if cfg.d_k * cfg.heads != cfg.d_model || cfg.d_v != cfg.d_k || p.kv_heads.is_some() {
        return refuse(
            format!("nn.TransformerEncoderLayer splits d_model {} evenly into its heads", cfg.d_model),
            "drop --d-k, --d-v and --kv-heads, and pick --heads that divides --d-model",
        );
    }
    let lacks = [
        (p.attention_only, "--attention-only"),
        (p.separate_heads, "--separate-heads"),
        (p.gated_ffn, "--gated"),
        (p.rms_norm, "--rms-norm"),
        (p.lm_head.is_some(), "--lm-head"),
        (p.attn_out_bias.is_some(), "--qkv-bias or --out-proj-bias"),
        (recipe.draw_order != [Proj::Q, Proj::K, Proj::V], "--draw-order"),
    ];
    if let Some((_, flag)) = lacks.iter().find(|(on, _)| *on) {
        return refuse(format!("nn.TransformerEncoderLayer has no {flag}"), "drop it, or use --linear-init kaiming");
    }
    if cfg.attn_bias != cfg.ffn_bias {
        return refuse(
            "nn.TransformerEncoderLayer has biases everywhere (bias=True) or nowhere (bias=False)".into(),
            "add --attn-bias for bias=True, or --no-ffn-bias for bias=False",
        );
    }
    Ok(())
}
