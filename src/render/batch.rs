//! A batch's output: one trace per sentence, each rendered as a single run would be, then
//! put together. `--format json` is a JSON array of the documents, in the batch's order;
//! `--format jsonl` is one whole document per line; every other format gives each trace a
//! title line naming the sentence. (`--html` and `--svg` put a batch's sentences together in
//! `html::write_batch` and `svg::write_batch`.)

use crate::settings::Format;
use std::io::{self, Write};

/// The line above one sentence's tables, e.g. `== sentence 2 of 3: my feet are big ==`, its
/// words wrapped to `width` where the sentence is longer than a line.
pub fn title(index: usize, count: usize, sentence: &str, width: usize) -> String {
    let line = format!("== sentence {} of {count}: {sentence} ==", index + 1);
    let lines = super::text::wrap_words(&line, width, "   ");
    format!("{}\n\n", lines.join("\n"))
}

/// One document on one line: the JSON writer's line breaks and the indentation after them
/// are structural white space (a line break inside a string is always escaped), so dropping
/// them leaves the same document.
pub fn one_line(doc: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(doc.len());
    let mut after_break = false;
    for &b in doc {
        match b {
            b'\n' | b'\r' => after_break = true,
            b' ' if after_break => {}
            _ => {
                after_break = false;
                out.push(b);
            }
        }
    }
    out
}

/// Writes the rendered traces of a batch in `format` (each item as a single run renders it;
/// JSON items are whole documents).
pub fn write(items: &[Vec<u8>], format: Format, w: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Json => {
            w.write_all(b"[\n")?;
            for (i, doc) in items.iter().enumerate() {
                if i > 0 {
                    w.write_all(b",\n")?;
                }
                w.write_all(doc.trim_ascii_end())?;
            }
            w.write_all(b"\n]\n")
        }
        Format::Jsonl => items.iter().try_for_each(|doc| {
            w.write_all(&one_line(doc))?;
            w.write_all(b"\n")
        }),
        _ => items.iter().enumerate().try_for_each(|(i, item)| {
            if i > 0 {
                w.write_all(b"\n")?;
            }
            w.write_all(item)
        }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_line_keeps_the_document() {
        let doc = b"{\n  \"a\": [1, 2],\n  \"s\": \"x  y\\n\"\n}\n";
        let line = super::one_line(doc);
        assert_eq!(line, b"{\"a\": [1, 2],\"s\": \"x  y\\n\"}".to_vec());
        let a: serde_json::Value = serde_json::from_slice(doc).unwrap();
        assert_eq!(a, serde_json::from_slice::<serde_json::Value>(&line).unwrap());
    }
}
