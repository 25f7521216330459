//! docs/TUTORIAL.md is checked: every ```console block is a command (`$ attn-trace …`, one
//! line, run from the repository root) followed by its exact output, and the test runs each
//! command and compares. The outputs are attn-trace's own (a golden of its output, not of
//! PyTorch's): after an intended change, `UPDATE_TUTORIAL=1 cargo test tutorial` rewrites
//! them, and the diff is reviewed like code.

use crate::common::*;

/// Splits a command line as a POSIX shell would for the plain cases the tutorial uses:
/// white space separates words, and '…' or "…" quote.
fn words(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => (quote, any) = (Some(c), true),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (_, c) => (cur.push(c), any = true).1,
        }
    }
    assert!(quote.is_none(), "unclosed quote in {line:?}");
    if any {
        out.push(cur);
    }
    out
}

/// The tutorial's console blocks: (line index of the command, command, shown output).
fn blocks(text: &str) -> Vec<(usize, String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i] == "```console" {
            let end = (i + 1..lines.len()).find(|&j| lines[j] == "```").expect("an unclosed ```console block");
            let cmd = lines[i + 1].strip_prefix("$ ").expect("a console block starts with `$ attn-trace …`");
            let shown: String = lines[i + 2..end].iter().map(|l| format!("{l}\n")).collect();
            out.push((i + 1, cmd.to_string(), shown));
            i = end;
        }
        i += 1;
    }
    out
}

fn run(cmd: &str) -> String {
    let w = words(cmd);
    assert_eq!(w[0], "attn-trace", "tutorial commands run attn-trace: {cmd}");
    let out = crate::common::cmd().current_dir(root()).args(&w[1..]).output().unwrap();
    assert!(out.status.success(), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
    // Lines are compared without trailing spaces, as Markdown keeps them.
    String::from_utf8(out.stdout).unwrap().lines().map(|l| format!("{}\n", l.trim_end())).collect()
}

#[test]
fn tutorial_outputs_are_what_attn_trace_prints() {
    let path = root().join("docs/TUTORIAL.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let blocks = blocks(&text);
    assert!(blocks.len() >= 6, "the tutorial should show at least six commands");
    if std::env::var_os("UPDATE_TUTORIAL").is_some() {
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        for (at, cmd, shown) in blocks.iter().rev() {
            let n = shown.lines().count();
            let fresh: Vec<String> = run(cmd).lines().map(String::from).collect();
            lines.splice(at + 1..at + 1 + n, fresh);
        }
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        return;
    }
    for (at, cmd, shown) in &blocks {
        let got = run(cmd);
        assert!(
            &got == shown,
            "docs/TUTORIAL.md line {}: the output of `{cmd}` changed; if intended, run \
             UPDATE_TUTORIAL=1 cargo test tutorial and review the diff\n--- got ---\n{got}",
            at + 1
        );
    }
}

#[test]
fn command_lines_split_like_a_shell() {
    assert_eq!(words(r#"attn-trace "my shoes" --steps 'a,b'  x"#), ["attn-trace", "my shoes", "--steps", "a,b", "x"]);
    assert_eq!(words("a \"\" b"), ["a", "", "b"]);
}
