//! The Trace: the ordered list of named tensors that one run computed.
//!
//! The trace is the only thing that sits between the model and the renderers: model code
//! records into it and never prints; renderers read it and never do tensor math. Step ids
//! are API (see TRACE.md in the design notes and the README's step table): `layers.0.attn.weights`,
//! with the layer and the in-layer name also kept apart so nobody parses strings.

use std::collections::BTreeSet;

/// One dimension name from the fixed vocabulary of TRACE.md.
pub type Dim = &'static str;

/// What a step holds. Most steps are f32 tensors; the first two are the tokenizer's output,
/// and a mask is boolean.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    F32(Vec<f32>),
    Bool(Vec<bool>),
    Int(Vec<i64>),
    Str(Vec<String>),
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::Bool(v) => v.len(),
            Values::Int(v) => v.len(),
            Values::Str(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One traced tensor, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Full id, e.g. `layers.0.attn.weights`.
    pub id: String,
    /// The layer index for `layers.{i}.…` steps.
    pub layer: Option<usize>,
    /// The id without its `layers.{i}.` scope, e.g. `attn.weights`.
    pub name: String,
    pub dims: Vec<Dim>,
    pub shape: Vec<usize>,
    /// For per-head steps narrowed by `--head`: which heads the first dimension holds.
    pub heads: Option<Vec<usize>>,
    pub values: Values,
}

impl Step {
    /// Whether the first dimension is the head dimension.
    pub fn is_per_head(&self) -> bool {
        self.dims.first() == Some(&"head")
    }

    /// The f32 values, if this is a tensor step.
    pub fn f32s(&self) -> Option<&[f32]> {
        match &self.values {
            Values::F32(v) => Some(v),
            _ => None,
        }
    }
}

/// Which steps a run keeps. Steps that nobody asked for are never copied out of the model.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Canonical ids or names to keep; `None` keeps everything.
    pub steps: Option<BTreeSet<String>>,
    /// Keep only this layer's `layers.{i}.…` steps.
    pub layer: Option<usize>,
    /// Narrow per-head steps to this head.
    pub head: Option<usize>,
}

impl Selection {
    pub fn wants(&self, id: &str, layer: Option<usize>, name: &str) -> bool {
        if let (Some(want), Some(l)) = (self.layer, layer) {
            if want != l {
                return false;
            }
        }
        match &self.steps {
            None => true,
            Some(set) => set.contains(id) || set.contains(name),
        }
    }
}

/// A consumer of steps as they are recorded: `--format jsonl` writes each one out while the
/// model goes on computing. An error stops the stream (e.g. `| head -3` closed the pipe).
/// The step is handed over by value: the sink usually sends it to another thread.
pub type SinkFn = Box<dyn FnMut(Step) -> std::io::Result<()> + Send>;

/// The trace's optional sink; see [`Trace::stream`]. A cloned trace does not stream.
#[derive(Default)]
pub struct Sink {
    f: Option<SinkFn>,
    /// Whether steps are also kept in `steps` (they are not, unless something else needs them).
    keep: bool,
    failed: Option<std::io::Error>,
}

impl Clone for Sink {
    fn clone(&self) -> Self {
        Sink::default()
    }
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sink {{ streaming: {}, keep: {} }}", self.f.is_some(), self.keep)
    }
}

/// The ordered steps of one run plus the labels renderers need.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// The sentence as given, if any.
    pub sentence: Option<String>,
    /// Token strings, one per position: row and column labels.
    pub tokens: Vec<String>,
    /// Vocabulary ids, absent for a raw input matrix.
    pub token_ids: Option<Vec<u32>>,
    /// BERT's token types (segment ids) for real models.
    pub token_type_ids: Option<Vec<u32>>,
    /// Every setting that shaped the numbers, as the JSON document's `config`.
    pub config: serde_json::Value,
    pub steps: Vec<Step>,
    pub selection: Selection,
    /// Where steps go as they are recorded, if anywhere (`--format jsonl`).
    pub sink: Sink,
    /// `--check`'s result, for the JSON document's `check` object.
    pub check: Option<serde_json::Value>,
}

/// Splits `layers.3.attn.q` into (Some(3), "attn.q"); other ids have no layer.
pub fn split_id(id: &str) -> (Option<usize>, &str) {
    if let Some(rest) = id.strip_prefix("layers.") {
        if let Some((num, name)) = rest.split_once('.') {
            if let Ok(l) = num.parse() {
                return (Some(l), name);
            }
        }
    }
    (None, id)
}

impl Trace {
    pub fn new(tokens: Vec<String>, selection: Selection) -> Self {
        Trace { tokens, selection, ..Default::default() }
    }

    /// Hands every step to `f` as it is recorded; with `keep` false the trace does not hold
    /// the steps itself, so memory holds one step at a time.
    pub fn stream(&mut self, f: SinkFn, keep: bool) {
        self.sink = Sink { f: Some(f), keep, failed: None };
    }

    /// Ends streaming: drops the sink (closing whatever it writes to) and returns the error
    /// that stopped it, if any.
    pub fn end_stream(&mut self) -> Option<std::io::Error> {
        std::mem::take(&mut self.sink).failed
    }

    /// Whether a step with this id would be kept; lets callers skip copying tensors out.
    pub fn wants(&self, id: &str) -> bool {
        // A stream whose reader left needs no more steps.
        if self.sink.failed.is_some() && !self.sink.keep {
            return false;
        }
        let (layer, name) = split_id(id);
        self.selection.wants(id, layer, name)
    }

    /// Records a step if the selection keeps it. `values` is row-major for `shape`.
    pub fn record(&mut self, id: &str, dims: &[Dim], shape: &[usize], values: Values) {
        if !self.wants(id) {
            return;
        }
        debug_assert_eq!(dims.len(), shape.len(), "{id}: dims and shape disagree");
        debug_assert_eq!(shape.iter().product::<usize>(), values.len(), "{id}: shape and values disagree");
        let (layer, name) = split_id(id);
        let mut step = Step {
            id: id.to_string(),
            layer,
            name: name.to_string(),
            dims: dims.to_vec(),
            shape: shape.to_vec(),
            heads: None,
            values,
        };
        if let Some(h) = self.selection.head {
            if step.is_per_head() {
                narrow_head(&mut step, h);
            }
        }
        if let Some(f) = self.sink.f.as_mut() {
            if self.sink.keep {
                self.steps.push(step.clone());
            }
            if self.sink.failed.is_none() {
                self.sink.failed = f(step).err();
            }
            return;
        }
        self.steps.push(step);
    }

    pub fn get(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }
}

/// Keeps only head `h` of a head-first step (the caller has checked `h` is in range).
fn narrow_head(step: &mut Step, h: usize) {
    let per_head: usize = step.shape[1..].iter().product();
    let range = h * per_head..(h + 1) * per_head;
    step.values = match &step.values {
        Values::F32(v) => Values::F32(v[range].to_vec()),
        Values::Bool(v) => Values::Bool(v[range].to_vec()),
        Values::Int(v) => Values::Int(v[range].to_vec()),
        Values::Str(v) => Values::Str(v[range].to_vec()),
    };
    step.shape[0] = 1;
    step.heads = Some(vec![h]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_ids() {
        assert_eq!(split_id("layers.12.attn.q"), (Some(12), "attn.q"));
        assert_eq!(split_id("embed.sum"), (None, "embed.sum"));
        assert_eq!(split_id("layers.x.attn"), (None, "layers.x.attn"));
    }

    #[test]
    fn head_selection_narrows_per_head_steps_only() {
        let sel = Selection { head: Some(1), ..Default::default() };
        let mut t = Trace::new(vec!["a".into(), "b".into()], sel);
        t.record("layers.0.attn.q", &["head", "pos", "d_k"], &[2, 2, 1], Values::F32(vec![1., 2., 3., 4.]));
        t.record("embed.sum", &["pos", "d_model"], &[2, 1], Values::F32(vec![5., 6.]));
        assert_eq!(t.steps[0].shape, vec![1, 2, 1]);
        assert_eq!(t.steps[0].values, Values::F32(vec![3., 4.]));
        assert_eq!(t.steps[0].heads, Some(vec![1]));
        assert_eq!(t.steps[1].shape, vec![2, 1]);
    }

    #[test]
    fn a_sink_sees_every_step_and_keeps_none() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let mut t = Trace::new(vec!["a".into()], Selection::default());
        t.stream(
            Box::new(move |s: Step| {
                log.lock().unwrap().push(s.id);
                Ok(())
            }),
            false,
        );
        t.record("embed.sum", &["pos", "d_model"], &[1, 1], Values::F32(vec![1.0]));
        t.record("output", &["pos", "d_model"], &[1, 1], Values::F32(vec![2.0]));
        assert_eq!(*seen.lock().unwrap(), ["embed.sum", "output"]);
        assert!(t.steps.is_empty());
        assert!(t.end_stream().is_none());
    }

    #[test]
    fn step_and_layer_selection() {
        let sel =
            Selection { steps: Some(["attn.weights".to_string()].into_iter().collect()), layer: Some(1), head: None };
        assert!(sel.wants("layers.1.attn.weights", Some(1), "attn.weights"));
        assert!(!sel.wants("layers.0.attn.weights", Some(0), "attn.weights"));
        assert!(!sel.wants("layers.1.attn.q", Some(1), "attn.q"));
    }
}
