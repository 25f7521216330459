//! Text layout shared by the text renderers: wrapping, cutting, column blocks, escaping.
//!
//! Input text (a sentence, a token, a file name) can hold control characters: ESC starts a
//! terminal escape sequence that can recolour or retitle the user's terminal, BEL rings,
//! NUL and the rest confuse pagers. Every text renderer shows such characters through
//! [`printable`] (JSON keeps the exact strings, escaped as JSON).

use std::borrow::Cow;

/// `s` with every control character shown as a visible escape: `\n`, `\t`, `\r`, or
/// `\u{1b}`. Text without control characters is returned as it is.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Breaks `text` at spaces so that no line is wider than `width` where words allow; the
/// text's own leading spaces stay on its first line, later lines start with `indent`.
/// A word wider than a line is broken into pieces that fit, so that no line is ever wider.
pub fn wrap_words(text: &str, width: usize, indent: &str) -> Vec<String> {
    let text = printable(text);
    let body = text.trim_start_matches(' ');
    let mut lines = vec![text[..text.len() - body.len()].to_string()];
    let mut fresh = true;
    let room = width.saturating_sub(indent.chars().count()).max(1);
    let pieces = body.split(' ').flat_map(|word| {
        let chars: Vec<char> = word.chars().collect();
        // (Where the indent leaves almost no room, as only tests do, words stay whole.)
        let parts: Vec<String> = if chars.len() <= room || room < 8 {
            vec![word.to_string()]
        } else {
            chars.chunks(room).map(|c| c.iter().collect()).collect()
        };
        parts
    });
    for word in pieces {
        let word = word.as_str();
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

/// Items joined by two spaces, as many to a line as fit `room` columns, the lines joined by
/// `\n` (a table cell of several lines): every item is shown, and none is broken between
/// lines; only an item wider than a whole line is [`cut`] (with `…`) to fit it.
pub fn fill(items: impl IntoIterator<Item = String>, room: usize) -> String {
    let room = room.max(1);
    let mut lines: Vec<String> = Vec::new();
    for item in items {
        let item = if item.chars().count() > room { cut(&item, room) } else { item };
        match lines.last_mut() {
            Some(cur) if cur.chars().count() + 2 + item.chars().count() <= room => {
                cur.push_str("  ");
                cur.push_str(&item);
            }
            _ => lines.push(item),
        }
    }
    lines.join("\n")
}

/// Items joined by two spaces on one line of at most `room` columns: as many as fit, then
/// ` +N`, the number left out, so that a cut is never silent (a first item wider than the
/// line is [`cut`] with `…`). For cells that stay one line, such as a summary's rows.
pub fn line(items: &[String], room: usize) -> String {
    let mut cell = String::new();
    for (i, item) in items.iter().enumerate() {
        let sep = if cell.is_empty() { 0 } else { 2 };
        let later = items.len() - i - 1;
        // Room is kept for the mark that later items would need.
        let mark = if later > 0 { format!(" +{later}").len() } else { 0 };
        let used = cell.chars().count();
        if used + sep + item.chars().count() + mark > room {
            if cell.is_empty() {
                // The first item, cut: only the later ones are left out.
                let left = if later > 0 { format!(" +{later}") } else { String::new() };
                return format!("{}{left}", cut(item, room.saturating_sub(left.len()).max(1)));
            }
            cell.push_str(&format!(" +{}", items.len() - i));
            return cell;
        }
        cell.push_str(&"  "[..sep]);
        cell.push_str(item);
    }
    cell
}

/// A column header broken into lines of at most `room` columns (at spaces where it can be),
/// so that a long header does not make its column wider than the cells leave it.
pub fn header(text: &str, room: usize) -> String {
    wrap_words(text, room.max(1), "").join("\n")
}

/// Splits `cols` equal `slot`-wide columns after a `fixed`-wide label into blocks that fit,
/// as even as they can be (8 columns in two blocks are 4 + 4, not 7 + 1).
pub fn blocks(cols: usize, slot: usize, fixed: usize, width: usize) -> Vec<(usize, usize)> {
    let fit = (width.saturating_sub(fixed) / slot.max(1)).max(1);
    let per = cols.div_ceil(cols.div_ceil(fit).max(1)).max(1);
    (0..cols).step_by(per).map(|s| (s, (s + per).min(cols))).collect()
}

/// Joins title parts with " · " (two spaces before the bracketed shape), breaking lines so
/// that none is wider than `width` where the parts allow it.
pub fn wrap_parts(parts: &[String], width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for part in parts {
        let part = &printable(part).into_owned();
        let sep = if part.starts_with('[') { "  " } else { " · " };
        let cur = lines.last_mut().expect("lines starts non-empty");
        if cur.is_empty() {
            cur.push_str(part);
        } else if cur.chars().count() + sep.len() + part.chars().count() > width {
            lines.push(part.to_string());
        } else {
            cur.push_str(sep);
            cur.push_str(part);
        }
    }
    hard_break(lines, width)
}

/// Breaks any line still wider than `width` (one part or word longer than a line) into
/// pieces that fit, so that no line is ever wider.
fn hard_break(lines: Vec<String>, width: usize) -> Vec<String> {
    let width = width.max(1);
    lines
        .into_iter()
        .flat_map(|l| {
            let chars: Vec<char> = l.chars().collect();
            if chars.len() <= width {
                vec![l]
            } else {
                chars.chunks(width).map(|c| c.iter().collect()).collect()
            }
        })
        .collect()
}

/// Breaks `text` after its ", " separators so that no line is wider than `width`.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let text = printable(text);
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
    lines.iter().flat_map(|l| break_words(l, width)).collect()
}

/// Breaks a line wider than `width` at its last space that fits, else after its last path
/// separator that fits, continuing under a two-space indent: a model's path stays whole
/// where it fits a line and otherwise breaks between folders, never mid-name. Only a word
/// with neither, wider than a line, is cut where the line ends.
fn break_words(line: &str, width: usize) -> Vec<String> {
    // Too narrow for an indent to leave room (only tests go there): cut as `hard_break` does.
    if width < 8 {
        return hard_break(vec![line.to_string()], width);
    }
    let mut out = Vec::new();
    let mut rest: Vec<char> = line.chars().collect();
    while rest.len() > width {
        let content = |i: usize| rest[..i].iter().any(|c| *c != ' ');
        let space = (1..width).rev().find(|&i| rest[i] == ' ' && content(i));
        let slash = (2..=width).rev().find(|&i| rest[i - 1] == '/' && content(i - 1));
        let (end, next) = match (space, slash) {
            (Some(i), _) => (i, i + 1),
            (None, Some(i)) => (i, i),
            (None, None) => (width, width),
        };
        out.push(rest[..end].iter().collect());
        rest = "  ".chars().chain(rest[next..].iter().copied()).collect();
    }
    out.push(rest.into_iter().collect());
    out
}

/// `s` made [`printable`], cut to `max` characters, the last one `…` when cut. Every token
/// label (`Trace::label`: the decoded text, spaces as `·`) goes through here.
pub fn cut(s: &str, max: usize) -> String {
    let s = printable(s).into_owned();
    if s.chars().count() <= max {
        s
    } else {
        s.chars().take(max - 1).chain(std::iter::once('…')).collect()
    }
}

/// Escapes text for XML content and attribute values; control characters are shown as
/// [`printable`] escapes (XML 1.0 cannot hold most of them, even escaped).
pub fn esc(s: &str) -> String {
    let s = printable(s);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_sent() {
        assert_eq!(printable("my shoes"), "my shoes");
        assert_eq!(printable("a\u{1b}[31mb\u{7}\0\n"), "a\\u{1b}[31mb\\u{7}\\u{0}\\n");
        assert_eq!(cut("\u{1b}]0;title\u{7}", 8), "\\u{1b}]…");
        assert_eq!(esc("<\u{1b}>"), "&lt;\\u{1b}&gt;");
    }

    #[test]
    fn a_path_breaks_between_folders() {
        let path = "/home/someone/models/a-rather-long-folder-name/SmolLM2-135M-Instruct.Q4_1.gguf";
        let lines = wrap(&format!("4 tokens, llama model {path} (gguf q4_1 weights, computed in f32)"), 50);
        assert!(lines.iter().all(|l| l.chars().count() <= 50), "{lines:?}");
        // Each folder and the file name whole on one line, and nothing lost.
        for name in path.split('/').filter(|n| !n.is_empty()) {
            assert!(lines.iter().any(|l| l.contains(name)), "{name}: {lines:?}");
        }
        let flat: String = lines.iter().map(|l| l.trim_start()).collect::<Vec<_>>().join("");
        assert!(flat.contains(path), "{lines:?}");
    }

    #[test]
    fn fill_keeps_every_item_within_the_room() {
        let items = ["·Paris 0.77", "·the 0.06", "·London 0.01", "·Le 0.01", "·a 0.01"].map(String::from);
        assert_eq!(fill(items.clone(), 80), "·Paris 0.77  ·the 0.06  ·London 0.01  ·Le 0.01  ·a 0.01");
        // 24 columns: two items to a line, every item kept whole.
        assert_eq!(fill(items.clone(), 24), "·Paris 0.77  ·the 0.06\n·London 0.01  ·Le 0.01\n·a 0.01");
        // An item wider than the room is cut, and says so.
        assert_eq!(fill(["·Constantinople 0.01".to_string()], 10), "·Constant…");
        assert_eq!(header("most likely next tokens", 12), "most likely\nnext tokens");
        // One line: what does not fit is counted, never dropped silently.
        let links = ["a(1)→b(2) 0.50", "c(3)→d(4) 0.25", "e(5)→f(6) 0.10"].map(String::from);
        assert_eq!(line(&links, 80), "a(1)→b(2) 0.50  c(3)→d(4) 0.25  e(5)→f(6) 0.10");
        assert_eq!(line(&links, 40), "a(1)→b(2) 0.50  c(3)→d(4) 0.25 +1");
        assert_eq!(line(&links, 16), "a(1)→b(2) 0.… +2");
    }

    #[test]
    fn a_word_wider_than_the_line_is_broken() {
        let lines = wrap_words(&"x".repeat(25), 10, "  ");
        assert!(lines.iter().all(|l| l.chars().count() <= 10), "{lines:?}");
        assert_eq!(lines.concat().replace(' ', ""), "x".repeat(25));
    }
}
