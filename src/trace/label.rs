//! A token's label: what tables, heatmaps, the HTML page and the SVG show for it.
//!
//! A real model's token has a decoded text (`sources/token_text.rs`: ` café`, `巴黎`,
//! `<0xE5><0xB7>` for part of a character); its label shows each space as `·` and a newline
//! as `↵`, so that a leading space stays visible. A token without one (WordPiece, the toy
//! vocabularies, a vocabulary whose decoder is unknown) is shown as spelled, with the
//! leading-space marks of byte-level BPE (`Ġ`) and SentencePiece (`▁`) as `·` and their
//! newlines (`Ċ`, `<0x0A>`) as `↵`. Control characters are escaped later, by the renderers.

use std::borrow::Cow;

/// The label of a token spelled `token` whose decoded text is `text`, if it has one.
pub fn label<'a>(token: &'a str, text: Option<&'a str>) -> Cow<'a, str> {
    match text {
        Some(t) if t.contains([' ', '\n']) => Cow::Owned(t.replace(' ', "·").replace('\n', "↵")),
        Some(t) => Cow::Borrowed(t),
        None => readable(token),
    }
}

/// A token without a decoded text, with the spelling's space and newline marks shown.
fn readable(s: &str) -> Cow<'_, str> {
    if s == "<0x0A>" {
        return Cow::Borrowed("↵");
    }
    if !s.contains(['Ġ', 'Ċ', '▁']) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.replace(['Ġ', '▁'], "·").replace('Ċ', "↵"))
}

#[cfg(test)]
mod tests {
    use super::label;

    #[test]
    fn spaces_and_newlines_are_marked() {
        assert_eq!(label("ĠcafÃ©", Some(" café")), "·café");
        assert_eq!(label("Ċ", Some("\n")), "↵");
        assert_eq!(label("å·´é»İ", Some("巴黎")), "巴黎");
        // A decoded text keeps a literal Ġ: only the spelling's marks are replaced.
        assert_eq!(label("Äł", Some("Ġ")), "Ġ");
        assert_eq!(label("Ġshoes", None), "·shoes");
        assert_eq!(label("<0x0A>", None), "↵");
        assert_eq!(label("##ing", None), "##ing");
    }
}
