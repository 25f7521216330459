//! Interventions in the forward pass, as the config lists them: a knocked-out edge's score
//! becomes −inf before the softmax (its weight exactly 0, the row renormalised over the
//! rest); an ablated head's context becomes zero (transformers' `head_mask`) or its mean over
//! positions, before the output projection. The recorded `attn.scores` and `attn.context`
//! show the changed values, and everything after them follows.
//!
//! A query whose every key is hidden (by knockouts, with the causal mask, a sliding window or
//! pads) has a softmax over nothing, 0/0: its weights are defined as 0, so its context is 0
//! (as PyTorch's `scaled_dot_product_attention` does since 2.5 with its `_safe_softmax`;
//! `torch.softmax` and `nn.MultiheadAttention` give NaN there). `mask::blind_rows` finds
//! those rows for the forward pass, and [`blinded_by_knockout`] those a knockout caused, for
//! the run's note.

use crate::config::{AblateMode, ModelConfig};
use anyhow::Result;
use candle_core::{Device, Tensor, D};
use std::collections::BTreeSet;

/// Adds −inf at this layer's knocked-out [head, query, key] entries of `scores` ([head,
/// query, key] for the queries from position `offset` on; a generation's decode step has one).
pub fn knockout(cfg: &ModelConfig, (layer, offset): (usize, usize), scores: Tensor) -> Result<Tensor> {
    let (h, n, keys) = scores.dims3()?;
    let edges: Vec<_> = cfg
        .interventions
        .knockout
        .iter()
        .filter(|k| k.layer == layer && (offset..offset + n).contains(&k.query) && k.key < keys)
        .collect();
    if edges.is_empty() {
        return Ok(scores);
    }
    let mut bias = vec![0f32; h * n * keys];
    for k in edges {
        for head in (0..h).filter(|&g| k.head.is_none_or(|x| x == g)) {
            bias[(head * n + k.query - offset) * keys + k.key] = f32::NEG_INFINITY;
        }
    }
    Ok((scores + Tensor::from_vec(bias, (h, n, keys), &Device::Cpu)?)?)
}

/// The `(layer, head, query)` rows of an `n`-token run that see no key because of a knockout
/// (rows the mask alone hides, a left pad under the causal mask, are not listed): the
/// rows whose weights are 0 by definition rather than by a softmax.
pub fn blinded_by_knockout(cfg: &ModelConfig, n: usize) -> Vec<(usize, usize, usize)> {
    let layers: BTreeSet<usize> = cfg.interventions.knockout.iter().map(|k| k.layer).collect();
    let mut out = Vec::new();
    for l in layers {
        // Each layer's own mask: a window may be local to some layers.
        let hidden = super::mask::hidden_keys(cfg, l, (0, n));
        let hidden = hidden.as_deref();
        let by_mask = |q: usize| hidden.is_some_and(|m| m[q * n..(q + 1) * n].iter().all(|&x| x));
        let Some(rows) = super::mask::blind_rows(cfg, l, hidden, (cfg.heads, 0, n), n) else { continue };
        let new = rows.iter().enumerate().filter(|&(i, &b)| b == 1 && !by_mask(i % n));
        out.extend(new.map(|(i, _)| (l, i / n, i % n)));
    }
    out
}

/// The run's note when knockouts leave a query of an `n`-token run (labelled by `tokens`)
/// without any key: which rows, and that their weights and context are 0 by definition.
pub fn blind_note(cfg: &ModelConfig, tokens: &[String]) -> Option<String> {
    if cfg.interventions.knockout.is_empty() {
        return None;
    }
    let n = tokens.len();
    let rows = blinded_by_knockout(cfg, n);
    let shown: Vec<String> = rows
        .iter()
        .take(4)
        // Spelled as the tables label it (`·capital`, not `Ġcapital`).
        .map(|&(l, h, q)| {
            let token = crate::trace::label::label(&tokens[q], None);
            format!("layer {l} head {h} query {q} {}", crate::error::quote(&token))
        })
        .collect();
    let more = if rows.len() > 4 { format!(" and {} more", rows.len() - 4) } else { String::new() };
    (!rows.is_empty()).then(|| {
        format!(
            "--knockout hides every key from {}{more}: a softmax over no key is 0/0, so these rows' attention \
             weights are 0 and their context is 0 (as PyTorch's scaled_dot_product_attention; torch.softmax gives NaN)",
            shown.join(", ")
        )
    })
}

/// Replaces this layer's ablated heads' context ([head, pos, d_v]) with zero or its mean
/// over positions.
pub fn ablate(cfg: &ModelConfig, layer: usize, context: Tensor) -> Result<Tensor> {
    let iv = &cfg.interventions;
    let heads: Vec<usize> = iv.ablate.iter().filter(|(l, _)| *l == layer).map(|(_, h)| *h).collect();
    drop_heads(cfg, &heads, context)
}

/// `context` [head, pos, d_v] with `heads` zeroed, or replaced by their mean over positions
/// (`--ablate-mode mean`); also an encoder–decoder's cross-attention heads (`cross.L.H`).
pub fn drop_heads(cfg: &ModelConfig, heads: &[usize], context: Tensor) -> Result<Tensor> {
    let iv = &cfg.interventions;
    if heads.is_empty() {
        return Ok(context);
    }
    let h = context.dim(0)?;
    let keep: Vec<f32> = (0..h).map(|g| if heads.contains(&g) { 0.0 } else { 1.0 }).collect();
    let keep = Tensor::from_vec(keep, (h, 1, 1), &Device::Cpu)?; // [head, 1, 1]
    let kept = context.broadcast_mul(&keep)?; // [head, pos, d_v]
    if iv.ablate_mode != Some(AblateMode::Mean) {
        return Ok(kept);
    }
    let mean = context.mean_keepdim(D::Minus2)?.broadcast_as(context.shape())?; // [head, pos, d_v]
    let dropped = keep.affine(-1.0, 1.0)?; // 1 where ablated
    Ok((kept + mean.broadcast_mul(&dropped)?)?)
}

/// Sets this layer's ablated experts' router logits ([pos, expert]) to −inf (`--ablate-expert`):
/// the softmax gives them probability 0, the others' probabilities are renormalised over the
/// experts left, and top-k never picks them.
pub fn ablate_experts(cfg: &ModelConfig, layer: usize, logits: Tensor) -> Result<Tensor> {
    let gone: Vec<usize> =
        cfg.interventions.ablate_expert.iter().filter(|(l, _)| *l == layer).map(|(_, e)| *e).collect();
    if gone.is_empty() {
        return Ok(logits);
    }
    let count = logits.dim(1)?;
    let bias: Vec<f32> = (0..count).map(|e| if gone.contains(&e) { f32::NEG_INFINITY } else { 0.0 }).collect();
    Ok(logits.broadcast_add(&Tensor::from_vec(bias, (1, count), &Device::Cpu)?)?)
}

/// Adds every steering vector of layer `layer` (`--steer`, activation addition) to the
/// layer's output `x` ([pos, d_model] for the absolute positions from `offset` on; a decode
/// step has one), `alpha × vector` at each position from the vector's `from` on.
pub fn steer(cfg: &ModelConfig, (layer, offset): (usize, usize), x: Tensor) -> Result<Tensor> {
    let mut x = x;
    for s in cfg.interventions.steer.iter().filter(|s| s.layer == layer) {
        let (n, d) = x.dims2()?;
        let first = s.from.saturating_sub(offset).min(n);
        if first == n {
            continue;
        }
        let add: Vec<f32> = s.vector.iter().map(|v| s.alpha * v).collect();
        let add = Tensor::from_vec(add, (1, d), &Device::Cpu)?; // [1, d_model]
        x = match first {
            0 => x.broadcast_add(&add)?,
            _ => Tensor::cat(&[&x.narrow(0, 0, first)?, &x.narrow(0, first, n - first)?.broadcast_add(&add)?], 0)?,
        };
    }
    Ok(x)
}
