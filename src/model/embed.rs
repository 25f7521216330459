//! Token, position and (BERT) token-type embeddings: `embed.token`, `embed.position`,
//! `embed.token_type`, `embed.sum`, and `embed.out` (BERT's LayerNorm of the sum, Gemma's sum
//! times √d_model; otherwise the sum itself).

use crate::config::{ModelConfig, Positions};
use crate::hook::Hooks;
use crate::params::Input;
use crate::params::Params;
use crate::trace::{steps, Values};
use anyhow::{Context, Result};
use candle_core::{Device, Tensor};

pub fn embed(cfg: &ModelConfig, params: &Params, input: &Input, hooks: &mut Hooks) -> Result<Tensor> {
    embed_at(cfg, params, input, 0, hooks)
}

/// [`embed`] for tokens standing at positions `offset..` (a generation's decode step).
pub fn embed_at(cfg: &ModelConfig, params: &Params, input: &Input, offset: usize, hooks: &mut Hooks) -> Result<Tensor> {
    let tokens = hooks.rec.trace().tokens.clone();
    let n = tokens.len();
    hooks.rec.record("tokens", &steps::dims("tokens", cfg), &[n], Values::Str(tokens));
    let rows = match input {
        Input::Ids { ids, .. } => {
            hooks.rec.record(
                "token_ids",
                &steps::dims("token_ids", cfg),
                &[n],
                Values::Int(ids.iter().map(|&i| i as i64).collect()),
            );
            let token = match (&params.token_rows, &params.token, &params.stored) {
                (Some(rows), _, _) => rows.clone(), // [pos, d_model], gathered at load
                (None, Some(table), _) => table.index_select(&Tensor::new(ids.as_slice(), &Device::Cpu)?, 0)?,
                (None, None, Some(stored)) => stored.gather(ids)?, // read from the file's form
                (None, None, None) => anyhow::bail!("internal: token embeddings are missing"),
            }; // [pos, d_model]
            hooks.at("embed.token", cfg, token)?
        }
        Input::Matrix(m) => {
            hooks.observe("embed.input", cfg, m)?; // what --attribute's first term reads
            m.clone() // [pos, d_model], given by the user
        }
    };
    let position = position_rows(cfg, params, (offset, n))?; // [pos, d_model], if the model adds positions
    let position = match position {
        Some(position) => Some(hooks.at("embed.position", cfg, position)?), // [pos, d_model]
        None => None,
    };
    let token_type = match (&params.token_type, input) {
        (Some(table), Input::Ids { type_ids: Some(types), .. }) => {
            Some(table.index_select(&Tensor::new(types.as_slice(), &Device::Cpu)?, 0)?)
            // [pos, d_model]
        }
        _ => None,
    };
    let token_type = match token_type {
        Some(token_type) => Some(hooks.at("embed.token_type", cfg, token_type)?), // [pos, d_model]
        None => None,
    };
    // BART scales the token rows before adding positions (`scale_embedding`); Gemma, without
    // positions, scales the sum below (the same numbers, recorded as `embed.out`).
    let rows = match (&position, cfg.parts.embed_scale) {
        (Some(_), Some(scale)) => {
            let scaled = rows.affine(scale, 0.0)?; // [pos, d_model]
            hooks.at("embed.token_scaled", cfg, scaled)?
        }
        _ => rows,
    };
    let with_position = match &position {
        Some(position) => (&rows + position)?,
        None => rows.clone(),
    }; // [pos, d_model]
    let sum = match &token_type {
        Some(token_type) => (&with_position + token_type)?,
        None => with_position,
    }; // [pos, d_model]
    let sum = hooks.at("embed.sum", cfg, sum)?;
    // BERT normalises the sum (its own eps); Gemma scales it by √d_model (an f32, as
    // transformers multiplies); the toy encoder passes it through.
    let out = match (&params.embed_norm, cfg.parts.embed_scale) {
        (Some(norm), _) => super::norm::layer_norm(&sum, norm, cfg.eps)?,
        (None, Some(scale)) if position.is_none() => sum.affine(scale, 0.0)?,
        (None, _) => sum,
    }; // [pos, d_model]
    let out = hooks.at("embed.out", cfg, out)?;
    Ok(out)
}

/// The position embeddings of positions `offset..offset + n`, `[pos, d_model]`, if the model
/// adds them to the tokens'.
fn position_rows(cfg: &ModelConfig, params: &Params, (offset, n): (usize, usize)) -> Result<Option<Tensor>> {
    Ok(match cfg.positions {
        // Rotary positions act on q and k in every layer, not on the embeddings.
        Positions::None | Positions::Rotary => None,
        Positions::Learned => {
            let table = params.position.as_ref().context("internal: position table is missing")?;
            Some(table.narrow(0, offset, n)?)
        }
        Positions::Sinusoidal => {
            let table = Tensor::from_vec(sinusoidal(offset + n, cfg.d_model), (offset + n, cfg.d_model), &Device::Cpu)?;
            Some(table.narrow(0, offset, n)?)
        }
    })
}

/// Vaswani et al. (2017) §3.5: PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(same),
/// computed in f64 and rounded once to f32, so the table is the same on every machine.
pub fn sinusoidal(n: usize, d: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(n * d);
    for p in 0..n {
        for c in 0..d {
            let i2 = (c - c % 2) as f64;
            let angle = p as f64 / 10000f64.powf(i2 / d as f64);
            out.push(if c % 2 == 0 { angle.sin() } else { angle.cos() } as f32);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn sinusoidal_by_hand() {
        // Position 0 is [sin 0, cos 0, …] = [0, 1, 0, 1]; position 1, column 0 is sin(1).
        let pe = super::sinusoidal(2, 4);
        assert_eq!(&pe[..4], &[0.0, 1.0, 0.0, 1.0]);
        assert_eq!(pe[4], 1f64.sin() as f32);
        assert_eq!(pe[6], (1.0f64 / 100.0).sin() as f32); // 10000^(2/4) = 100
    }
}
