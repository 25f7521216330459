//! The architecture of docs/ARCHITECTURE.md, checked on the source itself, as an import
//! drawing shows it (tests/it/architecture_imports.rs reads every path a file names into an
//! arrow to a module file): modules import only earlier stages, no arrow goes back up to an
//! ancestor's file, no files import each other in a circle, and no function or file grows past
//! its size without a comment saying why. The rules are the tables at the top: the lead adjusts
//! them, and docs/ARCHITECTURE.md's stage table must say the same (a test compares them).

use crate::architecture_imports::Drawing;
use std::collections::{BTreeMap, BTreeSet};

/// The stages, lowest first, each with its top modules (`src/NAME.rs` or `src/NAME/`;
/// `src/lib.rs` is `lib`, `src/main.rs`, the binary's own crate, `main`). A module may import
/// modules of a lower stage, never a later one; modules of one stage do not import each other,
/// except the vocabulary's, each of which imports only those before it in its list. A stage
/// whose folder does not exist yet (`run`, `analysis`) is simply empty; a top module missing
/// from this table fails the test until it is given a stage.
pub const STAGES: &[(&str, &[&str])] = &[
    ("vocabulary", &["error", "torch_rng", "strict_json", "config", "trace", "params", "hook"]),
    ("cli", &["cli"]),
    ("settings", &["settings"]),
    ("sources", &["sources"]),
    ("model", &["model"]),
    ("analysis", &["analysis"]),
    ("views", &["views"]),
    ("render", &["render", "export"]),
    ("output", &["output"]),
    ("diff", &["diff"]),
    ("run", &["run"]),
    ("compare", &["compare"]),
    ("serve", &["serve"]),
    ("command", &["command"]),
    ("lib", &["lib"]),
    ("main", &["main"]),
];

/// Stages that may import only some of the stages below them: the forward pass reads only the
/// vocabulary (no reader, no settings), and an analysis only the model and the vocabulary.
pub const ONLY: &[(&str, &[&str])] = &[("model", &["vocabulary"]), ("analysis", &["model", "vocabulary"])];

/// `cli` is what was typed: settings read it, and the command (and `lib.rs::run`) hands it
/// over; every later stage reads `Settings` instead, although the stage order alone would let
/// it import `cli`. `compare`'s command line is the main command's flags for both sides.
pub const CLI_READERS: &[&str] = &["settings", "command", "compare", "lib"];

/// Today's violations (issue 49), each a pair of files (from, to): tolerated, printed, and to
/// be emptied by the refactor. A pair not listed fails the test, and so does a listed pair
/// that is no longer a violation, so this list only shrinks and stays true.
pub const ALLOWLIST: &[(&str, &str)] = &[
    // Empty since issue 49: a violation would have to be named here, with why.
];

/// The top module of a file: `src/model/ffn.rs` → `model`; `src/lib.rs` → `lib`.
pub fn top(d: &Drawing, file: &str) -> String {
    d.module[file].first().cloned().unwrap_or_else(|| "lib".into())
}

/// The index in `STAGES` of a top module's stage.
pub fn stage(top: &str) -> Option<usize> {
    STAGES.iter().position(|(_, ms)| ms.contains(&top))
}

/// An arrow back up: `to` is the file of one of `from`'s ancestor modules (its parent's
/// `mod.rs`, a grandparent's), as `src/model/attention.rs` using `super::linear`, defined in
/// `src/model/mod.rs`. A module's file importing its children (`mod.rs`'s `pub use`
/// re-exports, a parent calling `attention::run`) points down and is fine. `lib.rs`, the root
/// and every file's ancestor, is a stage of its own: an arrow to it goes back up from a file of
/// a lower stage (`batch.rs`, `serve/worker.rs` calling `crate::computed`), not from
/// `command`, which sits above it. `main.rs` is a crate of its own and has no ancestor.
pub fn back_up(d: &Drawing, from: &str, to: &str) -> bool {
    let (f, t) = (&d.module[from], &d.module[to]);
    if to == "src/lib.rs" {
        return from != "src/main.rs" && stage(&top(d, from)) < stage("lib");
    }
    from != "src/main.rs" && t.len() < f.len() && f.starts_with(t)
}

/// What is wrong with an arrow by the tables above (nothing: empty).
fn wrong(d: &Drawing, from: &str, to: &str) -> Vec<String> {
    let mut out = Vec::new();
    if back_up(d, from, to) {
        out.push("back up".to_string());
    }
    let (a, b) = (top(d, from), top(d, to));
    let (Some(sa), Some(sb)) = (stage(&a), stage(&b)) else { return out };
    if a == b {
        return out;
    }
    let order = |m: &str| STAGES[0].1.iter().position(|v| *v == m);
    if sa == 0 && sb == 0 {
        if order(&b) > order(&a) {
            out.push("later in the vocabulary".to_string());
        }
    } else if sb > sa {
        out.push(format!("stage {} imports the later {}", STAGES[sa].0, STAGES[sb].0));
    } else if sb == sa {
        out.push(format!("within stage {}", STAGES[sa].0));
    }
    if b == "cli" && !CLI_READERS.contains(&a.as_str()) {
        out.push("reads cli".to_string());
    }
    if let Some((s, may)) = ONLY.iter().find(|(s, _)| *s == STAGES[sa].0) {
        if !may.contains(&STAGES[sb].0) {
            out.push(format!("{s} may import only {}", may.join(", ")));
        }
    }
    out
}

/// The cycles among files (Tarjan's strongly connected components of more than one file),
/// arrows back up left out: they are reported as such, and each would close a cycle with its
/// parent's `mod` line.
pub fn cycles(d: &Drawing) -> Vec<Vec<String>> {
    struct Walk<'a> {
        d: &'a Drawing,
        index: BTreeMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let n = w.index.len();
        w.index.insert(v, (n, n));
        w.stack.push(v);
        for t in &w.d.edges[v] {
            if back_up(w.d, v, t) {
                continue;
            }
            if !w.index.contains_key(t.as_str()) {
                visit(w, t);
                let low = w.index[t.as_str()].1.min(w.index[v].1);
                w.index.get_mut(v).unwrap().1 = low;
            } else if w.stack.contains(&t.as_str()) {
                let low = w.index[t.as_str()].0.min(w.index[v].1);
                w.index.get_mut(v).unwrap().1 = low;
            }
        }
        if w.index[v].0 == w.index[v].1 {
            let at = w.stack.iter().position(|s| *s == v).unwrap();
            let scc: Vec<String> = w.stack.drain(at..).map(String::from).collect();
            if scc.len() > 1 {
                w.out.push(scc.into_iter().collect::<BTreeSet<_>>().into_iter().collect());
            }
        }
    }
    let mut w = Walk { d, index: BTreeMap::new(), stack: Vec::new(), out: Vec::new() };
    for v in d.edges.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.out.sort();
    w.out
}

/// Every violation of the drawing: (from, to) → what is wrong with it.
pub fn violations(d: &Drawing) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut found: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (f, tos) in &d.edges {
        for t in tos {
            for w in wrong(d, f, t) {
                found.entry((f.clone(), t.clone())).or_default().insert(w);
            }
        }
    }
    for c in cycles(d) {
        for f in &c {
            for t in d.edges[f].iter().filter(|t| c.contains(t) && !back_up(d, f, t)) {
                found.entry((f.clone(), t.clone())).or_default().insert(format!("cycle {}", c.join(" ↔ ")));
            }
        }
    }
    found
}

#[test]
fn imports_follow_the_stages_and_no_arrow_goes_back_up_or_round() {
    let d = Drawing::read();
    assert!(d.lines.len() > 40, "the source tree was not found ({} files)", d.lines.len());
    let unstaged: Vec<&String> = d.lines.keys().filter(|f| stage(&top(&d, f)).is_none()).collect();
    assert!(unstaged.is_empty(), "files of a top module with no stage (add it to STAGES): {unstaged:#?}");
    let found = violations(&d);
    crate::architecture_walk::report(&d, &found);
    let allowed: BTreeSet<(String, String)> = ALLOWLIST.iter().map(|(f, t)| (f.to_string(), t.to_string())).collect();
    let line = |(f, t): &(String, String)| format!("(\"{f}\", \"{t}\"),");
    let new: Vec<String> = found
        .iter()
        .filter(|(k, _)| !allowed.contains(*k))
        .map(|(k, w)| format!("{} // {}", line(k), w.iter().cloned().collect::<Vec<_>>().join("; ")))
        .collect();
    let gone: Vec<String> = allowed.iter().filter(|k| !found.contains_key(*k)).map(line).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "imports against docs/ARCHITECTURE.md: {new:#?}\nallowlisted pairs that are no longer violations \
         (take them off ALLOWLIST): {gone:#?}"
    );
}

/// What a stage may import, as docs/ARCHITECTURE.md's stage table writes it.
fn may_import(i: usize) -> String {
    if i == 0 {
        return "each other, in the order listed".to_string();
    }
    let (name, modules) = STAGES[i];
    let only = ONLY.iter().find(|(s, _)| *s == name).map(|(_, m)| *m);
    let readers: Vec<&str> = modules.iter().copied().filter(|m| CLI_READERS.contains(m)).collect();
    let mut out = Vec::new();
    for (lower, _) in STAGES[..i].iter().rev() {
        if only.is_some_and(|o| !o.contains(lower)) || (*lower == "cli" && readers.is_empty()) {
            continue;
        }
        match *lower {
            "cli" if readers.len() < modules.len() => out.push(format!("cli (`{}` only)", readers.join("`, `"))),
            _ => out.push(lower.to_string()),
        }
    }
    out.join(", ")
}

/// docs/ARCHITECTURE.md's stage table is `STAGES` (with `ONLY` and `CLI_READERS`), row by row.
#[test]
fn architecture_doc_stage_table_is_the_tests() {
    let doc = std::fs::read_to_string(crate::architecture_imports::root().join("docs/ARCHITECTURE.md")).unwrap();
    let table = doc.split("### The stage table").nth(1).expect("docs/ARCHITECTURE.md has a stage table");
    let rows: Vec<&str> =
        table.lines().skip_while(|l| !l.starts_with("| stage")).skip(2).take_while(|l| l.starts_with('|')).collect();
    let expected: Vec<String> = (0..STAGES.len())
        .rev()
        .map(|i| {
            let modules: Vec<String> = STAGES[i].1.iter().map(|m| format!("`{m}`")).collect();
            format!("| {} | {} | {} |", STAGES[i].0, modules.join(", "), may_import(i))
        })
        .collect();
    assert_eq!(rows, expected, "docs/ARCHITECTURE.md's stage table and tests/it/architecture.rs disagree");
}

/// The source without line comments.
pub fn code(text: &str) -> String {
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// A model family lives in its file under `sources/family/`: nothing else asks which family
/// a model is (`model_type ==`, `is_gpt2`), and the registry (`family::DECODERS`) is the one
/// list of families, so `--model` dispatch, GGUF architectures and the "not supported"
/// messages cannot disagree. The forward pass reads only the vocabulary: `model/` imports no
/// reader (`sources`), settings, or later stage (also `ONLY`'s rule, kept here by name).
#[test]
fn family_logic_lives_in_family_files_and_the_model_imports_no_reader() {
    let d = Drawing::read();
    let allowed: BTreeSet<(&str, &str)> = ALLOWLIST.iter().copied().collect();
    let mut wrong = Vec::new();
    for f in d.code.keys() {
        let text = code(&std::fs::read_to_string(crate::architecture_imports::root().join(f)).unwrap());
        let asks = ["model_type ==", "model_type !=", "is_gpt2", "model_type() =="].iter().find(|k| text.contains(*k));
        if let (Some(k), false) = (asks, f.starts_with("src/sources/family/")) {
            wrong.push(format!("{f} asks which family a model is ({k})"));
        }
        if top(&d, f) == "model" {
            for t in &d.edges[f] {
                let outside = top(&d, t) != "model" && stage(&top(&d, t)) != Some(0);
                if outside && !allowed.contains(&(f.as_str(), t.as_str())) {
                    wrong.push(format!("{f} imports {t}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "family logic outside sources/family/, or a model import: {wrong:#?}");
}
