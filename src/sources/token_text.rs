//! Tokens as text: what each token of a real model's vocabulary spells, decoded from its
//! bytes, for the labels of every view (JSON keeps the exact token strings beside it).
//!
//! - Byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM; a GGUF `gpt2` tokenizer, a
//!   `tokenizer.json` with the ByteLevel decoder) writes each byte as one character of GPT-2's
//!   byte alphabet (`bytes_to_unicode`: `Ġ` for a space, `Ã©` for é's two bytes); the
//!   alphabet is mapped back to bytes.
//! - SentencePiece (Llama 2, Mistral; ByteFallback or Metaspace decoders) writes a space as
//!   `▁` and, with byte fallback, a byte the vocabulary lacks as the piece `<0xE5>`.
//!
//! A token's bytes that are valid UTF-8 are its text. Bytes that are only part of a
//! character (a character split across tokens, as 巴's three bytes often are) are shown as
//! [`partial`] writes them, one `<0xE5>` per byte: SentencePiece's own spelling of a byte
//! piece, so both vocabularies show the same bytes the same way and it reads as bytes to
//! anyone who has seen a vocabulary; it is ASCII (every terminal and font shows it) and holds
//! no space (labels show spaces as `·`); and the bytes are exact, so the pieces of a
//! character can be put back together by reading them.
//! Special and added tokens (`<s>`, `<|im_start|>`) are their own text. WordPiece (BERT's
//! `##` pieces) and the toy vocabularies have no byte form: they get no texts.

use std::collections::BTreeSet;
use tokenizers::Tokenizer;

/// How a vocabulary spells bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scheme {
    ByteLevel,
    SentencePiece { byte_fallback: bool },
}

/// Decodes the tokens of one vocabulary.
#[derive(Debug, Clone)]
pub struct TokenText {
    scheme: Scheme,
    /// Added and special tokens: written as themselves, not in the byte alphabet.
    added: BTreeSet<String>,
}

impl TokenText {
    /// The decoder for `tok`'s vocabulary, or None when its tokens are not spelled in bytes
    /// (WordPiece, or a decoder this does not know). The scheme is read from the tokenizer's
    /// own decoder, which a `tokenizer.json` and a GGUF file's metadata both set, so neither
    /// loader needs to say which spelling it built.
    pub fn of(tok: &Tokenizer) -> Option<TokenText> {
        let decoder = serde_json::to_value(tok.get_decoder()?).ok()?;
        let mut types = Vec::new();
        decoder_types(&decoder, &mut types);
        let has = |t: &str| types.iter().any(|x| x == t);
        let scheme = if has("ByteLevel") {
            Scheme::ByteLevel
        } else if has("ByteFallback") || has("Metaspace") || replaces_metaspace(&decoder) {
            Scheme::SentencePiece { byte_fallback: has("ByteFallback") }
        } else {
            return None;
        };
        let added = tok.get_added_tokens_decoder().into_values().map(|t| t.content).collect();
        Some(TokenText { scheme, added })
    }

    /// The text `token` spells: valid UTF-8 as text, partial characters as `<0x..>` markers.
    pub fn text(&self, token: &str) -> String {
        if self.added.contains(token) {
            return token.to_string();
        }
        let bytes = match self.scheme {
            Scheme::ByteLevel => match token.chars().map(unbyte).collect::<Option<Vec<u8>>>() {
                Some(b) => b,
                // Not in the byte alphabet: a token added without being declared (kept whole).
                None => return token.to_string(),
            },
            Scheme::SentencePiece { byte_fallback } => match byte_piece(token).filter(|_| byte_fallback) {
                Some(b) => vec![b],
                None => token.replace('▁', " ").into_bytes(),
            },
        };
        partial(&bytes)
    }
}

/// The texts of `tokens` in `tok`'s vocabulary, or None when it has no byte form.
pub fn texts(tok: Option<&Tokenizer>, tokens: &[String]) -> Option<Vec<String>> {
    let d = TokenText::of(tok?)?;
    Some(tokens.iter().map(|t| d.text(t)).collect())
}

/// `bytes` as text: each valid UTF-8 run as it is, each byte that is not part of a whole
/// character as `<0xE5>` (upper-case hex), so two bytes of 巴 read `<0xE5><0xB7>`.
pub fn partial(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        out.extend(chunk.invalid().iter().map(|b| format!("<0x{b:02X}>")));
    }
    out
}

/// SentencePiece's byte piece `<0xE5>`: the byte.
fn byte_piece(token: &str) -> Option<u8> {
    let hex = token.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok()).flatten()
}

/// The byte GPT-2's `bytes_to_unicode` writes as `c`: printable Latin-1 bytes (`!`..`~`,
/// `¡`..`¬`, `®`..`ÿ`) as themselves, the other 68 as U+0100 onwards in byte order.
fn unbyte(c: char) -> Option<u8> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let c = c as u32;
    if c < 256 {
        return printable(c).then_some(c as u8);
    }
    let nth = c.checked_sub(256)? as usize;
    (0u32..256).filter(|&b| !printable(b)).nth(nth).map(|b| b as u8)
}

/// Every `"type"` in a decoder's JSON (a Sequence holds several).
fn decoder_types(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(t) = m.get("type").and_then(|t| t.as_str()) {
                out.push(t.to_string());
            }
            m.values().for_each(|x| decoder_types(x, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| decoder_types(x, out)),
        _ => {}
    }
}

/// Whether the decoder replaces `▁` by a space (Llama 2's `tokenizer.json`).
fn replaces_metaspace(v: &serde_json::Value) -> bool {
    v.to_string().contains("\"▁\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn byte_level() -> TokenText {
        TokenText { scheme: Scheme::ByteLevel, added: ["<|im_start|>".to_string()].into() }
    }

    #[test]
    fn the_byte_alphabet_maps_back_to_bytes() {
        let bl = byte_level();
        assert_eq!(bl.text("ĠcafÃ©"), " café");
        assert_eq!(bl.text("å·´é»İ"), "巴黎");
        assert_eq!(bl.text("Ċ"), "\n");
        assert_eq!(bl.text("ĉ"), "\t");
        assert_eq!(bl.text("<|im_start|>"), "<|im_start|>");
        // Every one of the 256 bytes has one character, and no two share one.
        let all: BTreeSet<u8> = (0..=0x143u32).filter_map(|c| char::from_u32(c).and_then(unbyte)).collect();
        assert_eq!(all.len(), 256);
        assert_eq!(unbyte('\u{144}'), None);
    }

    #[test]
    fn a_partial_character_is_shown_as_its_bytes() {
        let bl = byte_level();
        // 巴 is E5 B7 B4: two tokens of it.
        assert_eq!(bl.text("å·"), "<0xE5><0xB7>");
        assert_eq!(bl.text("´é»İ"), "<0xB4>黎");
        assert_eq!(bl.text("ĠcafÃ"), " caf<0xC3>");
        assert_eq!(partial(&[0xE5, 0xB7, b'a', 0xB4]), "<0xE5><0xB7>a<0xB4>");
    }

    #[test]
    fn sentencepiece_bytes_and_spaces() {
        let sp = TokenText { scheme: Scheme::SentencePiece { byte_fallback: true }, added: BTreeSet::new() };
        assert_eq!(sp.text("▁café"), " café");
        assert_eq!(sp.text("<0x0A>"), "\n");
        assert_eq!(sp.text("<0xE5>"), "<0xE5>");
        assert_eq!(sp.text("<0x41>"), "A");
        let no_fallback = TokenText { scheme: Scheme::SentencePiece { byte_fallback: false }, added: BTreeSet::new() };
        assert_eq!(no_fallback.text("<0x41>"), "<0x41>");
    }
}
