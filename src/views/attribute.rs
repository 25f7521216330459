//! `--attribute`'s views, from the trace's attribution (computed by the model): the terms
//! ranked by size, the heads' contributions split by source token ranked the same way, the
//! layer × head grid the heatmaps draw on a signed scale (0 in the middle, symmetric ends),
//! and the run's notes about the sum check.

use super::grid::{Grid, GridText};
use crate::trace::attribute::{Attribution, SUM_TOLERANCE};
use crate::trace::Trace;

/// What the attribution grid shows, in the renderers' words.
pub const TEXT: GridText<'static> = GridText {
    title: "direct logit attribution",
    scale: "0 in the middle; red writes toward the answer, blue against",
    value: "logit",
    group: "attribution",
};

/// One head's contribution through one source position.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub layer: usize,
    pub head: usize,
    pub key: usize,
    /// The source token's label (`Trace::label`).
    pub label: String,
    pub value: f64,
}

/// The attribution laid out for showing.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// Every term's (id, value), largest |value| first (ties in trace order).
    pub terms: Vec<(String, f64)>,
    /// Every (layer, head, source), largest |value| first.
    pub sources: Vec<Source>,
    /// The position's label, and the answer's and foil's.
    pub position: String,
    pub answer: String,
    pub foil: Option<String>,
}

/// The answer's label: its text (a space as `·`), else its token, else its id.
fn answer_label(a: &crate::trace::attribute::Answer) -> String {
    match &a.token {
        Some(t) => crate::trace::label::label(t, a.text.as_deref()).into_owned(),
        None => format!("#{}", a.id),
    }
}

/// The label of the attribution's position or source `i`: the trace's key token, then (a pass
/// over the prompt and the generated tokens, `--at gen:K`) the generated token's, else `#i`.
fn label(trace: &Trace, i: usize) -> String {
    let keys = trace.key_tokens().len();
    if i < keys {
        return trace.key_label(i);
    }
    let generated = trace.generation.as_ref().and_then(|g| g.tokens.get(i - keys));
    generated.and_then(|t| t.chosen.label()).unwrap_or_else(|| format!("#{i}"))
}

/// Ranks `trace`'s attribution, if it has one.
pub fn ranked(trace: &Trace) -> Option<Ranked> {
    let a = trace.attribution.as_ref()?;
    let by_size = |x: f64, y: f64| y.abs().total_cmp(&x.abs());
    let mut terms: Vec<(String, f64)> = a.terms.iter().map(|t| (t.id(), t.value)).collect();
    terms.sort_by(|x, y| by_size(x.1, y.1));
    let (_, heads, keys) = a.shape;
    let mut sources: Vec<Source> = a
        .sources
        .iter()
        .enumerate()
        .map(|(i, &value)| {
            let (layer, head, key) = (i / (heads * keys), i / keys % heads, i % keys);
            Source { layer, head, key, label: label(trace, key), value }
        })
        .collect();
    sources.sort_by(|x, y| by_size(x.value, y.value));
    Some(Ranked {
        terms,
        sources,
        position: format!("{} {}", a.position, label(trace, a.position)),
        answer: answer_label(&a.answer),
        foil: a.foil.as_ref().map(answer_label),
    })
}

/// The heads' terms as a grid, layers down and heads across, on a scale symmetric about 0.
pub fn grid(a: &Attribution) -> Grid {
    let (layers, heads, _) = a.shape;
    // `+ 0.0` turns −0 into 0, so it is not written "-0.00".
    let values: Vec<f32> = a.heads().iter().map(|&v| v as f32 + 0.0).collect();
    let m = values.iter().copied().filter(|v| v.is_finite()).fold(0f32, |m, v| m.max(v.abs()));
    let m = if m > 0.0 { m } else { 1.0 };
    Grid {
        down: "layers",
        across: "heads",
        rows: (0..layers).map(|l| format!("layer {l}")).collect(),
        cols: (0..heads).map(|h| format!("head {h}")).collect(),
        values,
        lo: -m,
        hi: m,
        signed: true,
    }
}

/// What the metric is, in words: `logit[" Paris"] − logit[" London"] at 5 "is"`.
pub fn metric(r: &Ranked) -> String {
    let foil = r.foil.as_ref().map_or(String::new(), |f| format!(" − logit[{f}]"));
    format!("logit[{}]{foil} at position {}", r.answer, r.position)
}

/// The run's notes: a soft-capped model is attributed before its cap, and a sum check that
/// fails says by how much.
pub fn notes(a: &Attribution) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(capped) = a.capped {
        out.push(format!(
            "--attribute: the model soft-caps its logits (cap · tanh(x / cap)), which is not linear, so the terms \
             split the logit difference before the cap ({}); the model returns {} after it",
            a.logit, capped
        ));
    }
    let error = a.relative_error();
    if error.is_nan() || error > SUM_TOLERANCE {
        out.push(format!(
            "--attribute: the terms add up to {}, the model's logit difference is {}: a relative error of {error:.1e}, \
             above {SUM_TOLERANCE:e}; the terms are computed in f64 from the model's f32 activations, and a residual \
             stream much larger than the logit loses digits to f32 rounding",
            a.total, a.logit
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::attribute::{Answer, Term, HEAD};

    #[test]
    fn terms_and_sources_rank_by_size_and_the_grid_is_symmetric() {
        let t = |layer, name, index, value| Term { layer, name, index, value };
        let a = Attribution {
            position: 1,
            answer: Answer { id: 7, token: Some("Ġbig".into()), text: Some(" big".into()) },
            foil: None,
            terms: vec![
                t(None, "embed.token", None, 0.5),
                t(Some(0), HEAD, Some(1), -2.0),
                t(Some(0), "ffn", None, 1.0),
            ],
            sources: vec![0.0, 0.0, -0.5, -1.5],
            shape: (1, 2, 2),
            total: -0.5,
            logit: -0.5,
            capped: None,
        };
        let trace = Trace { tokens: vec!["a".into(), "b".into()], attribution: Some(a.clone()), ..Default::default() };
        let r = ranked(&trace).unwrap();
        assert_eq!(r.terms[0], ("layers.0.attn.head.1".to_string(), -2.0));
        assert_eq!((r.sources[0].head, r.sources[0].key, r.sources[0].label.as_str()), (1, 1, "b"));
        assert_eq!(metric(&r), "logit[·big] at position 1 b");
        let g = grid(&a);
        assert_eq!((g.lo, g.hi, g.values.clone()), (-2.0, 2.0, vec![0.0, -2.0]));
        assert!(notes(&a).is_empty());
    }
}
