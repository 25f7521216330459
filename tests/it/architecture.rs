//! The architecture of docs/ARCHITECTURE.md, checked on the source itself: modules import
//! only their own stage or earlier ones, no two files import each other in a circle, and no
//! function or file grows past its size without a comment saying why. Also the docs: their
//! step table is the catalogue, and their links lead somewhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module's stage. The vocabulary (0) is shared by all; a module may import
/// modules of a lower stage, never a later one; modules of the same stage (render, export)
/// do not import each other. `diff` and `compare` are sub-commands on top of everything.
const STAGES: &[(&str, u8)] = &[
    ("error", 0),
    ("config", 0),
    ("params", 0),
    ("torch_rng", 0),
    ("strict_json", 0),
    ("trace", 0),
    ("cli", 1),
    ("settings", 2),
    ("sources", 3),
    ("model", 4),
    ("views", 5),
    ("render", 6),
    ("export", 6),
    ("output", 7),
    ("diff", 8),
    ("compare", 9),
    ("batch", 10),
    ("generating", 10),
    ("explaining", 10),
    ("steering", 10),
    ("checking", 10),
    ("arithmetic", 10),
    ("serve", 10),
    ("command", 11),
];

/// Within the vocabulary, the order in which its modules may import each other.
const VOCABULARY: &[&str] = &["error", "torch_rng", "strict_json", "config", "trace", "params"];

/// `cli` is what was typed: settings read it, and the command hands it over; every later
/// stage reads `Settings` instead, although the stage order alone would let it import `cli`.
/// `compare`'s command line is the main command's flags for both sides (`Cli`, flattened).
const CLI_READERS: &[&str] = &["settings", "command", "compare"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/render/focus.rs` → ["render", "focus"]; `mod.rs` names its folder.
fn module_of(path: &Path) -> Vec<String> {
    let rel = path.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().to_string()).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        parts.clear();
    }
    parts
}

/// The source without comments, so that doc text naming a module is not an import.
fn code(text: &str) -> String {
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// Every module a file refers to: `crate::a::b::…` and `super::x` paths, resolved to the
/// longest path that is a module.
fn imports(path: &Path, modules: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let me = module_of(path);
    let text = code(&std::fs::read_to_string(path).unwrap());
    let resolve = |p: Vec<String>| (1..=p.len()).rev().map(|i| p[..i].to_vec()).find(|m| modules.contains(m));
    let mut out = BTreeSet::new();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    for (prefix, base) in [("crate::", Vec::new()), ("super::", me[..me.len().saturating_sub(1)].to_vec())] {
        for (i, _) in text.match_indices(prefix) {
            if i > 0 && text[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &text[i + prefix.len()..];
            let names: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
                let body = &group[..group.find('}').unwrap_or(0)];
                body.split(',').map(|n| n.trim().split("::").next().unwrap_or("").to_string()).collect()
            } else {
                vec![rest[..rest.find(|c: char| !ident(c)).unwrap_or(rest.len())].trim_end_matches(':').to_string()]
            };
            for n in names {
                let mut p = base.clone();
                p.extend(n.split("::").filter(|s| !s.is_empty()).map(String::from));
                if let Some(m) = resolve(p) {
                    if !me.starts_with(&m) {
                        out.insert(m);
                    }
                }
            }
        }
    }
    out
}

fn stage(m: &[String]) -> Option<u8> {
    STAGES.iter().find(|(n, _)| m.first().is_some_and(|f| f == n)).map(|(_, s)| *s)
}

#[test]
fn stages_import_only_earlier_stages_and_files_form_no_cycle() {
    let mut paths = Vec::new();
    files(&src(), &mut paths);
    let modules: BTreeSet<Vec<String>> = paths.iter().map(|p| module_of(p)).collect();
    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for p in &paths {
        let me = module_of(p);
        let deps = imports(p, &modules);
        for d in &deps {
            let (Some(a), Some(b)) = (stage(&me), stage(d)) else { continue };
            let vocab_order = |m: &[String]| VOCABULARY.iter().position(|v| m[0] == *v);
            let backwards = if a == 0 && b == 0 {
                me[0] != d[0] && vocab_order(d) > vocab_order(&me)
            } else {
                b > a || (b == a && me[0] != d[0])
            };
            let reads_cli = d[0] == "cli" && !CLI_READERS.contains(&me[0].as_str());
            if backwards || reads_cli {
                wrong.push(format!("{} imports {}", me.join("::"), d.join("::")));
            }
        }
        graph.insert(me, deps);
    }
    assert!(wrong.is_empty(), "imports against the pipeline's direction: {wrong:#?}");
    // A depth-first search for a cycle among files.
    fn visit(
        m: &Vec<String>,
        g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<Vec<String>, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(1) => return Some(path.clone()),
            Some(_) => return None,
            None => {}
        }
        state.insert(m.clone(), 1);
        path.push(m.join("::"));
        for d in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(d, g, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(m.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in graph.keys() {
        let cycle = visit(m, &graph, &mut state, &mut Vec::new());
        assert!(cycle.is_none(), "an import cycle: {cycle:?}");
    }
    assert!(graph.len() > 40, "the source tree was not found ({} modules)", graph.len());
}

/// A `// long: why` comment (or `//! long: why` for a file) allows a longer function (file).
#[test]
fn functions_and_files_stay_small() {
    let mut paths = Vec::new();
    files(&src(), &mut paths);
    // The Python bindings' crate keeps the same rules.
    let bindings = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/src");
    files(&bindings, &mut paths);
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

/// Nothing in the repository points outside it (the design notes now live in docs/).
#[test]
fn no_reference_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    for dir in ["src", "tests", "docs", "examples", "fixtures", "python"] {
        let d = root.join(dir);
        if d.is_dir() {
            walk_text(&d, &mut paths);
        }
    }
    paths.extend(["README.md", "CHANGELOG.md", "BENCHMARKS.md"].iter().map(|f| root.join(f)));
    let outside = ["../shared", "/work/shared", "shared/design", "shared/seeds", "shared/torch-rng"];
    let mut found = Vec::new();
    for p in paths {
        let Ok(text) = std::fs::read_to_string(&p) else { continue };
        for (i, l) in text.lines().enumerate() {
            if outside.iter().any(|o| l.contains(o)) && !l.contains("outside = [") {
                found.push(format!("{}:{}", p.strip_prefix(root).unwrap().display(), i + 1));
            }
        }
    }
    assert!(found.is_empty(), "references outside the repository: {found:#?}");
}

fn walk_text(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let skip = ["target", "corpus", "artifacts", "coverage"];
        if p.is_dir() && p.file_name().is_some_and(|n| skip.iter().any(|s| n == *s)) {
            continue;
        }
        if p.is_dir() {
            walk_text(&p, out);
        } else if p.extension().is_some_and(|x| ["rs", "md", "py", "sh", "txt"].iter().any(|t| x == *t)) {
            out.push(p);
        }
    }
}

/// The step table of docs/OUTPUT.md names exactly the catalogue's steps (`attn-trace schema`
/// is tested against it in src/trace/schema.rs).
#[test]
fn docs_step_table_is_the_catalogue() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/OUTPUT.md")).unwrap();
    let table = doc.split("## The steps").nth(1).expect("docs/OUTPUT.md has a steps section");
    let mut names = BTreeSet::new();
    for row in table.lines().skip_while(|l| !l.starts_with("| id")).skip(2).take_while(|l| l.starts_with('|')) {
        let first = row.split('|').nth(1).unwrap_or("");
        let mut prev = String::new();
        for id in first.split('`').skip(1).step_by(2) {
            // `layers.i.attn.q` `.k` `.v`: a leading dot replaces the last part of the one before.
            let full = match id.strip_prefix('.') {
                Some(tail) => format!("{}.{tail}", &prev[..prev.rfind('.').unwrap_or(0)]),
                None => id.to_string(),
            };
            names.insert(full.strip_prefix("layers.i.").unwrap_or(&full).to_string());
            prev = full;
        }
    }
    let catalogue: BTreeSet<String> = attn_trace::trace::steps::CATALOGUE.iter().map(|d| d.name.to_string()).collect();
    assert_eq!(names, catalogue, "docs/OUTPUT.md's step table and src/trace/steps.rs disagree");
}

/// Every relative link of README.md and the pages it leads to (docs/, CHANGELOG.md,
/// BENCHMARKS.md, fixtures/README.md) names a file of the repository, and every `#anchor`
/// a heading of the page it points into, so content moved between pages leaves no link behind.
#[test]
fn doc_links_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages: Vec<PathBuf> =
        ["README.md", "CHANGELOG.md", "BENCHMARKS.md", "fixtures/README.md"].iter().map(|f| root.join(f)).collect();
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            pages.push(p);
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for (i, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, anchor) = target.split_once('#').map_or((target, None), |(f, a)| (f, Some(a)));
                let path = if file.is_empty() { page.clone() } else { page.parent().unwrap().join(file) };
                let at = format!("{}:{}: {target}", page.strip_prefix(root).unwrap().display(), i + 1);
                if !path.exists() {
                    broken.push(format!("{at} (no such file)"));
                } else if let Some(anchor) = anchor {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    if !heading_anchors(&text).contains(anchor) {
                        broken.push(format!("{at} (no such heading)"));
                    }
                }
            }
        }
    }
    assert!(pages.len() > 10, "the docs were not found: {pages:?}");
    assert!(broken.is_empty(), "links that lead nowhere: {broken:#?}");
}

/// The lines outside ``` fences, with their index.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((i, l));
        }
    }
    out
}

/// The targets of the line's Markdown links and images, `[text](target)`.
fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let tail = &rest[at + 2..];
        let Some(end) = tail.find(')') else { break };
        out.push(&tail[..end]);
        rest = &tail[end..];
    }
    out
}

/// The anchors GitHub gives a page's headings: lower case, spaces as hyphens, every other
/// character but letters, digits, `-` and `_` dropped; a repeated one gets `-1`, `-2`, ….
fn heading_anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, l) in prose_lines(text) {
        let Some(title) = l.strip_prefix('#') else { continue };
        let title = title.trim_start_matches('#').trim();
        let mut slug = String::new();
        for c in title.chars() {
            match c {
                ' ' => slug.push('-'),
                '-' | '_' => slug.push(c),
                c if c.is_alphanumeric() => slug.extend(c.to_lowercase()),
                _ => {}
            }
        }
        let mut unique = slug.clone();
        for n in 1.. {
            if !out.contains(&unique) {
                break;
            }
            unique = format!("{slug}-{n}");
        }
        out.insert(unique);
    }
    out
}

/// A model family lives in its file under `sources/family/`: nowhere else asks which family
/// a model is (`model_type ==`, `is_gpt2`), and the registry (`family::DECODERS`) is the one
/// list of families, so `--model` dispatch, GGUF architectures and the "not supported"
/// messages cannot disagree. The forward pass reads only the vocabulary: `model/` imports no
/// reader (`sources`), settings, or later stage.
#[test]
fn family_logic_lives_in_family_files_and_the_model_imports_no_reader() {
    let mut paths = Vec::new();
    files(&src(), &mut paths);
    let modules: BTreeSet<Vec<String>> = paths.iter().map(|p| module_of(p)).collect();
    let family = src().join("sources/family");
    let mut wrong = Vec::new();
    for p in &paths {
        let me = module_of(p);
        let text = code(&std::fs::read_to_string(p).unwrap());
        let asks = ["model_type ==", "model_type !=", "is_gpt2", "model_type() =="].iter().find(|k| text.contains(*k));
        if let (Some(k), false) = (asks, p.starts_with(&family)) {
            wrong.push(format!("{} asks which family a model is ({k})", me.join("::")));
        }
        if me.first().is_some_and(|m| m == "model") {
            for d in imports(p, &modules) {
                if d[0] != "model" && stage(&d) != Some(0) {
                    wrong.push(format!("{} imports {}", me.join("::"), d.join("::")));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "family logic outside sources/family/, or a model import: {wrong:#?}");
}
