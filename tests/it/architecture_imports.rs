//! The import drawing of `src/`, read from the source as a reader draws it: every path a file
//! names (`use` lines with their groups expanded, `use crate::model::{self, ffn::{a, b}}`, and
//! paths written in code, `crate::model::patch::Sweep`, `super::intervene::ablate(…)`, a child
//! module's `attention::run(…)`, a name bound by a `use` and followed by `::`) becomes an arrow
//! from its file to the deepest module FILE that holds what it names: a module's own file, or
//! for an item the file of the module that defines it, followed through `pub use` re-exports
//! (`crate::trace::Recorder` is `src/trace/record.rs`, not `src/trace/mod.rs`). Comments,
//! string and character literals are not code. A module imported whole by `use` is drawn where
//! its name is used (`use crate::model;` then `model::pass::Pass` is an arrow to pass.rs), since
//! the `use` line alone says nothing about which file is read. `super` inside an inline
//! `mod tests { … }` is the file's own module, so a test's `use super::*` is no arrow, and a
//! test module's own file (`settings/limits/tests.rs`) is test code, drawn without arrows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The drawing: each file (`src/model/ffn.rs`, relative to the crate) with its module path,
/// lines, and the files it imports.
pub struct Drawing {
    pub module: BTreeMap<String, Vec<String>>,
    pub lines: BTreeMap<String, usize>,
    pub edges: BTreeMap<String, BTreeSet<String>>,
    /// The code of each file (comments and literals removed), and where each arrow starts
    /// (a token index) with the item it names (`None`: a module), for `walk`.
    pub code: BTreeMap<String, Vec<Token>>,
    pub at: BTreeMap<String, Vec<(usize, String, Option<String>)>>,
    /// The names each file binds by `use`, resolved: name → (file, item).
    pub bound: BTreeMap<String, BTreeMap<String, (String, Option<String>)>>,
}

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/render/focus.rs` → ["render", "focus"]; `mod.rs` names its folder; `lib.rs` is the
/// root, `[]`; `main.rs`, a crate of its own, is `["main"]`.
pub fn module_of(rel: &str) -> Vec<String> {
    let rel = Path::new(rel).strip_prefix("src").unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().to_string()).collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] {
        parts.pop();
    }
    parts
}

#[derive(Clone, Debug, PartialEq)]
pub enum Token {
    Ident(String),
    Sep,
    Open,
    Close,
    Other(char),
}

/// The tokens of the code: identifiers, `::`, braces and single characters; comments (nested
/// block comments too), strings (raw ones too) and character literals dropped.
pub fn tokens(text: &str) -> Vec<Token> {
    let c: Vec<char> = text.chars().collect();
    let (mut out, mut i) = (Vec::new(), 0);
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let at = |k: usize| c.get(i + k).copied().unwrap_or('\0');
        if at(0) == '/' && at(1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if at(0) == '/' && at(1) == '*' {
            let (mut depth, mut j) = (1, i + 2);
            while j < c.len() && depth > 0 {
                match (c[j], c.get(j + 1).copied().unwrap_or('\0')) {
                    ('/', '*') => (depth, j) = (depth + 1, j + 2),
                    ('*', '/') => (depth, j) = (depth - 1, j + 2),
                    _ => j += 1,
                }
            }
            i = j;
        } else if (at(0) == 'r' || (at(0) == 'b' && at(1) == 'r')) && (i == 0 || !ident(c[i - 1])) && {
            let s = if at(0) == 'b' { 1 } else { 0 };
            let hashes = c[i + s + 1..].iter().take_while(|&&h| h == '#').count();
            c.get(i + s + 1 + hashes) == Some(&'"')
        } {
            // A raw string: r#"…"# ends at a quote followed by as many hashes.
            let s = if at(0) == 'b' { 1 } else { 0 };
            let hashes = c[i + s + 1..].iter().take_while(|&&h| h == '#').count();
            let mut j = i + s + 2 + hashes;
            while j < c.len() && !(c[j] == '"' && c[j + 1..].iter().take(hashes).all(|&h| h == '#')) {
                j += 1;
            }
            i = j + 1 + hashes;
        } else if at(0) == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            i = j + 1;
        } else if at(0) == '\'' && (at(2) == '\'' || (at(1) == '\\' && c[i + 2..].iter().take(10).any(|&q| q == '\'')))
        {
            // A character literal ('x', '\n', '\u{1F600}'); a lifetime ('a) has no closing quote.
            let mut j = i + if at(1) == '\\' { 3 } else { 1 };
            while j < c.len() && c[j] != '\'' {
                j += 1;
            }
            i = j + 1;
        } else if ident(at(0)) {
            let start = i;
            while i < c.len() && ident(c[i]) {
                i += 1;
            }
            out.push(Token::Ident(c[start..i].iter().collect()));
        } else {
            match at(0) {
                ':' if at(1) == ':' => {
                    out.push(Token::Sep);
                    i += 1;
                }
                '{' => out.push(Token::Open),
                '}' => out.push(Token::Close),
                ch if ch.is_whitespace() => {}
                ch => out.push(Token::Other(ch)),
            }
            i += 1;
        }
    }
    out
}

/// One leaf of a path tree: its segments, the name it binds in a `use` (its last segment or
/// its `as` name), or `None` for a glob.
#[derive(Debug)]
pub struct Leaf {
    pub path: Vec<String>,
    pub binds: Option<String>,
}

fn ident(t: Option<&Token>) -> Option<&str> {
    match t {
        Some(Token::Ident(s)) => Some(s),
        _ => None,
    }
}

/// Parses the path tree starting at `t[i]` (`a::b::{c, d::{self, e as f}, *}`), returning its
/// leaves and the index after it.
pub fn tree(t: &[Token], mut i: usize, prefix: &[String], out: &mut Vec<Leaf>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match t.get(i) {
            Some(Token::Ident(s)) if s == "self" && !path.is_empty() && path.len() == prefix.len() => {
                i += 1;
            }
            Some(Token::Ident(s)) => {
                path.push(s.clone());
                i += 1;
            }
            Some(Token::Other('*')) => {
                out.push(Leaf { path, binds: None });
                return i + 1;
            }
            Some(Token::Open) => {
                i += 1;
                while !matches!(t.get(i), Some(Token::Close) | None) {
                    i = tree(t, i, &path, out);
                    if t.get(i) == Some(&Token::Other(',')) {
                        i += 1;
                    }
                }
                return i + 1;
            }
            _ => break,
        }
        let grouped = t.get(i + 1).is_some_and(|n| matches!(n, Token::Open | Token::Other('*')));
        if t.get(i) == Some(&Token::Sep) && (ident(t.get(i + 1)).is_some() || grouped) {
            i += 1;
        } else {
            break;
        }
    }
    let mut binds = path.last().cloned();
    if ident(t.get(i)) == Some("as") {
        binds = ident(t.get(i + 1)).map(String::from);
        i += 2;
    }
    out.push(Leaf { path, binds });
    i
}

/// A path found in a file: where (token index), in which module (inline `mod` blocks
/// included), its leaves, and whether it is a `use` (`pub use`: a re-export).
struct Found {
    at: usize,
    ctx: Vec<String>,
    leaves: Vec<Leaf>,
    is_use: bool,
    is_pub: bool,
}

/// Every path of a file's tokens, with the module it is written in.
fn paths(t: &[Token], me: &[String]) -> Vec<Found> {
    let (mut out, mut i, mut depth) = (Vec::new(), 0, 0);
    let mut inline: Vec<(String, i32)> = Vec::new();
    while i < t.len() {
        match &t[i] {
            Token::Open => depth += 1,
            Token::Close => {
                depth -= 1;
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Token::Ident(s) if s == "mod" => {
                if let (Some(name), Some(Token::Open)) = (ident(t.get(i + 1)), t.get(i + 2)) {
                    inline.push((name.to_string(), depth));
                    (i, depth) = (i + 3, depth + 1);
                    continue;
                }
            }
            Token::Ident(_) if i == 0 || t[i - 1] != Token::Sep => {
                let is_use = i > 0 && ident(t.get(i - 1)) == Some("use");
                if is_use || t.get(i + 1) == Some(&Token::Sep) {
                    let is_pub =
                        is_use && i > 1 && (ident(t.get(i - 2)) == Some("pub") || t[i - 2] == Token::Other(')'));
                    let ctx = me.iter().cloned().chain(inline.iter().map(|(n, _)| n.clone())).collect();
                    let mut leaves = Vec::new();
                    let end = tree(t, i, &[], &mut leaves);
                    out.push(Found { at: i, ctx, leaves, is_use, is_pub });
                    i = end.max(i + 1);
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// A path as written in module `ctx`, made absolute (from the crate root), or `None` when it
/// leaves the crate (std, candle, a type's associated item).
fn absolute(
    p: &[String],
    ctx: &[String],
    modules: &BTreeMap<Vec<String>, String>,
    bindings: &BTreeMap<String, Vec<String>>,
) -> Option<Vec<String>> {
    let in_main = ctx.first().is_some_and(|m| m == "main");
    let first = p.first()?.as_str();
    let (base, rest): (Vec<String>, &[String]) = match first {
        "crate" if !in_main => (Vec::new(), &p[1..]),
        "attn_trace" if in_main => (Vec::new(), &p[1..]),
        "self" => (ctx.to_vec(), &p[1..]),
        "super" => {
            let ups = p.iter().take_while(|s| *s == "super").count();
            (ctx[..ctx.len().checked_sub(ups)?].to_vec(), &p[ups..])
        }
        s if modules.contains_key(&[ctx, &[s.to_string()]].concat()) => (ctx.to_vec(), p),
        s => (bindings.get(s)?.clone(), &p[1..]),
    };
    Some(base.into_iter().chain(rest.iter().cloned()).collect())
}

/// The deepest module file holding what an absolute path names, through re-exports; and the
/// item it names there, by its last segment (`Plan::new` is `new`; `None`: the module itself).
fn resolve(
    p: &[String],
    modules: &BTreeMap<Vec<String>, String>,
    reexports: &BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
    hops: u8,
) -> (String, Option<String>) {
    let k = (0..=p.len()).rev().find(|&k| modules.contains_key(&p[..k])).unwrap_or(0);
    let (m, rest) = (&p[..k], &p[k..]);
    if let Some(to) = rest.first().and_then(|r| reexports.get(m)?.get(r)) {
        if hops < 8 {
            return resolve(&[&to[..], &rest[1..]].concat(), modules, reexports, hops + 1);
        }
    }
    (modules[m].clone(), rest.last().cloned())
}

impl Drawing {
    /// Reads every file of `src/`.
    pub fn read() -> Drawing {
        let mut all = Vec::new();
        rust_files(&root().join("src"), &mut all);
        let rel = |p: &PathBuf| p.strip_prefix(root()).unwrap().display().to_string();
        let names: Vec<String> = all.iter().map(rel).collect();
        let files: BTreeMap<Vec<String>, String> = names.iter().map(|n| (module_of(n), n.clone())).collect();
        let module: BTreeMap<String, Vec<String>> = names.iter().map(|n| (n.clone(), module_of(n))).collect();
        let mut code = BTreeMap::new();
        let mut lines = BTreeMap::new();
        for (n, p) in names.iter().zip(&all) {
            let text = std::fs::read_to_string(p).unwrap();
            lines.insert(n.clone(), text.lines().count());
            code.insert(n.clone(), tokens(&text));
        }
        let found: BTreeMap<&String, Vec<Found>> = names.iter().map(|n| (n, paths(&code[n], &module[n]))).collect();
        // What each file binds with `use`, and what each module re-exports.
        let mut bindings: BTreeMap<&String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        let mut reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for n in &names {
            let b = bindings.entry(n).or_default();
            for f in found[n].iter().filter(|f| f.is_use) {
                for l in &f.leaves {
                    let (Some(name), Some(abs)) = (&l.binds, absolute(&l.path, &f.ctx, &files, &BTreeMap::new()))
                    else {
                        continue;
                    };
                    b.insert(name.clone(), abs.clone());
                    if f.is_pub && f.ctx == module[n] {
                        reexports.entry(module[n].clone()).or_default().insert(name.clone(), abs);
                    }
                }
            }
        }
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut at: BTreeMap<String, Vec<(usize, String, Option<String>)>> = BTreeMap::new();
        for n in &names {
            let e = edges.entry(n.clone()).or_default();
            // A test module's file (`limits/tests.rs`, `use super::*`) is test code, not drawn.
            let test_code = module[n].last().is_some_and(|m| m == "tests");
            for f in found[n].iter().filter(|_| !test_code) {
                for l in &f.leaves {
                    let Some(abs) = absolute(&l.path, &f.ctx, &files, &bindings[n]) else { continue };
                    let (to, item) = resolve(&abs, &files, &reexports, 0);
                    let whole_module = item.is_none();
                    // A module named by a private `use` is drawn where its name is used.
                    let bound_only = f.is_use && !f.is_pub && whole_module && l.binds.is_some();
                    if to != *n && !bound_only {
                        e.insert(to.clone());
                        at.entry(n.clone()).or_default().push((f.at, to, item));
                    }
                }
            }
        }
        let bound = bindings
            .iter()
            .map(|(n, b)| {
                ((*n).clone(), b.iter().map(|(k, p)| (k.clone(), resolve(p, &files, &reexports, 0))).collect())
            })
            .collect();
        Drawing { module, lines, edges, code, at, bound }
    }
}

/// The parser on the shapes the source uses: a grouped import with `self`, nesting, a rename
/// and a glob; comments and strings are not code; a path in code ends at a turbofish.
#[test]
fn architecture_imports_expand_groups_and_skip_comments() {
    let leaves = |src: &str| {
        let t = tokens(src);
        let mut out = Vec::new();
        tree(&t, 1, &[], &mut out);
        out.iter().map(|l| format!("{}={}", l.path.join("::"), l.binds.as_deref().unwrap_or("*"))).collect::<Vec<_>>()
    };
    let grouped = "use crate::model::{self, ffn::{a, b as c}, super::x, *};";
    let want = ["crate::model=model", "crate::model::ffn::a=a", "crate::model::ffn::b=c", "crate::model::super::x=x"];
    assert_eq!(leaves(grouped)[..4], want);
    assert_eq!(leaves(grouped)[4], "crate::model=*");
    assert_eq!(leaves("use super::super::f;"), ["super::super::f=f"]);
    let code = tokens("// crate::a::b\n let s = \"crate::c\"; /* crate::d /* */ */ let c = '\"'; crate::e::<T>::f();");
    let idents: Vec<&Token> = code.iter().filter(|t| matches!(t, Token::Ident(s) if s == "crate")).collect();
    assert_eq!(idents.len(), 1, "{code:?}");
    assert_eq!(leaves("x crate::e::<T>::f"), ["crate::e=e"]);
}
