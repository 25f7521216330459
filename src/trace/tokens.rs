//! What a trace says about tokens beside its steps: the chat it was rendered from, the tokens
//! non-square maps' keys stand for, the predictions and the tracked tokens of the lens.

use super::label;

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
    /// What each spells as text, as [`Trace::texts`](super::Trace::texts).
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
    /// The token's label, as [`Trace::label`](super::Trace::label); `#id` without a token string.
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
    /// What the token spells as text (` shoes`), as for [`Trace::texts`](super::Trace::texts).
    pub text: Option<String>,
    /// softmax(logits) at this id.
    pub prob: f32,
}

impl Prediction {
    /// The token's label, as [`Trace::label`](super::Trace::label); None for an id without a token string.
    pub fn label(&self) -> Option<String> {
        self.token.as_deref().map(|t| label::label(t, self.text.as_deref()).into_owned())
    }
}
