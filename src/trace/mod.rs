//! The Trace: the ordered list of named tensors that one run computed.
//!
//! The trace is the only thing that sits between the model and the renderers: model code
//! records into it (through a [`Recorder`]) and never prints; renderers read it and never do
//! tensor math. The step catalogue ([`steps`]) and the JSON Schema ([`schema`]) live here
//! too, since they describe this data. Step ids
//! are API (see docs/TRACE.md and the step table of docs/OUTPUT.md): `layers.0.attn.weights`,
//! with the layer and the in-layer name also kept apart so nobody parses strings.

pub mod aliases;
pub mod attribute;
pub mod generate;
mod ids;
pub mod label;
pub mod record;
pub mod rows;
pub mod schema;
mod selection;
pub mod steps;

use crate::config::ModelConfig;
pub use record::{Recorder, SinkFn};
pub use selection::Selection;

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

/// The ordered steps of one run plus the labels renderers need.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// The sentence as given, if any.
    pub sentence: Option<String>,
    /// Token strings, one per position, exactly as the vocabulary spells them.
    pub tokens: Vec<String>,
    /// What each token spells as text, for a real model's byte-level or SentencePiece
    /// vocabulary (`sources/token_text.rs`); the row and column labels show it.
    pub texts: Option<Vec<String>>,
    /// Vocabulary ids, absent for a raw input matrix.
    pub token_ids: Option<Vec<u32>>,
    /// BERT's token types (segment ids) for real models.
    pub token_type_ids: Option<Vec<u32>>,
    /// `--chat`: the turns the tokens were rendered from by the model's chat template.
    pub chat: Option<Chat>,
    /// Every setting that shaped the numbers: the JSON document's `config`.
    pub config: ModelConfig,
    pub steps: Vec<Step>,
    /// A language model's next-token predictions: per position, the most probable tokens
    /// (`--top-k`), most probable first.
    pub predictions: Option<Vec<Vec<Prediction>>>,
    /// The logit lens: per layer, per position, the top tokens of that layer's residual
    /// stream read through the final norm and the head.
    pub lens: Option<Vec<Vec<Vec<Prediction>>>>,
    /// `--lens-track`: the chosen tokens, each with its rank and probability per layer and
    /// position in the logit lens.
    pub lens_track: Option<Vec<Tracked>>,
    /// `--show-positions`: the positions the rows of position-indexed steps, predictions and
    /// the lens hold, in order, when the printed views were cut to them (`views::positions`);
    /// None: every position.
    pub shown_positions: Option<Vec<usize>>,
    /// The tokens the keys of non-square attention maps stand for, when they are not
    /// `tokens`; None when every map's queries and keys are `tokens` (every model read today).
    pub keys: Option<KeyTokens>,
    /// `--generate`: the tokens generated after the prompt and each decode step's steps.
    pub generation: Option<generate::Generation>,
    /// `--attribute`: the logit (difference) split into the terms that wrote it.
    pub attribution: Option<attribute::Attribution>,
}

/// `--chat`: a conversation of one user turn (and a system turn) and the text the model's chat
/// template made of it, which is what was tokenized; the JSON document's `input.chat`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chat {
    pub system: Option<String>,
    pub user: String,
    pub rendered: String,
}

/// A second sequence of tokens whose positions are the keys of non-square attention maps: an
/// encoder–decoder's cross-attention has queries of the decoder's tokens (`Trace::tokens`)
/// and keys of the encoder's (docs/TRACE.md, "Stacks").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyTokens {
    /// One per key position, exactly as the vocabulary spells them.
    pub tokens: Vec<String>,
    /// What each spells as text, as [`Trace::texts`].
    pub texts: Option<Vec<String>>,
    /// Its `attention_mask` (0 for pads) when it was padded, as `config.padding`'s.
    pub attention_mask: Option<Vec<u8>>,
    /// Their vocabulary ids (an encoder–decoder's source tokens).
    pub ids: Option<Vec<u32>>,
}

/// A token the logit lens follows (`--lens-track`).
#[derive(Debug, Clone, PartialEq)]
pub struct Tracked {
    pub id: u32,
    /// Its string and text, as [`Prediction`]'s.
    pub token: Option<String>,
    pub text: Option<String>,
    /// Per layer, per position: its rank over the whole vocabulary (1: the most probable)
    /// and its probability.
    pub layers: Vec<Vec<(usize, f32)>>,
}

impl Tracked {
    /// The token's label, as [`Trace::label`]; `#id` without a token string.
    pub fn label(&self) -> String {
        match &self.token {
            Some(t) => label::label(t, self.text.as_deref()).into_owned(),
            None => format!("#{}", self.id),
        }
    }
}

/// One predicted next token.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub id: u32,
    /// The tokenizer's string for the id (exact, e.g. `Ġshoes`), if it has one.
    pub token: Option<String>,
    /// What the token spells as text (` shoes`), as for [`Trace::texts`].
    pub text: Option<String>,
    /// softmax(logits) at this id.
    pub prob: f32,
}

impl Prediction {
    /// The token's label, as [`Trace::label`]; None for an id without a token string.
    pub fn label(&self) -> Option<String> {
        self.token.as_deref().map(|t| label::label(t, self.text.as_deref()).into_owned())
    }
}

/// Splits `layers.3.attn.q` into (Some(3), "attn.q"), and a second stack's ids as well
/// (`decoder.layers.3.cross_attn.q` into (Some(3), "cross_attn.q"), `decoder.embed.out` into
/// (None, "embed.out")): the stack stays in the id ([`stack_of`]); other ids have no layer.
pub fn split_id(id: &str) -> (Option<usize>, &str) {
    match steps::parse_layer_id(id) {
        Some((_, l, name)) => (Some(l), name),
        None => (None, unstacked(id)),
    }
}

/// The stack a step id belongs to: `encoder.…`, `decoder.…`, else the one stack.
pub fn stack_of(id: &str) -> steps::Stack {
    [steps::Stack::Encoder, steps::Stack::Decoder]
        .into_iter()
        .find(|s| id.starts_with(s.prefix()))
        .unwrap_or(steps::Stack::Only)
}

/// `id` without its stack's prefix.
fn unstacked(id: &str) -> &str {
    id.strip_prefix(stack_of(id).prefix()).unwrap_or(id)
}

impl Trace {
    /// The trace's tokens, config and predictions without its steps, generation or
    /// attribution: a copy for views that bring steps of their own (`views::stacks`), without
    /// copying every recorded tensor first.
    pub fn without_steps(&self) -> Trace {
        Trace {
            sentence: self.sentence.clone(),
            tokens: self.tokens.clone(),
            texts: self.texts.clone(),
            token_ids: self.token_ids.clone(),
            token_type_ids: self.token_type_ids.clone(),
            chat: self.chat.clone(),
            config: self.config.clone(),
            steps: Vec::new(),
            predictions: self.predictions.clone(),
            lens: self.lens.clone(),
            lens_track: self.lens_track.clone(),
            shown_positions: self.shown_positions.clone(),
            keys: self.keys.clone(),
            generation: None,
            attribution: None,
        }
    }

    /// The config as the JSON document's `config` object: keys sorted, so the bytes do not
    /// depend on the struct's field order.
    pub fn config_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.config).unwrap_or(serde_json::Value::Null)
    }

    /// The label of position `i` ([`label::label`]: the decoded text, spaces as `·`).
    pub fn label(&self, i: usize) -> String {
        let text = self.texts.as_ref().and_then(|t| t.get(i)).map(String::as_str);
        label::label(&self.tokens[i], text).into_owned()
    }

    /// Every position's [`label`](Trace::label).
    pub fn labels(&self) -> Vec<String> {
        (0..self.tokens.len()).map(|i| self.label(i)).collect()
    }

    /// The key tokens of non-square maps ([`Trace::keys`]), else `tokens`.
    pub fn key_tokens(&self) -> &[String] {
        self.keys.as_ref().map_or(&self.tokens, |k| &k.tokens)
    }

    /// The label of key position `i`: of [`Trace::keys`]' token, else [`Trace::label`].
    pub fn key_label(&self, i: usize) -> String {
        match &self.keys {
            Some(k) => {
                let text = k.texts.as_ref().and_then(|t| t.get(i)).map(String::as_str);
                label::label(&k.tokens[i], text).into_owned()
            }
            None => self.label(i),
        }
    }

    /// Every key position's [`key_label`](Trace::key_label).
    pub fn key_labels(&self) -> Vec<String> {
        (0..self.key_tokens().len()).map(|i| self.key_label(i)).collect()
    }

    /// The position row `r` of a position-indexed array stands for ([`Trace::shown_positions`]).
    pub fn position(&self, r: usize) -> usize {
        self.shown_positions.as_ref().and_then(|p| p.get(r).copied()).unwrap_or(r)
    }

    pub fn get(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }
}

impl Trace {
    /// Splits a trace recorded for both the views and a file: returns the file's trace (the
    /// steps `file` keeps, whole) and keeps here what `view` keeps, narrowed to its heads, as
    /// if the view's selection alone had been recorded. A step both keep is copied; one only
    /// the file keeps is moved.
    pub fn split_for_file(&mut self, view: &Selection, file: &Selection) -> Trace {
        let mut saved = Vec::new();
        let mut kept = Vec::new();
        for step in std::mem::take(&mut self.steps) {
            let (layer, name) = (step.layer, step.name.as_str());
            let (for_view, for_file) = (view.wants(&step.id, layer, name), file.wants(&step.id, layer, name));
            let mut step = match (for_view, for_file) {
                (true, true) => {
                    saved.push(step.clone());
                    step
                }
                (false, true) => {
                    saved.push(step);
                    continue;
                }
                (true, false) => step,
                (false, false) => continue,
            };
            view.narrow_heads_of(&mut step);
            kept.push(step);
        }
        self.steps = kept;
        Trace { steps: saved, ..self.without_steps() }
    }
}

/// Keeps only heads `hs` of a head-first step, in that order (the caller has checked they
/// are in range).
pub(crate) fn narrow_heads(step: &mut Step, hs: &[usize]) {
    let per_head: usize = step.shape[1..].iter().product();
    fn pick<T: Clone>(v: &[T], hs: &[usize], n: usize) -> Vec<T> {
        hs.iter().flat_map(|&h| v[h * n..(h + 1) * n].iter().cloned()).collect()
    }
    step.values = match &step.values {
        Values::F32(v) => Values::F32(pick(v, hs, per_head)),
        Values::Bool(v) => Values::Bool(pick(v, hs, per_head)),
        Values::Int(v) => Values::Int(pick(v, hs, per_head)),
        Values::Str(v) => Values::Str(pick(v, hs, per_head)),
    };
    step.shape[0] = hs.len();
    step.heads = Some(hs.to_vec());
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
}
