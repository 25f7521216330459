//! `--show-positions`: the printed views cut to some positions (the last N, a range, a list).
//! The model computed every position and the files (`--save-trace`, `--html`, `--svg`) were
//! written from the whole trace before this runs: only what goes to stdout is cut. Each
//! position-indexed step keeps the rows of the shown positions (its `pos` or `query_pos`
//! dimension; keys stay whole, so a row still shows every token it attends to), and so do the
//! predictions and the lens; [`Trace::shown_positions`] says which positions the rows are.

use super::maps::{Axis, Map, Maps};
use super::Views;
use crate::error::usage;
use crate::settings::views::Positions;
use crate::trace::{Step, Trace, Values};
use anyhow::Result;

/// The positions `spec` names among `n`, in increasing order.
pub fn resolve(spec: &Positions, n: usize) -> Result<Vec<usize>> {
    match spec {
        Positions::Last(k) => Ok((n.saturating_sub(*k)..n).collect()),
        Positions::List(list) => match list.iter().find(|&&p| p >= n) {
            Some(p) => Err(usage(
                "--show-positions",
                format!("position {p} is past the last token ({n} tokens)"),
                format!("name positions from 0 to {}, or last:N", n.saturating_sub(1)),
            )),
            None => Ok(list.clone()),
        },
    }
}

/// What is printed: the trace and its views, cut or not.
#[derive(Default)]
pub struct Cut {
    trace: Option<Trace>,
    views: Option<Views>,
}

impl Cut {
    /// The cut trace, else `whole`.
    pub fn trace_or<'a>(&'a self, whole: &'a Trace) -> &'a Trace {
        self.trace.as_ref().unwrap_or(whole)
    }

    /// The cut views, else `whole`.
    pub fn views_or<'a>(&'a self, whole: &'a Views) -> &'a Views {
        self.views.as_ref().unwrap_or(whole)
    }
}

/// `trace` and `views` cut to the positions `spec` names (nothing when it names every
/// position): what is printed (`run` writes the files from the whole trace before).
pub fn cut(trace: &Trace, views: &Views, spec: Option<&Positions>) -> Result<Cut> {
    let Some(spec) = spec else { return Ok(Cut::default()) };
    let keep = resolve(spec, trace.tokens.len())?;
    if keep.len() == trace.tokens.len() {
        return Ok(Cut::default());
    }
    let views =
        views.maps.as_ref().and_then(|m| cut_maps(m, &keep)).map(|maps| Views { maps: Some(maps), ..views.clone() });
    Ok(Cut { trace: Some(cut_trace(trace, keep)), views })
}

/// The heatmap's maps with only the rows `keep` (and every key): not a map of words
/// (`--merge-pieces`), whose rows are not positions.
fn cut_maps(maps: &Maps, keep: &[usize]) -> Option<Maps> {
    let n = maps.rows();
    if maps.pieces.is_some() || keep.iter().any(|&p| p >= n) {
        return None;
    }
    // The columns keep every token: a square map's keys become an axis of their own.
    let keys = maps.keys.clone().unwrap_or_else(|| Axis {
        labels: maps.labels.clone(),
        spelled: maps.spelled.clone(),
        pieces: None,
        pad: maps.pad.clone(),
    });
    let cols = maps.cols();
    let rows = |m: &Map| keep.iter().flat_map(|&q| m.values[q * cols..(q + 1) * cols].iter().copied()).collect();
    Some(Maps {
        labels: pick(&maps.labels, keep),
        spelled: pick(&maps.spelled, keep),
        pad: pick(&maps.pad, keep),
        maps: maps.maps.iter().map(|m| Map { values: rows(m), ..m.clone() }).collect(),
        keys: Some(keys),
        positions: Some(keep.to_vec()),
        ..maps.clone()
    })
}

/// `trace` with its position-indexed rows cut to `keep`.
fn cut_trace(trace: &Trace, keep: Vec<usize>) -> Trace {
    let n = trace.tokens.len();
    let mut shown = trace.without_steps();
    shown.steps = trace.steps.iter().map(|s| cut_step(s, &keep, n)).collect();
    shown.generation = trace.generation.clone();
    shown.attribution = trace.attribution.clone();
    shown.predictions = trace.predictions.as_ref().map(|rows| pick(rows, &keep));
    shown.lens = trace.lens.as_ref().map(|layers| layers.iter().map(|rows| pick(rows, &keep)).collect());
    for t in shown.lens_track.iter_mut().flatten() {
        t.layers = t.layers.iter().map(|rows| pick(rows, &keep)).collect();
    }
    shown.shown_positions = Some(keep);
    shown
}

/// The positions the rows of `step` stand for when `--show-positions` cut it (its `pos` or
/// `query_pos` dimension holds the trace's shown positions); None for a step not cut.
pub fn rows_of<'a>(trace: &'a Trace, step: &Step) -> Option<&'a [usize]> {
    let shown = trace.shown_positions.as_deref()?;
    let axis = step.dims.iter().position(|d| *d == "pos" || *d == "query_pos")?;
    (step.shape.get(axis) == Some(&shown.len())).then_some(shown)
}

/// The rows `keep` of a per-position list.
fn pick<T: Clone>(rows: &[T], keep: &[usize]) -> Vec<T> {
    keep.iter().filter_map(|&p| rows.get(p).cloned()).collect()
}

/// `step` with only the rows `keep` of its position dimension (`pos`, or `query_pos` of a
/// map), when it has one that is `n` long; other steps as they are.
fn cut_step(step: &Step, keep: &[usize], n: usize) -> Step {
    let axis = step.dims.iter().position(|d| *d == "pos" || *d == "query_pos");
    let Some(axis) = axis.filter(|&a| step.shape.get(a) == Some(&n)) else { return step.clone() };
    let outer: usize = step.shape[..axis].iter().product();
    let inner: usize = step.shape[axis + 1..].iter().product();
    let order: Vec<usize> = (0..outer)
        .flat_map(|o| keep.iter().flat_map(move |&p| (0..inner).map(move |i| (o * n + p) * inner + i)))
        .collect();
    fn take<T: Clone>(v: &[T], order: &[usize]) -> Vec<T> {
        order.iter().map(|&k| v[k].clone()).collect()
    }
    let values = match &step.values {
        Values::F32(v) => Values::F32(take(v, &order)),
        Values::Bool(v) => Values::Bool(take(v, &order)),
        Values::Int(v) => Values::Int(take(v, &order)),
        Values::Str(v) => Values::Str(take(v, &order)),
    };
    let mut shape = step.shape.clone();
    shape[axis] = keep.len();
    Step { shape, values, ..step.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_keeps_its_query_rows_and_every_key() {
        // [head 1, query 3, key 3] = rows [0 1 2], [3 4 5], [6 7 8]: the last two queries.
        let step = Step {
            id: "layers.0.attn.weights".into(),
            layer: Some(0),
            name: "attn.weights".into(),
            dims: vec!["head", "query_pos", "key_pos"],
            shape: vec![1, 3, 3],
            heads: None,
            values: Values::F32((0..9).map(|x| x as f32).collect()),
        };
        let cut = cut_step(&step, &resolve(&Positions::Last(2), 3).unwrap(), 3);
        assert_eq!(cut.shape, [1, 2, 3]);
        assert_eq!(cut.values, Values::F32(vec![3., 4., 5., 6., 7., 8.]));
        assert!(resolve(&Positions::List(vec![3]), 3).is_err());
        assert_eq!(resolve(&Positions::Last(9), 3).unwrap(), [0, 1, 2]);
    }
}
