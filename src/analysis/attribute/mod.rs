//! Direct logit attribution (`--attribute`; docs/INTERVENTIONS.md): the residual stream at
//! one position is a sum of what each part of the model wrote into it, and every norm on the
//! way to the logit, frozen at the run's own scale, is linear; so the logit (difference) is a
//! sum of one number per part (`terms.rs`).
//!
//! As hooks: [`Attribute`] is registered at the steps where each part's output exists (the
//! embeddings, each layer's attention weights, values, context and output, a post-norm's sums
//! and norms, the FFN's output or the experts' routing and outputs, each layer's output, the
//! final `output` and the head's logits) and keeps what it sees until the step that completes
//! a term; the parameters a term needs (W_O, the norms' weights, the head) come from the
//! `Params` it was built with. It opens its ledger when it is built (`readout.rs`) and closes
//! it after the pass ([`Attribute::finish`]); the run sets the trace's `attribution` from it.
//! Only the pass that starts at position 0 is read: a generation's decode steps share the
//! run's hooks and are not attributed.

mod ledger;
mod readout;
mod terms;

pub use ledger::Ledger;

pub use readout::record;

use crate::config::{ModelConfig, Norm};
use crate::hook::{Hook, Registry, Site};
use crate::model::head::Unembed;
use crate::params::{Block, Ffn, LayerParams, Params};
use crate::trace::attribute::{Attribution, Request};
use anyhow::{anyhow, Result};
use candle_core::Tensor;
use std::borrow::Cow;
use std::cell::RefCell;

/// The steps outside the layers the attribution reads.
const GLOBAL: [&str; 9] = [
    "embed.token",
    "embed.token_scaled",
    "embed.input",
    "embed.position",
    "embed.token_type",
    "embed.sum",
    "embed.out",
    "output",
    "logits_uncapped",
];

/// The steps of each layer it reads (`output`: the layer's output, an unrecorded site).
const IN_LAYER: [&str; 15] = [
    "attn.v_heads",
    "attn.weights",
    "attn.context",
    "attn.out",
    "add_norm1.sum",
    "add_norm1.out",
    "add_norm2.sum",
    "add_norm2.out",
    "ffn.router.chosen",
    "ffn.router.weights",
    "ffn.experts.out",
    "ffn.shared.out",
    "ffn.shared.gate",
    "ffn.out",
    "output",
];

/// What the hooks saw and a later step needs, in the order the pass makes them.
#[derive(Default)]
struct Seen {
    /// The embeddings' first part, named (`embed.token` or `embed.input`), its position and
    /// token-type rows.
    rows: Option<(&'static str, Tensor)>,
    position: Option<Tensor>,
    token_type: Option<Tensor>,
    /// The residual sum a post-norm's LayerNorm reads (`embed.sum`, `add_norm{1,2}.sum`).
    sum: Option<Tensor>,
    weights: Option<Tensor>,
    v: Option<Tensor>,
    context: Option<Tensor>,
    chosen: Option<Vec<Vec<usize>>>,
    routing: Option<Vec<Vec<f32>>>,
    outs: Option<Tensor>,
    shared_out: Option<Tensor>,
    share: Option<Tensor>,
    /// The last layer's output, the final norm's output, the head's uncapped logits.
    resid: Option<Tensor>,
    normed: Option<Tensor>,
    raw: Option<Tensor>,
}

struct State {
    /// None once the attribution is finished.
    ledger: Option<Ledger>,
    seen: Seen,
}

/// Direct logit attribution as hooks, for one request over one pass of `params`.
pub struct Attribute<'p> {
    params: &'p Params,
    head: Option<Unembed<'p>>,
    state: RefCell<State>,
}

impl<'p> Attribute<'p> {
    /// The attribution of `request` over a pass of `n` positions; its ledger opens now.
    pub fn new(cfg: &ModelConfig, params: &'p Params, request: Request, n: usize) -> Result<Attribute<'p>> {
        let head = Unembed::of(cfg, params);
        let ledger = readout::open(cfg, params, head.as_ref(), request, n)?;
        let state = State { ledger: Some(ledger), seen: Seen::default() };
        Ok(Attribute { params, head, state: RefCell::new(state) })
    }

    /// Registers the hooks at every step the attribution reads (for `cfg.layers` layers).
    pub fn register<'h>(&'h self, cfg: &ModelConfig, registry: &mut Registry<'h>) {
        for id in GLOBAL {
            registry.add(id, self);
        }
        for l in 0..cfg.layers {
            for name in IN_LAYER {
                registry.add(format!("layers.{l}.{name}"), self);
            }
        }
    }

    /// Closes the ledger after the pass: the finished attribution.
    pub fn finish(self, cfg: &ModelConfig) -> Result<Attribution> {
        let State { ledger, seen, .. } = self.state.into_inner();
        let g = ledger.ok_or_else(|| anyhow!("internal: the attribution was finished twice"))?;
        let (Some(resid), Some(normed)) = (&seen.resid, &seen.normed) else {
            return Err(anyhow!("internal: the attribution saw no pass to its end"));
        };
        readout::close(cfg, self.params, self.head.as_ref(), (resid, normed, seen.raw.as_ref()), g)
    }
}

impl Hook for Attribute<'_> {
    fn at(&self, site: &Site, cfg: &ModelConfig, t: Tensor) -> Result<Tensor> {
        if site.offset != 0 {
            return Ok(t); // a decode step
        }
        let mut state = self.state.borrow_mut();
        let st = &mut *state;
        let Some(g) = st.ledger.as_mut() else { return Ok(t) };
        match site.layer {
            None => global(cfg, self.params, site.name, &t, (g, &mut st.seen))?,
            Some(l) => {
                // The layer's parameters as the pass holds them (read again only outside a stack).
                let p = match site.params {
                    Some(p) => Cow::Borrowed(p),
                    None => self.params.layers.get(l)?,
                };
                in_layer(cfg, (&p, l), site.name, &t, (g, &mut st.seen))?;
            }
        }
        Ok(t)
    }
}

/// A step outside the layers: the embeddings' terms at `embed.sum`, the embedding norm's at
/// `embed.out`, and the end of the pass kept for [`Attribute::finish`].
fn global(
    cfg: &ModelConfig,
    params: &Params,
    name: &str,
    t: &Tensor,
    (g, seen): (&mut Ledger, &mut Seen),
) -> Result<()> {
    match name {
        "embed.token" | "embed.token_scaled" => seen.rows = Some(("embed.token", t.clone())),
        "embed.input" => seen.rows = Some(("embed.input", t.clone())),
        "embed.position" => seen.position = Some(t.clone()),
        "embed.token_type" => seen.token_type = Some(t.clone()),
        "embed.sum" => {
            let first = seen.rows.as_ref().map(|(n, r)| (*n, r));
            let parts = [first, seen.position.as_ref().map(|p| ("embed.position", p))];
            let parts = parts.into_iter().chain([seen.token_type.as_ref().map(|p| ("embed.token_type", p))]);
            let parts: Vec<(&'static str, &Tensor)> = parts.flatten().collect();
            terms::embeddings(cfg, &parts, g)?;
            seen.sum = Some(t.clone());
        }
        "embed.out" => {
            if let (Some(norm), Some(sum)) = (&params.embed_norm, &seen.sum) {
                terms::through_norm(cfg, norm, sum, (None, "embed.norm.bias"), g)?;
            }
        }
        "output" => seen.normed = Some(t.clone()),
        "logits_uncapped" => seen.raw = Some(t.clone()),
        _ => {}
    }
    Ok(())
}

/// A step of layer `l` (parameters `p`): the heads' terms at `attn.out`, a post-norm's norms'
/// at `add_norm{1,2}.out`, the FFN's or the experts' at `ffn.out`.
fn in_layer(
    cfg: &ModelConfig,
    (p, l): (&LayerParams, usize),
    name: &str,
    t: &Tensor,
    (g, seen): (&mut Ledger, &mut Seen),
) -> Result<()> {
    let block = || p.block.as_ref().ok_or_else(|| anyhow!("internal: layer {l} has no block to attribute"));
    match name {
        "attn.v_heads" => seen.v = Some(t.clone()),
        "attn.weights" => seen.weights = Some(t.clone()),
        "attn.context" => seen.context = Some(t.clone()),
        "attn.out" => {
            let (Some(weights), Some(v), Some(context)) = (seen.weights.take(), seen.v.take(), seen.context.take())
            else {
                return Ok(()); // computed in tiles: nothing read the whole weights
            };
            terms::attention(cfg, p, l, (&weights, &v, &context, t), g)?;
        }
        "add_norm1.sum" | "add_norm2.sum" => seen.sum = Some(t.clone()),
        "add_norm1.out" | "add_norm2.out" if cfg.norm == Norm::Post => {
            let b = block()?;
            let sum = seen.sum.take().ok_or_else(|| anyhow!("internal: layer {l}'s {name} before its sum"))?;
            let (norm, bias) = match name {
                "add_norm1.out" => (&b.norm1, "add_norm1.bias"),
                _ => (&b.norm2, "add_norm2.bias"),
            };
            terms::through_norm(cfg, norm, &sum, (Some(l), bias), g)?;
        }
        "ffn.router.chosen" => {
            let ids = t.to_vec2::<u32>()?; // [pos][rank]
            seen.chosen = Some(ids.into_iter().map(|r| r.into_iter().map(|e| e as usize).collect()).collect());
        }
        "ffn.router.weights" => seen.routing = Some(t.to_vec2::<f32>()?),
        "ffn.experts.out" => seen.outs = Some(t.clone()),
        "ffn.shared.out" => seen.shared_out = Some(t.clone()),
        "ffn.shared.gate" => seen.share = Some(t.clone()),
        "ffn.out" => ffn_out(cfg, (block()?, l), t, (g, seen))?,
        "output" => seen.resid = Some(t.clone()),
        _ => {}
    }
    Ok(())
}

/// Layer `l`'s FFN output `t`: a dense FFN's terms, or a mixture's from what its router chose.
fn ffn_out(cfg: &ModelConfig, (b, l): (&Block, usize), t: &Tensor, (g, seen): (&mut Ledger, &mut Seen)) -> Result<()> {
    if matches!(b.ffn, Ffn::Dense(_)) {
        return terms::ffn(cfg, b, l, t, g);
    }
    let missing = || anyhow!("internal: layer {l}'s experts were not seen");
    let (outs, weights, chosen) = (seen.outs.take(), seen.routing.take(), seen.chosen.take());
    let (outs, weights, chosen) =
        (outs.ok_or_else(missing)?, weights.ok_or_else(missing)?, chosen.ok_or_else(missing)?);
    let routed = terms::Routed { outs: &outs, weights: &weights, chosen: &chosen };
    let shared = (seen.share.take(), seen.shared_out.take());
    let shared = match &shared {
        (Some(gate), Some(out)) => Some((gate, out)),
        _ => None,
    };
    terms::experts(cfg, (l, b.post_ffn_norm.as_ref()), routed, shared, t, g)
}
