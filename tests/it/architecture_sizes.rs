//! The size rules of docs/ARCHITECTURE.md: no function over 80 lines and no file over 400
//! without a `long:` comment saying why, in the crate and in the Python bindings' crate.

use crate::architecture::code;
use crate::architecture_imports::rust_files;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// A `// long: why` comment (or `//! long: why` for a file) allows a longer function (file).
#[test]
fn functions_and_files_stay_small() {
    let mut paths = Vec::new();
    rust_files(&src(), &mut paths);
    // The Python bindings' crate keeps the same rules.
    let bindings = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/src");
    rust_files(&bindings, &mut paths);
    assert!(paths.iter().any(|p| p.starts_with(&bindings)), "python/src was not found");
    let mut long = Vec::new();
    for p in &paths {
        let text = std::fs::read_to_string(p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let name = p.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap().display().to_string();
        if lines.len() > 400 && !lines.iter().any(|l| l.starts_with("//! long:")) {
            long.push(format!("{name}: {} lines", lines.len()));
        }
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            let is_fn = ["fn ", "pub fn ", "pub(crate) fn ", "pub(super) fn ", "const fn ", "pub const fn "]
                .iter()
                .any(|k| t.starts_with(k));
            if !is_fn || t.ends_with(';') {
                continue;
            }
            let (mut depth, mut seen, mut end) = (0i64, false, i);
            for (j, body) in lines.iter().enumerate().skip(i) {
                let c = code(body);
                let c = strip_literals(&c);
                depth += c.matches('{').count() as i64 - c.matches('}').count() as i64;
                seen |= c.contains('{');
                if seen && depth <= 0 {
                    end = j;
                    break;
                }
            }
            let why = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.trim_start().starts_with("//") || l.trim_start().starts_with("#["))
                .any(|l| l.contains("long:"));
            if end - i + 1 > 80 && !why {
                long.push(format!("{name}:{}: a function of {} lines", i + 1, end - i + 1));
            }
        }
    }
    assert!(long.is_empty(), "over the size rules of docs/ARCHITECTURE.md without a `long:` comment: {long:#?}");
}

/// Braces inside string and char literals are not code.
fn strip_literals(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    let mut in_str = false;
    while let Some(c) = chars.next() {
        match (in_str, c) {
            (true, '\\') => {
                chars.next();
            }
            (true, '"') => in_str = false,
            (true, _) => {}
            (false, '"') => in_str = true,
            (false, '\'') if chars.clone().nth(1) == Some('\'') => {
                chars.next();
                chars.next();
            }
            (false, _) => out.push(c),
        }
    }
    out
}
