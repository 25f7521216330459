//! Naming token ids the model chose (predictions, the logit lens, a generation's tokens): the
//! tokenizer's string for the id and the text it spells, or, for the toy model's own
//! vocabulary (the sentence's words, no `--vocab` file), the word that has the id.

use super::loaded::Loaded;
use crate::params::Input;
use crate::trace::Prediction;

/// Names token ids: the tokenizer's string and the text it spells, or, for the toy model's
/// own vocabulary, the sentence's word that has the id.
pub struct Namer<'a> {
    loaded: &'a Loaded,
    toy: std::collections::BTreeMap<u32, String>,
    decode: Option<super::token_text::TokenText>,
}

impl<'a> Namer<'a> {
    pub fn new(loaded: &'a Loaded, own_vocab: bool) -> Self {
        let toy = match (&loaded.tokenizer, &loaded.input) {
            (None, Input::Ids { ids, .. }) if own_vocab => {
                ids.iter().copied().zip(loaded.tokens.iter().cloned()).collect()
            }
            _ => Default::default(),
        };
        let decode = loaded.tokenizer.as_ref().and_then(super::token_text::TokenText::of);
        Namer { loaded, toy, decode }
    }

    /// The id's token string and what it spells.
    pub fn name(&self, id: u32) -> (Option<String>, Option<String>) {
        let token = match &self.loaded.tokenizer {
            Some(tok) => tok.id_to_token(id),
            None => self.toy.get(&id).cloned(),
        };
        let text = self.decode.as_ref().zip(token.as_deref()).map(|(d, t)| d.text(t));
        (token, text)
    }

    pub fn prediction(&self, id: u32, prob: f32) -> Prediction {
        let (token, text) = self.name(id);
        Prediction { id, token, text, prob }
    }

    /// The ids decoded together by the tokenizer (special tokens kept); the toy model's words
    /// joined by spaces.
    pub fn decode(&self, ids: &[u32]) -> String {
        if let Some(tok) = &self.loaded.tokenizer {
            if let Ok(text) = tok.decode(ids, false) {
                return text;
            }
        }
        let words: Vec<String> = ids.iter().map(|&id| self.name(id).0.unwrap_or_else(|| format!("#{id}"))).collect();
        words.join(" ")
    }
}
