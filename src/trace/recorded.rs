//! The [`Trace`] itself: the ordered steps of one run plus the labels renderers need.

use super::{attribute, generate, label};
use super::{Chat, KeyTokens, Prediction, Selection, Step, Tracked};
use crate::config::ModelConfig;

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
