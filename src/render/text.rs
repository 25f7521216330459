//! Text layout shared by the text renderers: wrapping, cutting, column blocks, escaping.

/// Breaks `text` at spaces so that no line is wider than `width` where words allow; the
/// text's own leading spaces stay on its first line, later lines start with `indent`.
pub fn wrap_words(text: &str, width: usize, indent: &str) -> Vec<String> {
    let body = text.trim_start_matches(' ');
    let mut lines = vec![text[..text.len() - body.len()].to_string()];
    let mut fresh = true;
    for word in body.split(' ') {
        let cur = lines.last_mut().expect("lines starts non-empty");
        let len = cur.chars().count();
        if !fresh && len + 1 + word.chars().count() > width {
            lines.push(format!("{indent}{word}"));
        } else {
            if !fresh {
                cur.push(' ');
            }
            cur.push_str(word);
        }
        fresh = false;
    }
    lines
}

/// Splits `cols` equal `slot`-wide columns after a `fixed`-wide label into blocks that fit.
pub fn blocks(cols: usize, slot: usize, fixed: usize, width: usize) -> Vec<(usize, usize)> {
    let per = (width.saturating_sub(fixed) / slot.max(1)).max(1);
    (0..cols).step_by(per).map(|s| (s, (s + per).min(cols))).collect()
}

/// Joins title parts with " · " (two spaces before the bracketed shape), breaking lines so
/// that none is wider than `width` where the parts allow it.
pub fn wrap_parts(parts: &[String], width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for part in parts {
        let sep = if part.starts_with('[') { "  " } else { " · " };
        let cur = lines.last_mut().expect("lines starts non-empty");
        if cur.is_empty() {
            cur.push_str(part);
        } else if cur.chars().count() + sep.len() + part.chars().count() > width {
            lines.push(part.clone());
        } else {
            cur.push_str(sep);
            cur.push_str(part);
        }
    }
    lines
}

/// Breaks `text` after its ", " separators so that no line is wider than `width`.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for (i, part) in text.split(", ").enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let cur = lines.last_mut().expect("lines starts non-empty");
        // One column is kept for the comma that ends a broken line.
        if !cur.is_empty() && cur.chars().count() + sep.len() + part.chars().count() + 1 > width {
            cur.push(',');
            lines.push(format!("  {part}"));
        } else {
            cur.push_str(sep);
            cur.push_str(part);
        }
    }
    lines
}

pub fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        s.chars().take(max - 1).chain(std::iter::once('…')).collect()
    }
}

/// Escapes text for XML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 cannot hold most control characters, even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}
