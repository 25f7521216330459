//! The terms of a direct logit attribution, one function per part of the model that writes
//! into the residual stream, each adding to the [`Ledger`] what the part wrote at the
//! attributed position: the embeddings ([`embeddings`]), each layer's heads with the output
//! projection's bias and each head's split by source ([`attention`]), the FFN or each expert
//! ([`ffn`], [`experts`]), and a post-norm's LayerNorm of the whole stream ([`through_norm`]).
//! The hooks (`mod.rs`) call them with what they saw at the steps.
//!
//! Each part's vector at the position goes through the norms after it with their scale
//! frozen: a LayerNorm is x ↦ (x − mean x)·g/σ, its centring applied to each term (as
//! TransformerLens's `apply_ln_to_stack`), an RMSNorm x ↦ x·g/σ, with σ the run's own. A
//! sandwich norm (Gemma) is such a map of its sublayer's output alone, at that output's σ, so
//! the heads split through it exactly. In a pre-norm stack the direction the final residual
//! is read along is known before the run up to the final σ, so each term is projected as it
//! is made and only numbers are kept; a post-norm stack (BERT) keeps each term's vector and
//! carries it through every later norm.

use super::ledger::Ledger;
use crate::config::{AblateMode, ModelConfig};
use crate::model::kernels::product::matmul;
use crate::params::{Block, Dense, Ffn, LayerNorm, LayerParams};
use crate::trace::attribute::{Term, HEAD};
use anyhow::{anyhow, Result};
use candle_core::{DType, IndexOp, Tensor};

pub(super) const F64: DType = DType::F64;

/// A norm frozen at the run's scale at one position: x ↦ C(x)·g·inv, C centring for
/// LayerNorm, inv = 1/√(var + eps) (or 1/√(mean x² + eps)) of the run's input there.
pub(super) struct Frozen {
    weight: Tensor,
    centre: bool,
    pub inv: f64,
}

impl Frozen {
    /// The norm `p` frozen at row `q` of its input `x` ([pos, d_model]).
    pub(super) fn of(p: &LayerNorm, x: &Tensor, q: usize, eps: f64, centre: bool) -> Result<Frozen> {
        let row = x.i(q)?.to_dtype(F64)?.to_vec1::<f64>()?;
        let d = row.len() as f64;
        let mean = if centre { row.iter().sum::<f64>() / d } else { 0.0 };
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / d;
        Ok(Frozen { weight: p.weight.to_dtype(F64)?, centre, inv: 1.0 / (var + eps).sqrt() })
    }

    /// The norm's weight and centring alone (inv 1): its scale is applied later.
    pub(super) fn unscaled(p: &LayerNorm, centre: bool) -> Result<Frozen> {
        Ok(Frozen { weight: p.weight.to_dtype(F64)?, centre, inv: 1.0 })
    }

    /// The map applied to vectors `v` [m, d_model].
    pub(super) fn apply(&self, v: &Tensor) -> Result<Tensor> {
        let v = if self.centre { v.broadcast_sub(&v.mean_keepdim(1)?)? } else { v.clone() };
        Ok((v.broadcast_mul(&self.weight)? * self.inv)?)
    }

    /// Its transpose applied to a direction `d` [d_model]: C(g ⊙ d)·inv (C is symmetric).
    pub(super) fn transpose(&self, d: &Tensor) -> Result<Tensor> {
        let gd = (d * &self.weight)?;
        let gd = if self.centre { gd.broadcast_sub(&gd.mean_keepdim(0)?)? } else { gd };
        Ok((gd * self.inv)?)
    }
}

/// A term without its value yet.
fn term(layer: Option<usize>, name: &'static str, index: Option<usize>) -> Term {
    Term { layer, name, index, value: 0.0 }
}

/// Adds `terms`, whose vectors at the position are the rows of `v` ([m, d_model] f64), each
/// first through the sublayer's frozen norm `post` where it has one.
fn push(g: &mut Ledger, terms: Vec<Term>, v: Tensor, post: Option<&Frozen>) -> Result<()> {
    match &g.direction {
        Some(d) => {
            let d = match post {
                Some(f) => f.transpose(d)?,
                None => d.clone(),
            };
            let values = matmul(&v, &d.unsqueeze(1)?)?.flatten_all()?.to_vec1::<f64>()?;
            g.terms.extend(terms.into_iter().zip(values).map(|(t, value)| Term { value, ..t }));
        }
        None => {
            g.kept.push(match post {
                Some(f) => f.apply(&v)?,
                None => v,
            });
            g.terms.extend(terms);
        }
    }
    Ok(())
}

/// A bias [d_model] as one term's vector, [1, d_model] f64.
fn row(b: &Tensor) -> Result<Tensor> {
    Ok(b.to_dtype(F64)?.unsqueeze(0)?)
}

/// The embeddings' terms: each named part's row at the position ([pos, d_model] each), times
/// Gemma's √d_model where the model scales the sum.
pub(super) fn embeddings(cfg: &ModelConfig, parts: &[(&'static str, &Tensor)], g: &mut Ledger) -> Result<()> {
    let q = g.request.position;
    let scale = cfg.parts.embed_scale.unwrap_or(1.0);
    for (name, t) in parts {
        let v = (t.i(q)?.to_dtype(F64)? * scale)?.unsqueeze(0)?; // [1, d_model]
        push(g, vec![term(None, name, None)], v, None)?;
    }
    Ok(())
}

/// A LayerNorm of the whole residual stream (BERT's embedding norm, a post-norm layer's two):
/// every term so far goes through it, frozen at row q of its input `x`, and its bias is a
/// term of its own (`bias` names it). Only a post-norm stack has these, and it keeps vectors.
pub(super) fn through_norm(
    cfg: &ModelConfig,
    p: &LayerNorm,
    x: &Tensor,
    (layer, bias): (Option<usize>, &'static str),
    g: &mut Ledger,
) -> Result<()> {
    let f = Frozen::of(p, x, g.request.position, cfg.eps, true)?;
    if g.direction.is_some() {
        return Err(anyhow!("internal: a norm of the whole residual stream in a pre-norm attribution"));
    }
    g.kept = g.kept.iter().map(|t| f.apply(t)).collect::<Result<_>>()?;
    g.kept_sources = g.kept_sources.iter().map(|t| f.apply(t)).collect::<Result<_>>()?;
    match &p.bias {
        Some(b) => push(g, vec![term(layer, bias, None)], row(b)?, None),
        None => Ok(()),
    }
}

/// The sandwich norm (Gemma) of a sublayer whose output is `out`, frozen at the position.
fn sandwich(cfg: &ModelConfig, p: Option<&LayerNorm>, out: &Tensor, q: usize) -> Result<Option<Frozen>> {
    p.map(|n| Frozen::of(n, out, q, cfg.eps, !cfg.parts.rms_norm)).transpose()
}

/// The sandwich norm's own bias, as a term, where it has one.
fn sandwich_bias(g: &mut Ledger, p: Option<&LayerNorm>, (l, name): (usize, &'static str)) -> Result<()> {
    match p.and_then(|n| n.bias.as_ref()) {
        Some(b) => push(g, vec![term(Some(l), name, None)], row(b)?, None),
        None => Ok(()),
    }
}

/// Layer `l`'s attention at the position: each head's context times its slice of W_O
/// (`attn.head`), the output projection's bias (`attn.bias`), and each head's term split by
/// the key it read (weight × the key's value through the head's W_O slice). `v` is the values
/// as each query head reads them ([head, pos, d_v], groups repeated), `out` the attention's
/// output (a sandwich norm's input).
pub(super) fn attention(
    cfg: &ModelConfig,
    p: &LayerParams,
    l: usize,
    (weights, v, context, out): (&Tensor, &Tensor, &Tensor, &Tensor),
    g: &mut Ledger,
) -> Result<()> {
    let q = g.request.position;
    let o = p.out_proj.as_ref().ok_or_else(|| anyhow!("internal: attribution needs an output projection"))?;
    let post_norm = p.block.as_ref().and_then(|b| b.post_attn_norm.as_ref());
    let post = sandwich(cfg, post_norm, out, q)?;
    let heads = Heads {
        w_o: o.weight.to_dtype(F64)?,                // [d_model, head·d_v]
        ctx: context.i((.., q, ..))?.to_dtype(F64)?, // [head, d_v]
        v: v.to_dtype(F64)?,                         // [head, key_pos, d_v]
        w: source_weights(cfg, l, weights, q)?,      // [head, key_pos]
        names: (0..v.dim(0)?).map(|i| term(Some(l), HEAD, Some(i))).collect(),
    };
    match g.direction.clone() {
        Some(d) => heads.projected(g, &post.as_ref().map_or(Ok(d.clone()), |f| f.transpose(&d))?)?,
        None => heads.kept(g, post.as_ref())?,
    }
    if let Some(b) = &o.bias {
        push(g, vec![term(Some(l), "attn.bias", None)], row(b)?, post.as_ref())?;
    }
    sandwich_bias(g, post_norm, (l, "norm1_post.bias"))
}

/// One layer's heads at the position, in f64: what their terms and sources are made of.
struct Heads {
    w_o: Tensor,
    ctx: Tensor,
    v: Tensor,
    /// The source weights ([`source_weights`]).
    w: Tensor,
    names: Vec<Term>,
}

impl Heads {
    /// Projected in each head's own space: z_h = W_O,hᵀ d once per head, then the head's term
    /// is ctx_h · z_h and its source k is w_k · (v_k · z_h).
    fn projected(self, g: &mut Ledger, d: &Tensor) -> Result<()> {
        let (h, d_v) = self.ctx.dims2()?;
        let z = matmul(&d.unsqueeze(0)?, &self.w_o)?.reshape((h, d_v))?; // [head, d_v]
        let heads = (&self.ctx * &z)?.sum(1)?.to_vec1::<f64>()?; // [head]
        let by_key = matmul(&self.v, &z.unsqueeze(2)?)?.squeeze(2)?; // [head, key_pos]
        let sources = (by_key * &self.w)?.flatten_all()?.to_vec1::<f64>()?;
        g.terms.extend(self.names.into_iter().zip(heads).map(|(t, value)| Term { value, ..t }));
        g.sources.extend(sources);
        Ok(())
    }

    /// Kept as vectors (a post-norm stack): each head's term W_O,h·ctx_h, and each source
    /// w_k · W_O,h·v_k ([head·key, d_model]), through the sandwich norm `post` if any.
    fn kept(self, g: &mut Ledger, post: Option<&Frozen>) -> Result<()> {
        let (h, n, d_v) = self.v.dims3()?;
        let d_model = self.w_o.dim(0)?;
        let per_head = self.w_o.reshape((d_model, h, d_v))?.transpose(0, 1)?.contiguous()?; // [head, d_model, d_v]
        let heads = matmul(&per_head, &self.ctx.unsqueeze(2)?)?.squeeze(2)?; // [head, d_model]
        push(g, self.names, heads, post)?;
        let weighted = self.v.broadcast_mul(&self.w.unsqueeze(2)?)?.transpose(1, 2)?.contiguous()?; // [head, d_v, key_pos]
        let vectors = matmul(&per_head, &weighted)?.transpose(1, 2)?.contiguous()?; // [head, key_pos, d_model]
        let vectors = vectors.reshape((h * n, d_model))?;
        let vectors = match post {
            Some(f) => f.apply(&vectors)?,
            None => vectors,
        };
        g.kept_sources.push(vectors);
        Ok(())
    }
}

/// Each head's weights from the position to every key, as its context was made: an ablated
/// head's are 0 (`--ablate-mode zero`) or their mean over the queries (`mean`: its context is
/// the mean of the contexts over positions). [head, key_pos] f64.
fn source_weights(cfg: &ModelConfig, l: usize, weights: &Tensor, q: usize) -> Result<Tensor> {
    let mut rows = weights.i((.., q, ..))?.to_dtype(F64)?.to_vec2::<f64>()?;
    let iv = &cfg.interventions;
    for &(_, h) in iv.ablate.iter().filter(|(layer, _)| *layer == l) {
        rows[h] = match iv.ablate_mode {
            Some(AblateMode::Mean) => weights.i(h)?.to_dtype(F64)?.mean(0)?.to_vec1::<f64>()?,
            _ => vec![0.0; rows[h].len()],
        };
    }
    Ok(Tensor::new(rows, &candle_core::Device::Cpu)?)
}

/// A dense FFN's terms at the position: its output less its output bias (`ffn`), and that
/// bias (`ffn.bias`), through the block's sandwich norm where it has one. A mixture of experts
/// gives its terms by [`experts`].
pub(super) fn ffn(cfg: &ModelConfig, b: &Block, l: usize, out: &Tensor, g: &mut Ledger) -> Result<()> {
    let Ffn::Dense(Dense { linear2, .. }) = &b.ffn else { return Ok(()) };
    let q = g.request.position;
    let post = sandwich(cfg, b.post_ffn_norm.as_ref(), out, q)?;
    let total = out.i(q)?.to_dtype(F64)?; // [d_model]
    let body = match &linear2.bias {
        Some(bias) => (total - bias.to_dtype(F64)?)?,
        None => total,
    };
    push(g, vec![term(Some(l), "ffn", None)], body.unsqueeze(0)?, post.as_ref())?;
    if let Some(bias) = &linear2.bias {
        push(g, vec![term(Some(l), "ffn.bias", None)], row(bias)?, post.as_ref())?;
    }
    sandwich_bias(g, b.post_ffn_norm.as_ref(), (l, "norm2_post.bias"))
}

/// What a mixture routed: each chosen expert's output [pos, rank, d_model], and the routing
/// weights and chosen experts by [pos][rank].
#[derive(Clone, Copy)]
pub(super) struct Routed<'a> {
    pub(super) outs: &'a Tensor,
    pub(super) weights: &'a [Vec<f32>],
    pub(super) chosen: &'a [Vec<usize>],
}

/// A mixture's terms at the position: each chosen expert's output times its routing weight
/// (`ffn.expert`, by expert id), and the shared expert's output times its gate
/// (`ffn.shared`); `shared` is the gate [pos, 1] and output [pos, d_model].
pub(super) fn experts(
    cfg: &ModelConfig,
    (l, post_norm): (usize, Option<&LayerNorm>),
    routed: Routed,
    shared: Option<(&Tensor, &Tensor)>,
    out: &Tensor,
    g: &mut Ledger,
) -> Result<()> {
    let q = g.request.position;
    let post = sandwich(cfg, post_norm, out, q)?;
    let Routed { outs, weights, chosen } = routed;
    let mut ranks: Vec<usize> = (0..chosen[q].len()).collect();
    ranks.sort_by_key(|&r| chosen[q][r]);
    for r in ranks {
        let v = (outs.i((q, r))?.to_dtype(F64)? * weights[q][r] as f64)?.unsqueeze(0)?; // [1, d_model]
        push(g, vec![term(Some(l), "ffn.expert", Some(chosen[q][r]))], v, post.as_ref())?;
    }
    if let Some((gate, shared_out)) = shared {
        let share = gate.i((q, 0))?.to_dtype(F64)?.to_scalar::<f64>()?;
        let v = (shared_out.i(q)?.to_dtype(F64)? * share)?.unsqueeze(0)?; // [1, d_model]
        push(g, vec![term(Some(l), "ffn.shared", None)], v, post.as_ref())?;
    }
    sandwich_bias(g, post_norm, (l, "norm2_post.bias"))
}
