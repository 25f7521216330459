//! Rotary frequencies from `rope_theta` and `rope_scaling`, as transformers'
//! `ROPE_INIT_FUNCTIONS` compute them (in f32, as it does): the default θ^(−2i/d), divided
//! by `factor` for `linear`, or Llama 3's smooth per-wavelength scaling; Phi-3's LongRoPE
//! ([`longrope`]). A family whose scaling differs (Gemma 3's local and global bases) adds its
//! rule here.

use super::config::DecoderConfig;
use crate::config::{LongRope, Rope};
use crate::error::usage;
use anyhow::Result;

/// Rotary frequencies, as transformers' `ROPE_INIT_FUNCTIONS` compute them: the default
/// θ^(−2i/d), divided by `factor` for `linear`, or Llama 3's smooth per-wavelength scaling.
pub fn rope(c: &DecoderConfig, what: &str) -> Result<Rope> {
    rotary(c, (c.rope_theta.unwrap_or(10000.0), c.d_head()), what)
}

/// [`rope`] with base `theta` over the first `dims` dimensions of each head (partial rotary:
/// GPT-NeoX's `rotary_pct`, Phi-3's `partial_rotary_factor`), d = `dims` in θ^(−2i/d).
pub fn rotary(c: &DecoderConfig, (theta, d): (f64, usize), what: &str) -> Result<Rope> {
    let base = rotary_plain(c, theta, d);
    let Some(scaling) = c.rope_scaling.as_ref().filter(|v| !v.is_null()) else {
        return Ok(base);
    };
    let kind = scaling["rope_type"].as_str().or(scaling["type"].as_str()).unwrap_or("?").to_string();
    let num = |k: &str| scaling[k].as_f64();
    let inv_freq = match kind.as_str() {
        "default" => base.inv_freq.clone(),
        "linear" => {
            let f = num("factor").filter(|f| *f > 0.0).ok_or_else(|| bad_scaling(what, "linear needs factor > 0"))?;
            base.inv_freq.iter().map(|x| ((*x as f32) / f as f32) as f64).collect()
        }
        "llama3" => llama3(&base.inv_freq, scaling).ok_or_else(|| {
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
    Ok(Rope { scaling: Some(kind), inv_freq, ..base })
}

fn bad_scaling(what: &str, why: &str) -> anyhow::Error {
    usage(what, format!("rope_scaling: {why}"), "restore the model's config.json")
}

/// Phi-3's LongRoPE over `dims` dimensions of each head (transformers'
/// `Phi3LongRoPEScaledRotaryEmbedding`, 4.46, and `_compute_longrope_parameters`, 4.51):
/// 1 / (factor[i] · θ^(2i/dims)) with `short_factor`, or with `long_factor` for an input longer
/// than `original_max_position_embeddings` ([`Rope::fit_length`] chooses), and cos and sin
/// multiplied by √(1 + ln(s) / ln(original)) where s = max_position_embeddings / original > 1
/// (`rope_scaling.attention_factor` instead, when given, as 4.51 reads it).
pub fn longrope(c: &DecoderConfig, (theta, dims): (f64, usize), what: &str) -> Result<Rope> {
    let s = c.rope_scaling.as_ref().filter(|v| !v.is_null()).cloned().unwrap_or_default();
    // Phi3Config's default, which config.json leaves out when equal.
    let original = c.original_max_position_embeddings.unwrap_or(4096);
    if original < 2 {
        let why = format!("config.json: original_max_position_embeddings is {original}; LongRoPE needs at least 2");
        return Err(usage(what, why, "restore the model's config.json"));
    }
    let freqs = |key: &str| -> Result<Vec<f64>> {
        let f = factors(&s[key], dims / 2).map_err(|why| bad_key(what, key, &why))?;
        let step = |i: usize| (theta as f32).powf((2 * i) as f32 / dims as f32);
        Ok(f.iter().enumerate().map(|(i, f)| (1.0 / (f * step(i))) as f64).collect())
    };
    let (short, long) = (freqs("short_factor")?, freqs("long_factor")?);
    let scale = c.max_position_embeddings as f64 / original as f64;
    let attention = match s["attention_factor"].as_f64() {
        Some(a) if a.is_finite() && a > 0.0 => a,
        Some(a) => return Err(bad_key(what, "attention_factor", &format!("is {a}; expected a number above 0"))),
        None if scale <= 1.0 => 1.0,
        None => (1.0 + scale.ln() / (original as f64).ln()).sqrt(),
    };
    let lr = LongRope { original_max_position_embeddings: original, factors: "short", short: short.clone(), long };
    Ok(Rope {
        scaling: Some("longrope".into()),
        inv_freq: short,
        attention_scaling: (attention != 1.0).then_some(attention),
        longrope: Some(lr),
        ..rotary_plain(c, theta, dims)
    })
}

/// `rope_scaling.{key}` named, as config.json spells it.
fn bad_key(what: &str, key: &str, why: &str) -> anyhow::Error {
    usage(what, format!("config.json: rope_scaling.{key} {why}"), "restore the model's config.json")
}

/// Unscaled rotary over `dims` of each head.
fn rotary_plain(c: &DecoderConfig, theta: f64, dims: usize) -> Rope {
    Rope { dims: (dims != c.d_head()).then_some(dims), ..Rope::plain(theta, dims) }
}

/// A LongRoPE factor list: `n` numbers above 0 (one per rotary pair), in f32 as transformers
/// makes them a float32 tensor; `Err` says what is wrong.
fn factors(v: &serde_json::Value, n: usize) -> std::result::Result<Vec<f32>, String> {
    let list =
        v.as_array().ok_or_else(|| format!("is missing; expected a list of {n} numbers (one per rotary pair)"))?;
    if list.len() != n {
        return Err(format!("has {} entries; expected {n}, one per rotary pair (half the rotary width)", list.len()));
    }
    list.iter()
        .map(|x| x.as_f64().filter(|f| f.is_finite() && *f > 0.0).map(|f| f as f32))
        .collect::<Option<Vec<f32>>>()
        .ok_or_else(|| format!("holds {}; expected numbers above 0", crate::error::quote(&v.to_string())))
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
