//! The ends of an attribution: [`open`] before the pass (the direction the final residual
//! stream is read along, when it is known then), and [`close`] after it: the readout
//! (final norm frozen at the run's σ, the unembedding of the answer minus the foil's, or
//! BERT's masked-LM head with its GELU frozen as a gate), the terms that enter after the
//! residual stream (the final norm's bias, the head's), the model's own logit next to the
//! terms' sum, and the two steps `attribution.heads` and `attribution.sources` ([`record`]).

use super::ledger::Ledger;
use super::terms::{Frozen, F64};
use crate::config::{ModelConfig, Norm};
use crate::model::kernels::linear::linear;
use crate::model::kernels::product::matmul;
use crate::model::{ffn, head::Unembed, unembed};
use crate::params::{Linear, Params};
use crate::trace::attribute::{Answer, Attribution, Request, Term};
use crate::trace::{steps, Recorder, Values};
use anyhow::{anyhow, Result};
use candle_core::{IndexOp, Tensor};

/// Opens the ledger of `req` over `n` positions. A pre-norm stack read by a linear head has
/// its direction now: the final norm's transpose (without its σ, applied at the end) of
/// W_U[answer] − W_U[foil]; a post-norm stack or a masked-LM head keeps vectors instead.
pub(super) fn open(
    cfg: &ModelConfig,
    params: &Params,
    head: Option<&Unembed>,
    req: Request,
    n: usize,
) -> Result<Ledger> {
    let direction = if cfg.norm == Norm::Pre && params.mlm.is_none() {
        let (u, _) = unembedding(head_rows(params, head)?, &req)?;
        Some(match &params.final_norm {
            Some(p) => Frozen::unscaled(p, !cfg.parts.rms_norm)?.transpose(&u)?,
            None => u,
        })
    } else {
        None
    };
    Ok(Ledger::new(req, direction, (cfg.layers, cfg.heads, n)))
}

/// Where the answer's row of the unembedding comes from.
enum Rows<'a> {
    Head(&'a Unembed<'a>),
    Linear(&'a Linear),
}

/// The language-model head, or BERT's masked-LM decoder.
fn head_rows<'a>(params: &'a Params, head: Option<&'a Unembed<'a>>) -> Result<Rows<'a>> {
    match (&params.mlm, head) {
        (Some(mlm), _) => Ok(Rows::Linear(&mlm.decoder)),
        (None, Some(h)) => Ok(Rows::Head(h)),
        (None, None) => Err(anyhow!("internal: attribution needs a head")),
    }
}

/// (W[answer] − W[foil], b[answer] − b[foil]): [d_model] f64, and the bias difference
/// where the head has a bias.
fn unembedding(rows: Rows, req: &Request) -> Result<(Tensor, Option<f64>)> {
    let one = |id: u32| -> Result<(Tensor, Option<f64>)> {
        let i = id as usize;
        let lin = match &rows {
            Rows::Head(Unembed::Stored(table)) => return Ok((table.rows(i, 1)?.squeeze(0)?.to_dtype(F64)?, None)),
            Rows::Head(Unembed::Dense(lin)) => lin.as_ref(),
            Rows::Linear(lin) => *lin,
        };
        let bias = lin.bias.as_ref().map(|b| b.i(i)?.to_dtype(F64)?.to_scalar::<f64>()).transpose()?;
        Ok((lin.weight.i(i)?.to_dtype(F64)?, bias))
    };
    let (a, ab) = one(req.answer)?;
    match req.foil {
        Some(f) => {
            let (b, bb) = one(f)?;
            Ok(((a - b)?, ab.zip(bb).map(|(x, y)| x - y)))
        }
        None => Ok((a, ab)),
    }
}

/// How the final residual stream at the position becomes the logit (difference): along
/// `direction` ([d_model] f64, every frozen scale in it), with `inv` the final norm's own
/// scale (a pre-norm ledger's terms were projected without it), plus `terms` that enter after
/// the residual stream.
struct Readout {
    direction: Tensor,
    inv: f64,
    terms: Vec<Term>,
}

fn bias_term(name: &'static str, value: f64) -> Term {
    Term { layer: None, name, index: None, value }
}

/// A language-model head after the final norm (if any): u = W_U[a] − W_U[f];
/// logit = C(g ⊙ u)·x/σ + u·b_norm + (b_U[a] − b_U[f]).
fn lm_readout(
    cfg: &ModelConfig,
    params: &Params,
    head: Option<&Unembed>,
    req: &Request,
    x: &Tensor,
) -> Result<Readout> {
    let (u, head_bias) = unembedding(head_rows(params, head)?, req)?;
    let q = req.position;
    let mut terms = Vec::new();
    let (direction, inv) = match &params.final_norm {
        Some(p) => {
            let f = Frozen::of(p, x, q, cfg.eps, !cfg.parts.rms_norm)?;
            if let Some(b) = &p.bias {
                terms.push(bias_term("final_norm.bias", (&u * b.to_dtype(F64)?)?.sum_all()?.to_scalar::<f64>()?));
            }
            (f.transpose(&u)?, f.inv)
        }
        None => (u, 1.0),
    };
    if let Some(b) = head_bias {
        terms.push(bias_term("head.bias", b));
    }
    Ok(Readout { direction, inv, terms })
}

/// BERT's masked-LM head: h = W_d·x + b_d, a = GELU(h), y = LN(a), logit = W_dec·y + b_dec.
/// The GELU is frozen as a gate at the run's own h, a = r ⊙ h with r = GELU(h)/h (½ where
/// h = 0), as the norms' scales are: each term's share of h passes through the same gate, so
/// the terms still add up to the logit exactly. The direction at the residual stream is then
/// W_dᵀ(r ⊙ C(g ⊙ u))/σ, and b_d, the norm's bias and the decoder's bias are terms.
fn mlm_readout(cfg: &ModelConfig, params: &Params, req: &Request, x: &Tensor) -> Result<Readout> {
    let mlm = params.mlm.as_ref().ok_or_else(|| anyhow!("internal: no masked-LM head"))?;
    let (u, dec_bias) = unembedding(Rows::Linear(&mlm.decoder), req)?;
    let row = x.narrow(0, req.position, 1)?; // [1, d_model]
    let h = linear(&row, &mlm.dense)?; // [1, d_model]
    let a = ffn::activation(cfg.activation, &h)?; // [1, d_model]
    let (hs, as_) = (h.flatten_all()?.to_vec1::<f32>()?, a.flatten_all()?.to_vec1::<f32>()?);
    let gate: Vec<f64> = hs.iter().zip(&as_).map(|(&h, &a)| if h == 0.0 { 0.5 } else { a as f64 / h as f64 }).collect();
    let gate = Tensor::new(gate, x.device())?;
    let norm = Frozen::of(&mlm.norm, &a, 0, cfg.eps, true)?;
    let at_h = (norm.transpose(&u)? * &gate)?; // [d_model]: the direction at h
    let mut terms = Vec::new();
    if let Some(b) = &mlm.dense.bias {
        terms.push(bias_term("mlm.dense.bias", (&at_h * b.to_dtype(F64)?)?.sum_all()?.to_scalar::<f64>()?));
    }
    if let Some(b) = &mlm.norm.bias {
        terms.push(bias_term("mlm.norm.bias", (&u * b.to_dtype(F64)?)?.sum_all()?.to_scalar::<f64>()?));
    }
    if let Some(b) = dec_bias {
        terms.push(bias_term("mlm.decoder.bias", b));
    }
    let direction = matmul(&mlm.dense.weight.to_dtype(F64)?.t()?, &at_h.unsqueeze(1)?)?.squeeze(1)?; // [d_model]
    Ok(Readout { direction, inv: 1.0, terms })
}

/// Closes the ledger `g` after the pass: `x` is the last layer's output ([pos, d_model],
/// before the final norm), `normed` after it, `raw` the head's logits before any soft-cap when
/// the pass computed them.
pub(super) fn close(
    cfg: &ModelConfig,
    params: &Params,
    head: Option<&Unembed>,
    (x, normed, raw): (&Tensor, &Tensor, Option<&Tensor>),
    g: Ledger,
) -> Result<Attribution> {
    let shape = g.shape;
    let req = g.request.clone();
    let r = match params.mlm {
        Some(_) => mlm_readout(cfg, params, &req, x)?,
        None => lm_readout(cfg, params, head, &req, x)?,
    };
    let (mut terms, sources) = project(g, &r)?;
    terms.extend(r.terms);
    let q = req.position;
    let raw = match raw {
        Some(raw) => raw.i(q)?,
        None => unembed::uncapped_logits(cfg, params, head, &normed.narrow(0, q, 1)?)?
            .ok_or_else(|| anyhow!("internal: attribution needs logits"))?
            .squeeze(0)?,
    }; // [vocab]
    let diff = |logits: &Tensor| -> Result<f64> {
        let at = |id: u32| -> Result<f64> { Ok(logits.i(id as usize)?.to_scalar::<f32>()? as f64) };
        Ok(at(req.answer)? - req.foil.map(at).transpose()?.unwrap_or(0.0))
    };
    let logit = diff(&raw)?;
    let capped = cfg.parts.final_softcap.map(|_| diff(&unembed::capped(cfg, raw.clone())?)).transpose()?;
    let total = terms.iter().map(|t| t.value).sum();
    let answer = |id| Answer { id, token: None, text: None };
    Ok(Attribution {
        position: q,
        answer: answer(req.answer),
        foil: req.foil.map(answer),
        terms,
        sources,
        shape,
        total,
        logit,
        capped,
    })
}

/// The ledger's terms and sources as numbers: a projected ledger's times the final norm's
/// scale, a kept one's vectors along the readout's direction.
fn project(g: Ledger, r: &Readout) -> Result<(Vec<Term>, Vec<f64>)> {
    if g.direction.is_some() {
        let terms = g.terms.into_iter().map(|t| Term { value: t.value * r.inv, ..t }).collect();
        return Ok((terms, g.sources.iter().map(|s| s * r.inv).collect()));
    }
    let along = |v: &Tensor| -> Result<Vec<f64>> {
        Ok(matmul(v, &r.direction.unsqueeze(1)?)?.flatten_all()?.to_vec1::<f64>()?)
    };
    let mut values = Vec::with_capacity(g.terms.len());
    for v in &g.kept {
        values.extend(along(v)?);
    }
    let terms = g.terms.into_iter().zip(values).map(|(t, value)| Term { value, ..t }).collect();
    let mut sources = Vec::new();
    for v in &g.kept_sources {
        sources.extend(along(v)?);
    }
    Ok((terms, sources))
}

/// `attribution.heads` [layer, head] and `attribution.sources` [layer, head, key_pos].
pub fn record(cfg: &ModelConfig, a: &Attribution, rec: &mut Recorder) {
    let (layers, heads, keys) = a.shape;
    let f32s = |v: &[f64]| Values::F32(v.iter().map(|&x| x as f32).collect());
    let dims = |name| steps::dims(name, cfg);
    rec.record("attribution.heads", &dims("attribution.heads"), &[layers, heads], f32s(&a.heads()));
    rec.record("attribution.sources", &dims("attribution.sources"), &[layers, heads, keys], f32s(&a.sources));
}
