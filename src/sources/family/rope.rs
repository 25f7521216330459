//! Rotary frequencies from `rope_theta` and `rope_scaling`, as transformers'
//! `ROPE_INIT_FUNCTIONS` compute them (in f32, as it does): the default θ^(−2i/d), divided
//! by `factor` for `linear`, or Llama 3's smooth per-wavelength scaling. A family whose
//! scaling differs (Phi-3's `longrope`, Gemma 3's local and global bases) adds its rule here.

use super::DecoderConfig;
use crate::config::Rope;
use crate::error::usage;
use anyhow::Result;

/// Rotary frequencies, as transformers' `ROPE_INIT_FUNCTIONS` compute them: the default
/// θ^(−2i/d), divided by `factor` for `linear`, or Llama 3's smooth per-wavelength scaling.
pub fn rope(c: &DecoderConfig, what: &str) -> Result<Rope> {
    let theta = c.rope_theta.unwrap_or(10000.0);
    let d = c.d_head();
    let base = Rope::plain(theta, d).inv_freq;
    let Some(scaling) = c.rope_scaling.as_ref().filter(|v| !v.is_null()) else {
        return Ok(Rope { theta, scaling: None, inv_freq: base });
    };
    let kind = scaling["rope_type"].as_str().or(scaling["type"].as_str()).unwrap_or("?").to_string();
    let num = |k: &str| scaling[k].as_f64();
    let inv_freq = match kind.as_str() {
        "default" => base,
        "linear" => {
            let f = num("factor").filter(|f| *f > 0.0).ok_or_else(|| bad_scaling(what, "linear needs factor > 0"))?;
            base.iter().map(|x| ((*x as f32) / f as f32) as f64).collect()
        }
        "llama3" => llama3(&base, scaling).ok_or_else(|| {
            bad_scaling(
                what,
                "llama3 needs factor, low_freq_factor, high_freq_factor and original_max_position_embeddings",
            )
        })?,
        other => {
            return Err(usage(
                what,
                format!("rope_scaling type {other:?} is not supported"),
                "use a model with no rope_scaling, or linear or llama3",
            ))
        }
    };
    Ok(Rope { theta, scaling: Some(kind), inv_freq })
}

fn bad_scaling(what: &str, why: &str) -> anyhow::Error {
    usage(what, format!("rope_scaling: {why}"), "restore the model's config.json")
}

/// Llama 3's frequency scaling (transformers' `_compute_llama3_parameters`), in f32.
fn llama3(base: &[f64], s: &serde_json::Value) -> Option<Vec<f64>> {
    let f = |k: &str| s[k].as_f64().map(|v| v as f32);
    let (factor, low, high, old) =
        (f("factor")?, f("low_freq_factor")?, f("high_freq_factor")?, f("original_max_position_embeddings")?);
    if factor <= 0.0 || high <= low {
        return None;
    }
    let (low_wavelen, high_wavelen) = (old / low, old / high);
    Some(
        base.iter()
            .map(|&x| {
                let x = x as f32;
                let wavelen = 2.0 * std::f32::consts::PI / x;
                let scaled = if wavelen > low_wavelen { x / factor } else { x };
                let smooth = (old / wavelen - low) / (high - low);
                let smoothed = (1.0 - smooth) * scaled / factor + smooth * scaled;
                // transformers' `~(wavelen < high) * ~(wavelen > low)`, i.e. high ≤ wavelen ≤ low.
                let medium = (high_wavelen..=low_wavelen).contains(&wavelen);
                (if medium { smoothed } else { scaled }) as f64
            })
            .collect(),
    )
}
