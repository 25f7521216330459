//! Running both sides in lockstep (`model::lockstep`) and comparing each part's steps as
//! soon as both sides have made them: each recorder hands its steps to a channel, which is
//! drained after every part (the embeddings, each layer, the head), the steps paired by id,
//! measured, and dropped. Memory holds one part's steps of each side, not two traces.

use super::found::{Comparison, LayerDiff, Outcome, Position, StepDiff};
use super::measure::{self, HeadJs};
use super::sides::Side;
use crate::analysis::interventions::Interventions;
use crate::model::lockstep::{Part, Side as Pass};
use crate::run::{hooks, lockstep};
use crate::trace::{Recorder, Selection, Step, Trace, Values};
use anyhow::{Context, Result};
use candle_core::Tensor;
use std::collections::BTreeMap;
use std::sync::mpsc::{channel, Receiver};

/// What the comparison keeps as the parts go by.
#[derive(Default)]
struct Collector {
    steps: Vec<StepDiff>,
    layers: Vec<LayerDiff>,
    heads: Vec<HeadJs>,
    only: [Vec<String>; 2],
    kl: Option<Vec<f64>>,
}

/// Every step of the catalogue, the logits included (their KL is the predictions' measure).
fn everything() -> Selection {
    Selection {
        steps: Some(crate::trace::steps::CATALOGUE.iter().map(|d| d.name.to_string()).collect()),
        ..Default::default()
    }
}

/// A recorder for `side` whose steps go to the returned channel as they are made.
fn recorder(loaded: &crate::sources::Loaded, settings: &crate::settings::Settings) -> (Recorder, Receiver<Step>) {
    let mut rec = crate::run::recorder(loaded, everything(), settings);
    let (tx, rx) = channel();
    rec.stream(Box::new(move |s: Step| tx.send(s).map_err(|_| std::io::Error::other("the comparison stopped"))), false);
    (rec, rx)
}

/// Computes both sides and compares them; `from` is the side whose ids both ran on.
pub fn compare(sides: [Side; 2], threshold: f64, from: Option<&'static str>) -> Result<Comparison> {
    let [a, b] = sides;
    // Kept per file where a scope keeps them (`attn-trace serve --compare-with`: the headers
    // and token tables are read once for all requests); layers are read as the pass needs them.
    let pa = a.source.params_once(&a.loaded, false).context("model A's parameters")?;
    let pb = b.source.params_once(&b.loaded, false).context("model B's parameters")?;
    let ((mut rec_a, rx_a), (mut rec_b, rx_b)) = (recorder(&a.loaded, &a.settings), recorder(&b.loaded, &b.settings));
    let mut c = Collector::default();
    let runs = [
        Pass { cfg: &a.loaded.cfg, params: &pa, input: &a.loaded.input },
        Pass { cfg: &b.loaded.cfg, params: &pb, input: &b.loaded.input },
    ];
    // Each side its own knobs and interventions.
    let (ia, ib) = (Interventions::of(&a.loaded.cfg), Interventions::of(&b.loaded.cfg));
    let hooks = [hooks(&a.loaded, &ia), hooks(&b.loaded, &ib)];
    lockstep(runs, [(&mut rec_a, &hooks[0]), (&mut rec_b, &hooks[1])], |part, outs| {
        let (sa, sb): (Vec<Step>, Vec<Step>) = (rx_a.try_iter().collect(), rx_b.try_iter().collect());
        c.part(part, sa, sb, outs)
    })
    .context("computing the two traces")?;
    let (mut ta, _) = rec_a.finish();
    let (mut tb, _) = rec_b.finish();
    crate::sources::naming::name_predictions(&mut ta, &a.loaded, crate::sources::naming::own_vocab(&a.settings));
    crate::sources::naming::name_predictions(&mut tb, &b.loaded, crate::sources::naming::own_vocab(&b.settings));
    let order = |ids: &mut Vec<String>| ids.sort_by_key(|id| (crate::diff::names::rank(id), id.clone()));
    c.steps.sort_by_key(|s| (crate::diff::names::rank(&s.id), s.id.clone()));
    c.only.iter_mut().for_each(order);
    let predictions = positions(&ta, &tb, c.kl.take());
    let notes = [("A", &a.loaded.notes), ("B", &b.loaded.notes)]
        .iter()
        .flat_map(|(tag, n)| n.iter().map(move |n| format!("{tag}: {n}")))
        .collect();
    Ok(Comparison {
        sides: [a.info, b.info],
        sentence: a.loaded.sentence.clone(),
        labels: ta.labels(),
        ids: ta.token_ids.clone(),
        ids_from: from,
        threshold,
        steps: c.steps,
        layers: c.layers,
        heads: c.heads,
        predictions,
        only: c.only,
        notes,
    })
}

/// Both sides' predictions position by position, with the KL of their distributions.
fn positions(a: &Trace, b: &Trace, kl: Option<Vec<f64>>) -> Option<Vec<Position>> {
    let (pa, pb) = (a.predictions.as_ref()?, b.predictions.as_ref()?);
    let kl = kl.unwrap_or_default();
    Some(
        pa.iter()
            .zip(pb)
            .enumerate()
            .map(|(i, (x, y))| Position { a: x.clone(), b: y.clone(), kl: kl.get(i).copied() })
            .collect(),
    )
}

impl Collector {
    /// One part: the residual stream it handed on, then its steps, paired by id.
    fn part(&mut self, part: Part, a: Vec<Step>, b: Vec<Step>, [xa, xb]: [&Tensor; 2]) -> Result<()> {
        let layer = match part {
            Part::Embed => Some(None),
            Part::Layer(i) => Some(Some(i)),
            Part::Unembed => None,
        };
        if let Some(layer) = layer {
            let (va, vb) = (xa.flatten_all()?.to_vec1::<f32>()?, xb.flatten_all()?.to_vec1::<f32>()?);
            self.layers.push(LayerDiff { layer, error: measure::error("residual", &va, &vb) });
        }
        let mut bs: BTreeMap<String, Step> = b.into_iter().map(|s| (s.id.clone(), s)).collect();
        for sa in a {
            match bs.remove(&sa.id) {
                Some(sb) => self.pair(sa, sb),
                None => self.only[0].push(sa.id),
            }
        }
        self.only[1].extend(bs.into_keys());
        Ok(())
    }

    /// Measures one step both sides made. Token strings are not compared (the ids are, and a
    /// side given the other's ids may spell them differently).
    fn pair(&mut self, a: Step, b: Step) {
        let outcome = if a.shape != b.shape {
            Outcome::Shapes(b.shape.clone())
        } else {
            match (&a.values, &b.values) {
                (Values::F32(x), Values::F32(y)) => {
                    if a.name == "attn.weights" {
                        self.heads.extend(measure::heads_js(a.layer.unwrap_or(0), &a.shape, x, y));
                    }
                    if a.id == "logits" {
                        self.kl = Some(measure::kl_rows(x, y, a.shape.last().copied().unwrap_or(0)));
                    }
                    Outcome::Values(measure::error(&a.id, x, y))
                }
                (Values::Str(_), Values::Str(_)) => return,
                (x, y) => Outcome::Equal(x == y),
            }
        };
        self.steps.push(StepDiff { id: a.id, layer: a.layer, dims: a.dims, shape: a.shape, outcome });
    }
}
