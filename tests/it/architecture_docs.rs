//! The documentation checked against the repository: nothing points outside it, the step
//! table of docs/OUTPUT.md is the catalogue, and every link leads somewhere. (Split from
//! architecture.rs, which keeps the import drawing's rules.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

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
