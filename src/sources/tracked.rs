//! The tokenizer's side of the analyses' chosen tokens: `--lens-track`'s texts as the token
//! ids the lens follows, the tracked tokens' names, and `--metric`'s answers as the tables
//! spell tokens (`·Paris`) for the patching header.

use super::loaded::Loaded;
use super::namer::Namer;
use crate::error::{quote, usage};
use crate::settings::Settings;
use crate::trace::Trace;
use anyhow::Result;

/// `--lens-track TEXT`: each text as the one token of the model's tokenizer it must be
/// (without special tokens, as `--metric`'s answers); another is refused naming its pieces.
/// `prepare` refuses before any parameter exists; the recorder asks again for the ids.
pub fn lens_track(settings: &Settings, loaded: &Loaded) -> Result<Vec<u32>> {
    let texts = &settings.analysis.lens_track;
    let Some(tok) = loaded.tokenizer.as_ref().filter(|_| !texts.is_empty()) else {
        return match texts.first() {
            Some(t) => Err(usage(
                format!("--lens-track {}", quote(t)),
                "it names a token by its text, and this model has no tokenizer",
                "use --model with a tokenizer, or drop --lens-track",
            )),
            None => Ok(Vec::new()),
        };
    };
    texts
        .iter()
        .map(|text| {
            let e = tok.encode(text.as_str(), false).map_err(|e| anyhow::anyhow!("tokenizing --lens-track: {e}"))?;
            if let [id] = e.get_ids() {
                return Ok(*id);
            }
            let labels = self::labels(Some(tok), e.get_tokens());
            Err(usage(
                format!("--lens-track {}", quote(text)),
                format!("it is {} tokens of this model's tokenizer ({})", labels.len(), labels.join(" ")),
                "track one token, e.g. its first piece",
            ))
        })
        .collect()
}

/// Gives each tracked token its string and text.
pub fn name(trace: &mut Trace, name: &Namer) {
    for t in trace.lens_track.iter_mut().flatten() {
        (t.token, t.text) = name.name(t.id);
    }
}

/// Tokens by their labels (`Trace::label`: the decoded text with a space as `·`), as the
/// tables show them: a `--patch` sentence's.
pub fn labels(tokenizer: Option<&tokenizers::Tokenizer>, tokens: &[String]) -> Vec<String> {
    let texts = super::token_text::texts(tokenizer, tokens);
    let text = |i: usize| texts.as_ref().map(|t| t[i].as_str());
    (0..tokens.len()).map(|i| crate::trace::label::label(&tokens[i], text(i)).into_owned()).collect()
}

/// Ids by their labels (`·Paris`; `#id` without a token string): `--metric`'s answers.
pub fn names(loaded: &Loaded, own_vocab: bool, [a, b]: [u32; 2]) -> (String, String) {
    let name = Namer::new(loaded, own_vocab);
    let label = |id| name.prediction(id, 0.0).label().unwrap_or_else(|| format!("#{id}"));
    (label(a), label(b))
}
