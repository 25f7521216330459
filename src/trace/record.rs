//! Recording: the model hands each step to a [`Recorder`], which keeps it in the [`Trace`]
//! if the [`Selection`] wants it, narrows per-head steps to `--head`, and, for `--format
//! jsonl`, passes it on to a sink as it is computed. This is run state, not trace data: when
//! the forward pass ends, [`Recorder::finish`] hands over the plain [`Trace`].

use super::{narrow_heads, split_id, steps, Dim, Selection, Step, Trace, Values};
use crate::config::ModelConfig;
use anyhow::Result;
use candle_core::Tensor;

/// A consumer of steps as they are recorded: `--format jsonl` writes each one out while the
/// model goes on computing. An error stops the stream (e.g. `| head -3` closed the pipe).
/// The step is handed over by value: the sink usually sends it to another thread.
pub type SinkFn = Box<dyn FnMut(Step) -> std::io::Result<()> + Send>;

/// The recorder's optional sink; see [`Recorder::stream`].
#[derive(Default)]
struct Sink {
    f: Option<SinkFn>,
    /// Whether steps are also kept in the trace (they are not, unless something else needs them).
    keep: bool,
    failed: Option<std::io::Error>,
}

/// Collects the steps of one forward pass.
pub struct Recorder {
    trace: Trace,
    selection: Selection,
    sink: Sink,
    /// How many next-token predictions a language model reports per position.
    top_k: usize,
    /// The stack whose steps are being recorded: its prefix goes before every id
    /// (`encoder.`, `decoder.`; none in a one-stack model).
    stack: steps::Stack,
    /// Readers of attention weights tile by tile (`rows.rs`), for the selected layers.
    rows: Vec<super::rows::RowsFn>,
}

impl Recorder {
    /// A recorder for a run over `tokens` with `config`, keeping what `selection` wants.
    pub fn new(tokens: Vec<String>, config: ModelConfig, selection: Selection) -> Self {
        Recorder {
            trace: Trace { tokens, config, ..Default::default() },
            selection,
            sink: Sink::default(),
            top_k: 0,
            stack: steps::Stack::Only,
            rows: Vec::new(),
        }
    }

    /// Records the next steps as `stack`'s (an encoder–decoder runs one stack, then the other).
    pub fn set_stack(&mut self, stack: steps::Stack) {
        self.stack = stack;
    }

    /// `id` with the current stack's prefix.
    pub fn full_id<'a>(&self, id: &'a str) -> std::borrow::Cow<'a, str> {
        match self.stack {
            steps::Stack::Only => std::borrow::Cow::Borrowed(id),
            s => std::borrow::Cow::Owned(format!("{}{id}", s.prefix())),
        }
    }

    /// Asks a language model for its `k` most probable next tokens at each position.
    pub fn with_top_k(mut self, k: usize) -> Self {
        self.top_k = k;
        self
    }

    pub fn top_k(&self) -> usize {
        self.top_k
    }

    /// The model's predictions (ids and probabilities; token strings are added later).
    pub fn set_predictions(&mut self, top: Vec<Vec<(u32, f32)>>) {
        if self.top_k > 0 {
            let rows = top.into_iter().map(|r| {
                r.into_iter().map(|(id, prob)| super::Prediction { id, token: None, text: None, prob }).collect()
            });
            self.trace.predictions = Some(rows.collect());
        }
    }

    /// The trace being recorded (the model reads its tokens; a sink's header its input).
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Sets what the trace says about its input: the sentence, ids and token types.
    pub fn set_input(&mut self, sentence: Option<String>, ids: Option<Vec<u32>>, type_ids: Option<Vec<u32>>) {
        self.trace.sentence = sentence;
        self.trace.token_ids = ids;
        self.trace.token_type_ids = type_ids;
    }

    /// An encoder–decoder's turn to its decoder: the positions from here on are the decoder's
    /// `tokens` (as spelled, with their texts and ids), and the encoder's become the keys of
    /// the cross-attention maps ([`Trace::keys`]).
    pub fn to_decoder(&mut self, tokens: Vec<String>, texts: Option<Vec<String>>, ids: Vec<u32>) {
        let t = &mut self.trace;
        let source = super::KeyTokens {
            tokens: std::mem::replace(&mut t.tokens, tokens),
            texts: std::mem::replace(&mut t.texts, texts),
            attention_mask: None,
            ids: t.token_ids.replace(ids),
        };
        t.keys = Some(source);
    }

    /// Sets the conversation a chat template rendered into the input (`--chat`).
    pub fn set_chat(&mut self, chat: Option<super::Chat>) {
        self.trace.chat = chat;
    }

    /// Sets each token's decoded text (the labels' text; JSON's `input.texts`).
    pub fn set_texts(&mut self, texts: Option<Vec<String>>) {
        self.trace.texts = texts;
    }

    /// Hands every step to `f` as it is recorded; with `keep` false the trace does not hold
    /// the steps itself, so memory holds one step at a time.
    pub fn stream(&mut self, f: SinkFn, keep: bool) {
        self.sink = Sink { f: Some(f), keep, failed: None };
    }

    /// Hands layer weights to `f` a tile of queries at a time (`rows.rs`), for the layers the
    /// selection keeps; the weights themselves need not be recorded.
    pub fn read_rows(&mut self, f: super::rows::RowsFn) {
        self.rows.push(f);
    }

    /// Whether layer `l`'s weights have a reader ([`Recorder::read_rows`]).
    pub fn reads_rows(&self, l: usize) -> bool {
        !self.rows.is_empty()
            && matches!(self.stack, steps::Stack::Only)
            && self.selection.layer.as_ref().is_none_or(|ls| ls.contains(&l))
    }

    /// Gives a tile of layer weights to every reader.
    pub fn weight_rows(&mut self, tile: &super::rows::WeightRows) {
        if self.reads_rows(tile.layer) {
            self.rows.iter_mut().for_each(|f| f(tile));
        }
    }

    /// Ends recording: drops the sink (closing whatever it writes to) and returns the trace
    /// and the error that stopped the stream, if any.
    pub fn finish(self) -> (Trace, Option<std::io::Error>) {
        (self.trace, self.sink.failed)
    }

    /// Whether a step with this id would be kept; lets callers skip copying tensors out.
    pub fn wants(&self, id: &str) -> bool {
        let id = &*self.full_id(id);
        // A stream whose reader left needs no more steps.
        if self.sink.failed.is_some() && !self.sink.keep {
            return false;
        }
        let (layer, name) = split_id(id);
        // Steps as large as the vocabulary (`logits`) are recorded only when named.
        if self.selection.steps.is_none() && steps::def(name).is_some_and(|d| d.on_request) {
            return false;
        }
        self.selection.wants(id, layer, name)
    }

    /// Copies a tensor into the trace, if the selection keeps this step. Its dims come from
    /// the step catalogue ([`steps::dims`]), so the model and every reader agree on them.
    pub fn tensor(&mut self, id: &str, cfg: &ModelConfig, t: &Tensor) -> Result<()> {
        if self.wants(id) {
            let values = t.flatten_all()?.to_vec1::<f32>()?;
            let dims = steps::dims(split_id(id).1, cfg);
            self.record(id, &dims, t.dims(), Values::F32(values));
        }
        Ok(())
    }

    /// Records a step if the selection keeps it. `values` is row-major for `shape`.
    pub fn record(&mut self, id: &str, dims: &[Dim], shape: &[usize], values: Values) {
        self.keep(id, (dims, shape), values, false);
    }

    /// `--head`'s heads, when the selection narrows per-head steps to them.
    pub fn kept_heads(&self) -> Option<&[usize]> {
        self.selection.head.as_deref()
    }

    /// [`Recorder::record`] for a per-head step whose values hold only [`Recorder::kept_heads`]'
    /// (gathered tile by tile: `model/tiled.rs`).
    pub fn record_kept_heads(&mut self, id: &str, dims: &[Dim], shape: &[usize], values: Values) {
        self.keep(id, (dims, shape), values, true);
    }

    fn keep(&mut self, id: &str, (dims, shape): (&[Dim], &[usize]), values: Values, narrowed: bool) {
        if !self.wants(id) {
            return;
        }
        let id = &*self.full_id(id);
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
        if let Some(hs) = &self.selection.head {
            match (step.is_per_head(), narrowed) {
                (true, true) => step.heads = Some(hs.clone()),
                (true, false) => narrow_heads(&mut step, hs),
                (false, _) => {}
            }
        }
        if let Some(f) = self.sink.f.as_mut() {
            if self.sink.keep {
                self.trace.steps.push(step.clone());
            }
            if self.sink.failed.is_none() {
                self.sink.failed = f(step).err();
            }
            return;
        }
        self.trace.steps.push(step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorder(sel: Selection, tokens: &[&str]) -> Recorder {
        Recorder::new(tokens.iter().map(|t| t.to_string()).collect(), ModelConfig::toy(), sel)
    }

    #[test]
    fn head_selection_narrows_per_head_steps_only() {
        let sel = Selection { head: Some(vec![1]), ..Default::default() };
        let mut t = recorder(sel, &["a", "b"]);
        t.record("layers.0.attn.q", &["head", "pos", "d_k"], &[2, 2, 1], Values::F32(vec![1., 2., 3., 4.]));
        t.record("embed.sum", &["pos", "d_model"], &[2, 1], Values::F32(vec![5., 6.]));
        let (t, _) = t.finish();
        assert_eq!(t.steps[0].shape, vec![1, 2, 1]);
        assert_eq!(t.steps[0].values, Values::F32(vec![3., 4.]));
        assert_eq!(t.steps[0].heads, Some(vec![1]));
        assert_eq!(t.steps[1].shape, vec![2, 1]);
    }

    #[test]
    fn a_sink_sees_every_step_and_keeps_none() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let mut t = recorder(Selection::default(), &["a"]);
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
        let (t, failed) = t.finish();
        assert!(t.steps.is_empty());
        assert!(failed.is_none());
    }
}
