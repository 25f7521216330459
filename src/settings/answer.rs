//! A one-token answer (`--attribute`'s, `--metric`'s) checked against what the model's
//! tokenizer made of it, and tokens named in messages as the tables label them.

use crate::error::{quote, usage};
use anyhow::Result;

/// A text as the model's tokenizer split it: its ids and tokens, or the tokenizer's error.
pub type Tokenized = std::result::Result<(Vec<u32>, Vec<String>), String>;

/// One answer of `flag` (`--attribute`, `--metric`): a single token's id, or an error that
/// lists the tokens it is, spelled as the tables spell them.
pub fn one_token(flag: &str, t: &str, split: &Tokenized, example: &str) -> Result<u32> {
    let (ids, tokens) = split.as_ref().map_err(|e| usage(flag, e, "pass answers the tokenizer reads"))?;
    match ids[..] {
        [id] => Ok(id),
        _ => {
            let why = format!("{} is {} tokens ({}), not one", quote(t), ids.len(), spelled(tokens).join(" "));
            Err(usage(flag, why, example))
        }
    }
}

/// Tokens in a message, as the tables label them (`·capital`, not the vocabulary's
/// `Ġcapital`), so that a message names a token as the screen shows it.
pub fn spelled(tokens: &[String]) -> Vec<String> {
    tokens.iter().map(|t| crate::trace::label::label(t, None).into_owned()).collect()
}
